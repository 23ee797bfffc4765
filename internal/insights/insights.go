// Package insights computes the deliverability findings of an email when
// it is accepted (Resend's Insights): things in the message or in its
// sender domain's published records that make mailbox providers file it
// as spam, clip it or reject it, each with a stable code, a severity, a
// message and a fix. The rules are pure: they read the message being
// stored and the domain's stored verification results, never DNS.
package insights

import (
	"fmt"
	"net/mail"
	"path"
	"sort"
	"strings"
	"unicode"
)

// Severities of a finding.
const (
	SeverityInfo    = "info"
	SeverityWarning = "warning"
	SeverityError   = "error"
)

// Codes of the findings, stable across releases: clients may match on them.
const (
	CodeNoTextAlternative      = "no_text_alternative"
	CodeHTMLClipped            = "html_clipped"
	CodeMostlyImages           = "mostly_images"
	CodeUnrelatedLinkDomains   = "unrelated_link_domains"
	CodeURLShortener           = "url_shortener"
	CodeBulkWithoutUnsubscribe = "bulk_without_unsubscribe"
	CodeTrackingOnSensitive    = "tracking_on_sensitive_email"
	CodeDMARCMissing           = "dmarc_missing"
	CodeDMARCNone              = "dmarc_policy_none"
	CodeFromNameIsAddress      = "from_name_looks_like_address"
	CodeNoReplyWithoutReplyTo  = "no_reply_without_reply_to"
	CodeRiskyAttachment        = "risky_attachment"
	CodeAllCapsSubject         = "all_caps_subject"
)

// Thresholds of the rules.
const (
	// ClipSize is the size of HTML past which Gmail clips a message and
	// shows "[Message clipped] View entire message" (102 KB).
	ClipSize = 102 * 1024
	// BulkRecipients is the number of recipients from which one email is
	// treated as bulk mail.
	BulkRecipients = 10
	// TextPerImage is the number of characters of visible text each image
	// of an HTML body needs for the body not to count as mostly images.
	TextPerImage = 100
)

