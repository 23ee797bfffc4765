package reports

import (
	"html"
	"regexp"
	"strconv"
	"strings"

	"github.com/posthaste/posthaste/internal/bounce"
)

// isBounce reports whether a message that is no DSN reads as a bounce:
// sent by a mailer daemon or postmaster (RFC 3464 §2 and RFC 5321 §4.5.5
// have bounces sent with a null return path, and their From is one of
// these), or with a bounce subject or a known bounce text and no sign of
// an automatic reply.
func (p *parser) isBounce(text []byte) bool {
	if bounceSender(p.rep.From, p.rep.FromName) {
		return true
	}
	if _, ok := explicitAutoReply(p.top, p.rep.Subject); ok {
		return false
	}
	if bounceSubject(p.rep.Subject) {
		return true
	}
	if len(text) > 4096 {
		text = text[:4096]
	}
	t := strings.ToLower(string(text))
	for _, s := range bounceTexts {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// bounceLocals are the local parts mailer daemons send from.
var bounceLocals = []string{"mailer-daemon", "mailer_daemon", "mailerdaemon", "mail-daemon", "postmaster"}

func bounceSender(addr, name string) bool {
	local, _, _ := strings.Cut(strings.ToLower(addr), "@")
	for _, l := range bounceLocals {
		if local == l {
			return true
		}
	}
	n := strings.ToLower(name)
	return strings.Contains(n, "mail delivery subsystem") || strings.Contains(n, "mail delivery system") ||
		strings.Contains(n, "mailer-daemon")
}

// bounceSubjects are in the subjects of bounces: Exim's "Mail delivery
// failed: returning message to sender", qmail's "failure notice",
// Gmail's "Delivery Status Notification (Failure)", Exchange's
// "Undeliverable:", sendmail's "Returned mail: see transcript for details",
// Postfix's "Undelivered Mail Returned to Sender" and "Delayed Mail (still
// being retried)", Exim's "Warning: message ... delayed 24 hours".
var bounceSubjects = []string{
	"undeliverable", "undelivered mail", "delivery status notification", "mail delivery failed",
	"delivery failure", "failure notice", "returned mail", "delivery has failed", "could not be delivered",
	"non-delivery", "nondeliverable", "non remis", "unzustellbar", "delayed mail", "delivery delayed",
	"message not delivered", "mail system error", "delivery notification",
}

func bounceSubject(s string) bool {
	s = strings.ToLower(s)
	for _, b := range bounceSubjects {
		if strings.Contains(s, b) {
			return true
		}
	}
	return strings.HasPrefix(s, "warning: message") && strings.Contains(s, "delayed")
}

// bounceTexts open the texts of bounces whose subject may say nothing.
var bounceTexts = []string{
	"this is the qmail-send program",
	"this message was created automatically by mail delivery software",
	"i'm afraid i wasn't able to deliver your message",
	"delivery to the following recipient",
	"the following address(es) failed",
	"delivery has failed to these recipients",
}

// originalMarker reports whether a line introduces the copy of the
// original message a plain bounce quotes: qmail's "--- Below this line is
// a copy of the message.", Exim's "------ This is a copy of the message,
// including all the headers. ------", and the "----- Original message
// -----" family.
func originalMarker(line string) bool {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "--") && !strings.HasPrefix(t, "==") {
		return false
	}
	l := strings.ToLower(t)
	for _, s := range []string{"copy of the message", "original message", "message header", "returned message",
		"undelivered message", "headers of the original", "message follows"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

var (
	// addrRE is a lenient addr-spec, enough to find addresses in prose.
	addrRE = regexp.MustCompile(`[A-Za-z0-9!#$%&'*+/=?^_{|}~.-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+`)
	// statusRE is an RFC 3463 enhanced status code in prose ("(#5.1.1)").
	statusRE = regexp.MustCompile(`(?:^|[^0-9.])([45]\.[0-9]{1,3}\.[0-9]{1,3})(?:[^0-9.]|\.(?:[^0-9]|$)|$)`)
	// eximHostRE is Exim's "host mx.example.com [192.0.2.1]".
	eximHostRE = regexp.MustCompile(`(?i)\bhost\s+([A-Za-z0-9.-]+\.[A-Za-z]{2,})\.?\s+\[([0-9A-Fa-f.:]+)\]`)
	// qmailHostRE is qmail's "Connected to 192.0.2.1 but ..." or
	// "192.0.2.1 does not like recipient."
	qmailHostRE = regexp.MustCompile(`(?i)(?:connected to ([0-9.]+)|([0-9.]+) does not like recipient)`)
	// qmailRE is qmail's opening "Hi. This is the qmail-send program at
	// host.example.com."
	qmailRE = regexp.MustCompile(`(?i)this is the qmail-send program at ([A-Za-z0-9.-]+?)\.?\s`)
)

// parsePlainBounce reads a non-standard bounce: recipients, their SMTP
// replies and whether the failure is final, from the text before the
// quoted original, and the quoted original's header. At most maxRcpt
// recipients are kept (rep.Truncated is set past that).
func parsePlainBounce(text string, rep *Report, maxRcpt int) (*DSN, fieldGroup) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	marker := len(lines)
	for i, l := range lines {
		if originalMarker(l) {
			marker = i
			break
		}
	}
	head := lines[:marker]
	var orig fieldGroup
	if marker < len(lines) {
		orig = quotedHeader(lines[marker+1:])
	}
	headText := strings.Join(head, "\n")

	d := &DSN{}
	if m := qmailRE.FindStringSubmatch(headText); m != nil {
		d.ReportingMTA = "dns; " + m[1]
	}
	if orig != nil {
		d.Sender = cleanAddress(orig.get("Return-Path"))
	}

	exclude := map[string]bool{}
	for _, a := range append(append([]string{rep.From}, rep.To...), d.Sender, cleanAddress(orig.get("From"))) {
		if a != "" {
			exclude[strings.ToLower(a)] = true
		}
	}
	usable := func(a string) bool {
		l := strings.ToLower(a)
		if exclude[l] {
			return false
		}
		local, _, _ := strings.Cut(l, "@")
		for _, b := range bounceLocals {
			if local == b {
				return false
			}
		}
		_, isVERP := ParseVERP(l)
		return !isVERP
	}

	type found struct {
		addr string
		line int
	}
	var rcpts []found
	seen := map[string]bool{}
	add := func(a string, line int) {
		if l := strings.ToLower(a); usable(a) && !seen[l] {
			seen[l] = true
			rcpts = append(rcpts, found{a, line})
		}
	}
	for i, l := range head {
		if a, ok := recipientLine(l); ok {
			add(a, i)
		}
	}
	if len(rcpts) == 0 {
		// Prose ("Your message to a@example.com couldn't be delivered"):
		// the first address that is not the sender's or a daemon's.
		for i, l := range head {
			for _, a := range addrRE.FindAllString(l, -1) {
				add(strings.Trim(a, "."), i)
				if len(rcpts) > 0 {
					break
				}
			}
			if len(rcpts) > 0 {
				break
			}
		}
	}

	action := plainAction(headText, rep.Subject)
	for k, r := range rcpts {
		if len(d.Recipients) >= maxRcpt {
			rep.Truncated = true
			break
		}
		end := len(head)
		if k+1 < len(rcpts) {
			end = rcpts[k+1].line
		}
		seg := head[r.line:end]
		if len(rcpts) == 1 {
			// One recipient: the reply may be anywhere in the text (Gmail's
			// old bounces put it under "Technical details").
			seg = head
		}
		rc := Recipient{FinalRecipient: r.addr, Action: action}
		diag := replyIn(seg)
		code, enh, rest := diagnosticReply(diag)
		switch {
		case code != 0:
			rc.DiagnosticCode = "smtp; " + strings.Join(nonEmpty(replyCode(code, enh), rest), " ")
			if code/100 == 5 {
				rc.Action = ActionFailed
			}
		default:
			// No reply code: the words under the address are the
			// diagnostic (qmail's "Sorry, no mailbox here by that name.").
			rc.DiagnosticCode = wordsAfter(head, r.line, r.addr)
		}
		rc.Status = enh
		if rc.Status == "" {
			if m := statusRE.FindStringSubmatch(strings.Join(seg, " ")); m != nil {
				rc.Status = m[1]
			} else if code != 0 {
				rc.Status = strconv.Itoa(code/100) + ".0.0"
			}
		}
		if c, _, _, ok := bounce.SplitStatus(rc.Status); ok && c == 5 {
			rc.Action = ActionFailed
		}
		segText := strings.Join(seg, "\n")
		if m := eximHostRE.FindStringSubmatch(segText); m != nil {
			rc.RemoteMTA = "dns; " + strings.TrimSuffix(m[1], ".")
		} else if m := qmailHostRE.FindStringSubmatch(segText); m != nil {
			rc.RemoteMTA = "dns; " + m[1] + m[2]
		}
		d.Recipients = append(d.Recipients, rc)
	}
	return d, orig
}

// recipientLine recognises the lines plain bounces name a recipient on:
// qmail's "<a@example.com>:", Exim's indented "  a@example.com",
// sendmail's "<a@example.com>... User unknown" and "<a@example.com>
// (unrecoverable error)", and a text copy of RFC
// 3464's "Final-Recipient: rfc822; a@example.com".
func recipientLine(l string) (string, bool) {
	t := strings.TrimSpace(l)
	if t == "" {
		return "", false
	}
	if name, v, ok := strings.Cut(t, ":"); ok {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "final-recipient", "original-recipient":
			a := cleanAddress(v)
			return a, a != ""
		}
	}
	var tok, rest string
	if t[0] == '<' {
		j := strings.IndexByte(t, '>')
		if j < 0 {
			return "", false
		}
		tok, rest = t[1:j], t[j+1:]
	} else {
		tok, rest, _ = strings.Cut(t, " ")
		tok = strings.TrimRight(tok, ":,")
		if strings.HasSuffix(tok, "...") {
			tok, rest = strings.TrimSuffix(tok, "..."), "..."+rest
		}
	}
	if !addrRE.MatchString(tok) || addrRE.FindString(tok) != tok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || rest == ":" || strings.HasPrefix(rest, "...") ||
		t[0] == '<' && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "(")) {
		return tok, true
	}
	return "", false
}

