package reports

import (
	"strings"
)

// autoReply reports whether a message is an automatic response and why:
// RFC 3834 §5 Auto-Submitted with any value but "no"; the X-Autoreply and
// X-Autorespond fields of vacation programs; Precedence auto_reply, bulk
// or junk (RFC 3834 §3.1.8 names the field, which responders set and
// honour); or a subject vacation responders use.
func autoReply(h fieldGroup, subject string) (string, bool) {
	if why, ok := explicitAutoReply(h, subject); ok {
		return why, true
	}
	if v := strings.ToLower(firstWord(h.get("Auto-Submitted"))); v != "" && v != "no" {
		return "Auto-Submitted: " + v, true
	}
	switch v := strings.ToLower(strings.TrimSpace(h.get("Precedence"))); v {
	case "bulk", "junk":
		return "Precedence: " + v, true
	}
	return "", false
}

// explicitAutoReply finds the signs only a responder gives: its own
// header fields, Precedence auto_reply, or a vacation subject. Unlike
// Auto-Submitted (which mailer daemons set on their bounces, RFC 3834 §5)
// these outweigh a bounce-like subject.
func explicitAutoReply(h fieldGroup, subject string) (string, bool) {
	for _, name := range []string{"X-Autoreply", "X-Autorespond", "X-Autoresponder"} {
		if v := strings.TrimSpace(h.get(name)); v != "" && !strings.EqualFold(v, "no") {
			return name, true
		}
	}
	if strings.EqualFold(strings.TrimSpace(h.get("Precedence")), "auto_reply") {
		return "Precedence: auto_reply", true
	}
	if strings.EqualFold(firstWord(h.get("Auto-Submitted")), "auto-replied") && vacationSubject(subject) {
		return "Auto-Submitted: auto-replied", true
	}
	if vacationSubject(subject) {
		return "subject", true
	}
	return "", false
}

// vacationPrefixes start the subjects of out-of-office and vacation
// replies (Outlook "Automatic reply:", Gmail's vacation responder, Lotus
// "Auto:", German, French and Spanish Exchange).
var vacationPrefixes = []string{
	"automatic reply", "auto:", "autoreply", "auto-reply", "auto reply", "auto response", "autoresponse",
	"out of office", "out of the office", "ooo:", "on vacation", "vacation:", "away from", "i am away",
	"abwesenheitsnotiz", "automatische antwort", "réponse automatique", "respuesta automática",
}

func vacationSubject(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, p := range vacationPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.Contains(s, "out of office") || strings.Contains(s, "out of the office")
}