// Finding is one insight about an email, as GET /emails/{id} returns it.
type Finding struct {
	Code     string `json:"code"`
	Severity string `json:"severity"` // SeverityInfo, SeverityWarning or SeverityError
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// Header is one header field the sender set.
type Header struct{ Name, Value string }

// Attachment is what the rules read of an attachment.
type Attachment struct{ Filename, ContentType string }

// Domain is what the rules read of the sender domain: its settings and
// the DMARC policy its last verification found.
type Domain struct {
	Name string
	// DMARCChecked is set once a verification has looked the domain's
	// DMARC record up; DMARCPolicy is then its p= value (lower case), ""
	// when the domain publishes no DMARC record.
	DMARCChecked bool
	DMARCPolicy  string
	// OpenTracking and ClickTracking are the domain's tracking settings.
	OpenTracking, ClickTracking bool
}

// Message is an email as it is being accepted.
type Message struct {
	From    string   // "Name <a@b>" or a bare address
	ReplyTo []string // as displayed; empty when none
	Subject string
	HTML    string // "" when the email has no HTML part
	// HasText is set when the email has a text/plain part, as sent or
	// generated from its HTML.
	HasText     bool
	Text        string
	Headers     []Header
	Attachments []Attachment
	Recipients  int // distinct recipients of the email
	// Topic and Broadcast mark email sent with a topic or as part of a
	// broadcast: bulk mail to which Posthaste adds List-Unsubscribe
	// itself (AutoUnsubscribe).
	Topic, Broadcast bool
	// AutoUnsubscribe is set when Posthaste adds List-Unsubscribe and
	// List-Unsubscribe-Post to the email when it builds it.
	AutoUnsubscribe bool
	Domain          *Domain // nil for the sandbox sender
}

// Check returns the findings of m in a fixed order; an empty, non-nil
// slice when there is nothing to say.
func Check(m Message) []Finding {
	out := []Finding{}
	add := func(f *Finding) {
		if f != nil {
			out = append(out, *f)
		}
	}
	body := parseHTML(m.HTML)
	add(noTextAlternative(m))
	add(htmlClipped(m))
	add(mostlyImages(body))
	links := append(append([]string{}, body.links...), textLinks(m.Text)...)
	fromAddr, fromName := splitFrom(m.From)
	add(unrelatedLinks(links, domainOf(fromAddr)))
	add(shorteners(links))
	add(bulkWithoutUnsubscribe(m))
	add(trackingOnSensitive(m, body.text))
	add(dmarc(m.Domain))
	add(fromNameIsAddress(fromName, fromAddr))
	add(noReplyWithoutReplyTo(fromAddr, m.ReplyTo))
	add(riskyAttachments(m.Attachments))
	add(allCapsSubject(m.Subject))
	return out
}

func noTextAlternative(m Message) *Finding {
	if m.HTML == "" || m.HasText {
		return nil
	}
	return &Finding{Code: CodeNoTextAlternative, Severity: SeverityWarning,
		Message: "The email has an HTML part and no plain-text alternative; spam filters score HTML-only mail " +
			"higher and some clients show nothing.",
		Fix: "Send a `text` version along with `html` (or let Posthaste generate one from the HTML)."}
}

func htmlClipped(m Message) *Finding {
	if len(m.HTML) <= ClipSize {
		return nil
	}
	return &Finding{Code: CodeHTMLClipped, Severity: SeverityWarning,
		Message: fmt.Sprintf("The HTML is %d KB; Gmail clips messages whose HTML is over 102 KB and hides "+
			"the rest (including any unsubscribe link) behind \"View entire message\".", (len(m.HTML)+1023)/1024),
		Fix: "Shrink the HTML below 102 KB: inline less CSS, remove comments and unused markup, link to long content."}
}

func mostlyImages(b htmlBody) *Finding {
	if b.images == 0 || len([]rune(b.text)) >= TextPerImage*b.images {
		return nil
	}
	return &Finding{Code: CodeMostlyImages, Severity: SeverityWarning,
		Message: fmt.Sprintf("The HTML is mostly images (%d image(s), %d characters of text); image-heavy "+
			"mail is a common spam signal and shows blank when images are blocked.", b.images, len([]rune(b.text))),
		Fix: "Put the message in text, with images as a supplement and `alt` text on each."}
}

func unrelatedLinks(links []string, sender string) *Finding {
	if sender == "" {
		return nil
	}
	own := registrable(sender)
	seen := map[string]bool{}
	var others []string
	for _, l := range links {
		h := linkHost(l)
		if h == "" || isShortener(h) {
			continue
		}
		r := registrable(h)
		if r == own || seen[r] {
			continue
		}
		seen[r] = true
		others = append(others, r)
	}
	if len(others) == 0 {
		return nil
	}
	sort.Strings(others)
	list := others
	if len(list) > 3 {
		list = append(list[:3:3], fmt.Sprintf("%d more", len(others)-3))
	}
	return &Finding{Code: CodeUnrelatedLinkDomains, Severity: SeverityInfo,
		Message: fmt.Sprintf("Links point to domains unrelated to the sender %s: %s. Links whose domain does not "+
			"match the From domain are a phishing signal.", own, strings.Join(list, ", ")),
		Fix: "Link to pages on your own domain where you can, or send from the domain the links lead to."}
}

func shorteners(links []string) *Finding {
	seen := map[string]bool{}
	var found []string
	for _, l := range links {
		if h := linkHost(l); isShortener(h) && !seen[h] {
			seen[h] = true
			found = append(found, h)
		}
	}
	if len(found) == 0 {
		return nil
	}
	sort.Strings(found)
	return &Finding{Code: CodeURLShortener, Severity: SeverityWarning,
		Message: fmt.Sprintf("The email links through URL shorteners (%s); spam filters distrust them because "+
			"they hide where a link leads.", strings.Join(found, ", ")),
		Fix: "Use the full destination URLs."}
}

func bulkWithoutUnsubscribe(m Message) *Finding {
	if m.AutoUnsubscribe || hasHeader(m.Headers, "List-Unsubscribe") {
		return nil
	}
	var why string
	switch prec := strings.ToLower(strings.TrimSpace(headerValue(m.Headers, "Precedence"))); {
	case m.Broadcast:
		why = "it is part of a broadcast"
	case m.Topic:
		why = "it is sent with a topic"
	case prec == "bulk" || prec == "list" || prec == "junk":
		why = "its Precedence field is " + prec
	case hasHeader(m.Headers, "List-Id") || hasHeader(m.Headers, "List-Post"):
		why = "it carries mailing-list fields"
	case m.Recipients >= BulkRecipients:
		why = fmt.Sprintf("it has %d recipients", m.Recipients)
	default:
		return nil
	}
	return &Finding{Code: CodeBulkWithoutUnsubscribe, Severity: SeverityWarning,
		Message: "The email looks like bulk mail (" + why + ") but has no List-Unsubscribe field; Gmail and " +
			"Yahoo require one-click unsubscribe (RFC 8058) from bulk senders.",
		Fix: "Send it with a `topic_id` or as a broadcast (Posthaste then adds the fields), or set the " +
			"`List-Unsubscribe` and `List-Unsubscribe-Post` headers yourself."}
}

// sensitiveWords mark email whose links and opens must not be tracked:
// account recovery and sign-in mail.
var sensitiveWords = []string{
	"password reset", "reset your password", "reset password", "forgot your password", "forgotten password",
	"new password", "change your password", "verification code", "verify your email", "confirm your email",
	"one-time", "one time code", "security code", "login code", "sign-in code", "sign in code", "magic link",
	"sign-in link", "login link", "two-factor", "2fa", "otp",
}

func trackingOnSensitive(m Message, htmlText string) *Finding {
	if m.Domain == nil || !(m.Domain.OpenTracking || m.Domain.ClickTracking) {
		return nil
	}
	hay := " " + strings.ToLower(strings.Join([]string{m.Subject, m.Text, htmlText}, " ")) + " "
	var word string
	for _, w := range sensitiveWords {
		if containsWord(hay, w) {
			word = w
			break
		}
	}
	if word == "" {
		return nil
	}
	var what []string
	if m.Domain.OpenTracking {
		what = append(what, "open")
	}
	if m.Domain.ClickTracking {
		what = append(what, "click")
	}
	return &Finding{Code: CodeTrackingOnSensitive, Severity: SeverityWarning,
		Message: fmt.Sprintf("The email looks like a password-reset or sign-in email (%q) and its domain %s has "+
			"%s tracking on: rewritten links break one-time links when scanners follow them, and look like phishing.",
			word, m.Domain.Name, strings.Join(what, " and ")),
		Fix: "Send transactional security email from a domain (or subdomain) with open and click tracking off."}
}

// containsWord reports whether w occurs in hay (lower case, padded with
// spaces) not inside a longer word.
func containsWord(hay, w string) bool {
	for i := 0; ; {
		j := strings.Index(hay[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if !isWordByte(hay[start-1]) && (end >= len(hay) || !isWordByte(hay[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_'
}

func dmarc(d *Domain) *Finding {
	if d == nil || !d.DMARCChecked {
		return nil
	}
	switch d.DMARCPolicy {
	case "":
		return &Finding{Code: CodeDMARCMissing, Severity: SeverityWarning,
			Message: fmt.Sprintf("The sender domain %s publishes no DMARC record; Gmail and Yahoo require one "+
				"from bulk senders, and receivers trust unauthenticated-looking mail less.", d.Name),
			Fix: fmt.Sprintf("Publish a TXT record at _dmarc.%s, starting with \"v=DMARC1; p=none;\" and moving "+
				"to p=quarantine or p=reject once reports look clean.", d.Name)}
	case "none":
		return &Finding{Code: CodeDMARCNone, Severity: SeverityInfo,
			Message: fmt.Sprintf("The DMARC policy of %s is p=none: receivers are asked to do nothing with mail "+
				"that fails authentication, so others can spoof the domain.", d.Name),
			Fix: "Once your DMARC reports show only legitimate mail passing, move to p=quarantine, then p=reject."}
	}
	return nil
}

func fromNameIsAddress(name, addr string) *Finding {
	name = strings.Trim(strings.TrimSpace(name), `"'<>`)
	at := strings.LastIndex(name, "@")
	if at <= 0 || !strings.Contains(name[at+1:], ".") || strings.ContainsAny(name, " \t") {
		return nil
	}
	msg := fmt.Sprintf("The From name %q looks like an email address", name)
	if !strings.EqualFold(name, addr) {
		msg += fmt.Sprintf(" other than the real sender %s, a spoofing pattern filters penalise", addr)
	} else {
		msg += "; filters treat address-shaped names as a spoofing pattern"
	}
	return &Finding{Code: CodeFromNameIsAddress, Severity: SeverityWarning, Message: msg + ".",
		Fix: "Use a person's or your product's name as the From name, e.g. \"Acme <hello@acme.com>\"."}
}

var noReplyLocals = []string{"noreply", "no-reply", "no_reply", "donotreply", "do-not-reply", "do_not_reply", "no.reply"}

func noReplyWithoutReplyTo(addr string, replyTo []string) *Finding {
	if len(replyTo) > 0 {
		return nil
	}
	local := strings.ToLower(addr)
	if at := strings.LastIndex(local, "@"); at >= 0 {
		local = local[:at]
	}
	for _, n := range noReplyLocals {
		if strings.Contains(local, n) {
			return &Finding{Code: CodeNoReplyWithoutReplyTo, Severity: SeverityInfo,
				Message: fmt.Sprintf("The sender %s is a no-reply address and the email has no reply-to: "+
					"replies, which help reputation, go nowhere.", addr),
				Fix: "Set `reply_to` to an address someone reads, or send from one."}
		}
	}
	return nil
}

// riskyExtensions are attachment types mail providers block or quarantine:
// executables and scripts, disk images, HTML (a phishing vehicle) and
// Office files with macros.
var riskyExtensions = map[string]bool{
	"exe": true, "js": true, "jse": true, "vbs": true, "vbe": true, "scr": true, "bat": true, "cmd": true,
	"com": true, "pif": true, "cpl": true, "msi": true, "msc": true, "jar": true, "ps1": true, "hta": true,
	"wsf": true, "wsh": true, "lnk": true, "reg": true, "dll": true, "apk": true, "app": true,
	"iso": true, "img": true, "vhd": true, "vhdx": true, "dmg": true,
	"html": true, "htm": true, "shtml": true, "xhtml": true, "svg": true,
	"docm": true, "dotm": true, "xlsm": true, "xltm": true, "xlam": true, "pptm": true, "potm": true,
	"ppam": true, "ppsm": true, "sldm": true,
}

func riskyAttachments(atts []Attachment) *Finding {
	var names []string
	for _, a := range atts {
		ext := strings.ToLower(strings.TrimPrefix(path.Ext(strings.TrimSpace(a.Filename)), "."))
		ct := strings.ToLower(a.ContentType)
		if riskyExtensions[ext] || strings.HasPrefix(ct, "text/html") || ct == "application/x-msdownload" ||
			ct == "application/javascript" || ct == "application/x-javascript" ||
			strings.Contains(ct, "macroenabled") {
			name := a.Filename
			if name == "" {
				name = "(unnamed, " + a.ContentType + ")"
			}
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &Finding{Code: CodeRiskyAttachment, Severity: SeverityError,
		Message: fmt.Sprintf("Attachments of a type mail providers block or quarantine: %s (executables, scripts, "+
			"disk images, HTML files and Office files with macros).", strings.Join(names, ", ")),
		Fix: "Link to the file on your site instead, or send it in a safe format (PDF, an Office file without macros)."}
}

func allCapsSubject(subject string) *Finding {
	var upper int
	for _, r := range subject {
		if unicode.IsLower(r) {
			return nil
		}
		if unicode.IsUpper(r) {
			upper++
		}
	}
	if upper < 6 {
		return nil
	}
	return &Finding{Code: CodeAllCapsSubject, Severity: SeverityWarning,
		Message: "The subject is all capitals, which spam filters score as shouting.",
		Fix:     "Write the subject in sentence case."}
}

// splitFrom returns the address and display name of a From value; the
// whole value as the address when it cannot be parsed.
func splitFrom(from string) (addr, name string) {
	a, err := mail.ParseAddress(from)
	if err != nil {
		if i, j := strings.LastIndex(from, "<"), strings.LastIndex(from, ">"); i >= 0 && j > i {
			return strings.TrimSpace(from[i+1 : j]), strings.TrimSpace(from[:i])
		}
		return strings.TrimSpace(from), ""
	}
	return a.Address, a.Name
}

func domainOf(addr string) string {
	at := strings.LastIndex(addr, "@")
	if at < 0 {
		return ""
	}
	return strings.ToLower(addr[at+1:])
}

func hasHeader(hs []Header, name string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

func headerValue(hs []Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}
