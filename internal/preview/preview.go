// Package preview sets the headers under which an email's HTML is shown
// in a browser: the dashboard's preview frames and the public view of a
// shared email. The email is the sender's content (or a stranger's), so
// it runs nothing and loads nothing from the network until the viewer
// asks.
package preview

import "net/http"

// Headers sets the headers of a frame showing an email's HTML. The
// Content-Security-Policy (CSP Level 3) sandboxes it without scripts,
// forms or plugins whatever the viewer chose, and lets it load nothing
// from the network until the viewer asks: remote images would tell the
// sender that, when and from where the email was opened (a tracking
// pixel), and so would stylesheets and fonts. Inline styles and data:
// images are the email's own and always shown. With remote, images,
// stylesheets and fonts over http and https load too. The referrer stays
// home either way (Referrer-Policy, and no DNS prefetching of the email's
// links). Only a page of the same origin may frame it.
func Headers(h http.Header, remote bool) {
	policy := "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; " +
		"frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
	if remote {
		policy = "sandbox; default-src 'none'; img-src data: https: http:; style-src 'unsafe-inline' https: http:; " +
			"font-src data: https: http:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
	}
	h.Set("Content-Security-Policy", policy)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-DNS-Prefetch-Control", "off")
}