// replyIn finds an SMTP reply in a bounce text's lines and returns it with
// the lines that continue it (up to a blank line, at most a few lines):
// qmail's "Remote host said: 550 ...", Exim's reply under "SMTP error
// from remote mail server after RCPT TO", Gmail's "The error that the
// other server returned was: 550 ...". "" when there is none.
func replyIn(lines []string) string {
	for i, l := range lines {
		m := replyRE.FindStringSubmatchIndex(l)
		if m == nil {
			continue
		}
		out := []string{strings.TrimSpace(l[m[2]:])}
		for _, c := range lines[i+1:] {
			c = strings.TrimSpace(c)
			if c == "" || len(out) >= 6 || strings.HasPrefix(strings.ToLower(c), "giving up") {
				break
			}
			out = append(out, c)
		}
		return strings.Join(out, " ")
	}
	return ""
}

// wordsAfter returns the text that follows an address named on line i:
// the rest of that line and the lines up to the next blank one, at most a
// few, joined; at most 500 bytes.
func wordsAfter(lines []string, i int, addr string) string {
	first := lines[i]
	if j := strings.Index(strings.ToLower(first), strings.ToLower(addr)); j >= 0 {
		first = first[j+len(addr):]
	}
	out := []string{strings.TrimLeft(strings.TrimSpace(first), ">:.")}
	for _, l := range lines[i+1:] {
		l = strings.TrimSpace(l)
		if l == "" || len(out) >= 6 {
			break
		}
		out = append(out, l)
	}
	s := strings.Join(strings.Fields(strings.Join(out, " ")), " ")
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}

