package tracking

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net/url"
	"strings"

	"github.com/google/uuid"
	xhtml "golang.org/x/net/html"
)

// Options says how Rewrite changes a body.
type Options struct {
	// Link returns the tracked URL of the trackable link number i, whose
	// original URL is target; nil tracks no link.
	Link func(i int, target string) (string, error)
	// Keep says which trackable links are left as they are (the
	// unsubscribe links); nil keeps none.
	Keep func(target string) bool
	// Pixel is the URL of the open pixel; "" adds none.
	Pixel string
}

// Trackable returns the URL a link with attribute value href leads to,
// and whether it is one that is tracked: an absolute http or https URL
// with a host, of at most MaxURLLength bytes, holding no template
// placeholder. mailto:, tel:, #anchors, relative and javascript: links
// are not.
func Trackable(href string) (string, bool) {
	// Browsers strip leading and trailing spaces and C0 controls.
	target := strings.TrimFunc(href, func(r rune) bool { return r <= ' ' })
	if target == "" || len(target) > MaxURLLength || strings.Contains(target, "{{") {
		return "", false
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return target, true
	}
	return "", false
}

// PixelHTML returns the <img> element of an open pixel at src.
func PixelHTML(src string) string {
	return `<img src="` + html.EscapeString(src) +
		`" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0;" />`
}

// Rewrite returns body, an HTML document, with the href of every
// trackable <a> (see Trackable) that o.Keep does not keep replaced by
// o.Link's URL, and the open pixel o.Pixel inserted before the last
// </body> (or </html>, or at the end when there is neither), and the
// original URLs of the links it replaced, in order. Everything else is
// copied byte for byte: comments, scripts, styles and text are not
// touched, and only the rewritten <a> tags are rendered anew. Links past
// MaxLinks are left as they are.
func Rewrite(body string, o Options) (string, []string, error) {
	z := xhtml.NewTokenizer(strings.NewReader(body))
	var out bytes.Buffer
	out.Grow(len(body) + len(body)/4 + 256)
	var raw []byte
	var links []string
	bodyEnd, htmlEnd := -1, -1
	for {
		tt := z.Next()
		raw = append(raw[:0], z.Raw()...)
		switch tt {
		case xhtml.ErrorToken:
			out.Write(raw)
			if err := z.Err(); err != io.EOF {
				return "", nil, fmt.Errorf("reading html: %w", err)
			}
			s := out.String()
			if o.Pixel == "" {
				return s, links, nil
			}
			at := len(s)
			if bodyEnd >= 0 {
				at = bodyEnd
			} else if htmlEnd >= 0 {
				at = htmlEnd
			}
			return s[:at] + PixelHTML(o.Pixel) + s[at:], links, nil
		case xhtml.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "body":
				bodyEnd = out.Len()
			case "html":
				htmlEnd = out.Len()
			}
			out.Write(raw)
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken:
			if o.Link == nil || len(links) >= MaxLinks {
				out.Write(raw)
				continue
			}
			if !maybeAnchor(raw) {
				out.Write(raw)
				continue
			}
			tok := z.Token()
			if tok.Data != "a" || len(tok.Attr) == 0 {
				out.Write(raw)
				continue
			}
			changed, err := rewriteAnchor(&tok, &links, o)
			if err != nil {
				return "", nil, err
			}
			if changed {
				out.WriteString(tok.String())
			} else {
				out.Write(raw)
			}
		default:
			out.Write(raw)
		}
	}
}

// maybeAnchor says whether the raw start tag may be an <a> one, sparing
// the other tags the parsing of their attributes.
func maybeAnchor(raw []byte) bool {
	return len(raw) > 2 && (raw[1] == 'a' || raw[1] == 'A') &&
		(raw[2] <= ' ' || raw[2] == '/' || raw[2] == '>')
}

// rewriteAnchor replaces the first href of an <a> start tag when it is
// tracked, and drops any later one (browsers follow the first).
func rewriteAnchor(tok *xhtml.Token, links *[]string, o Options) (bool, error) {
	first := -1
	for i, a := range tok.Attr {
		if a.Namespace == "" && a.Key == "href" {
			first = i
			break
		}
	}
	if first < 0 {
		return false, nil
	}
	target, ok := Trackable(tok.Attr[first].Val)
	if !ok || (o.Keep != nil && o.Keep(target)) {
		return false, nil
	}
	tracked, err := o.Link(len(*links), target)
	if err != nil {
		return false, fmt.Errorf("tracking link: %w", err)
	}
	*links = append(*links, target)
	attrs := tok.Attr[:0:0]
	for i, a := range tok.Attr {
		switch {
		case i == first:
			a.Val = tracked
		case a.Namespace == "" && a.Key == "href":
			continue
		}
		attrs = append(attrs, a)
	}
	tok.Attr = attrs
	return true, nil
}

// Track returns the HTML body of one recipient of an email with its links
// (when clicks) and its open pixel (when opens) tracked through l, and
// the original URLs of the tracked links. keep says which links stay as
// they are (the unsubscribe links); nil keeps none.
func (l Links) Track(body string, teamID, emailID uuid.UUID, recipient int, opens, clicks bool,
	keep func(string) bool) (string, []string, error) {
	var o Options
	o.Keep = keep
	if clicks {
		o.Link = func(i int, target string) (string, error) {
			return l.ClickURL(teamID, emailID, recipient, i, target)
		}
	}
	if opens {
		px, err := l.OpenURL(teamID, emailID, recipient)
		if err != nil {
			return "", nil, err
		}
		o.Pixel = px
	}
	return Rewrite(body, o)
}