// plainAction decides from a plain bounce's words whether delivery failed
// for good or is still being retried (Exim's and Postfix's delay
// warnings).
func plainAction(text, subject string) Action {
	t := strings.ToLower(text)
	s := strings.ToLower(subject)
	for _, p := range []string{"permanent error", "permanent failure", "permanently", "fatal error", "given up",
		"giving up", "could not be delivered", "couldn't be delivered", "wasn't delivered", "undeliverable",
		"the following address(es) failed", "delivery has failed", "retry timeout exceeded"} {
		if strings.Contains(t, p) {
			return ActionFailed
		}
	}
	for _, p := range []string{"has not yet been delivered", "not been delivered yet", "will keep trying",
		"will continue trying", "will continue to try", "still being retried", "will be retried", "delayed"} {
		if strings.Contains(t, p) || strings.Contains(s, p) {
			return ActionDelayed
		}
	}
	if strings.HasPrefix(s, "warning:") || strings.Contains(s, "(delay)") {
		return ActionDelayed
	}
	return ActionFailed
}

// quotedHeader reads the header of the original a plain bounce quotes
// after its marker; nil when what follows is no header.
func quotedHeader(lines []string) fieldGroup {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	// Some bounces indent the copy; the header is still one block.
	var b strings.Builder
	for i, l := range lines {
		if i > maxHeaderFields*4 {
			break
		}
		b.WriteString(l)
		b.WriteByte('\n')
		if strings.TrimSpace(l) == "" {
			break
		}
	}
	groups := parseFieldGroups([]byte(b.String()), 1, maxHeaderFields)
	if len(groups) == 0 {
		return nil
	}
	g := groups[0]
	for _, name := range []string{"Return-Path", "Received", "Message-Id", "From", "To", "Subject", "Date"} {
		if g.get(name) != "" {
			return g
		}
	}
	return nil
}

var (
	tagRE   = regexp.MustCompile(`(?s)<[^>]*>`)
	blockRE = regexp.MustCompile(`(?i)<(?:br|/p|/div|/tr|/li|/h[1-6]|p|div|tr)\b[^>]*>`)
	dropRE  = regexp.MustCompile(`(?is)<(style|script|head)\b.*?</(?:style|script|head)\s*>`)
)

// htmlToText is a rough rendering of an HTML bounce as lines of text, for
// the heuristics only.
func htmlToText(s string) string {
	s = dropRE.ReplaceAllString(s, "")
	s = blockRE.ReplaceAllString(s, "\n")
	s = tagRE.ReplaceAllString(s, "")
	return html.UnescapeString(s)
}
