package reports

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/posthaste/posthaste/internal/bounce"
)

// Bounce is Resend's bounce object (after Amazon SES's), the detail of a
// `bounced` event: the same shape and values internal/store.Bounce holds
// for synchronous bounces.
type Bounce struct {
	Type    string `json:"type"`    // bounce.Permanent, bounce.Transient or bounce.Undetermined
	SubType string `json:"subType"` // one of the bounce.SubType constants
	// Message says in words why the message bounced, followed by the
	// remote server's reply when the report gives one.
	Message string `json:"message"`
	// DiagnosticCode holds the report's Diagnostic-Code value (RFC 3464
	// §2.3.6, "smtp; 550 5.1.1 ..."); empty, never nil, when it had none.
	DiagnosticCode []string `json:"diagnosticCode"`
	// Suppress is true when the address itself is bad (a permanent
	// recipient-level failure, bounce.Class.Suppress): the caller adds
	// it to the suppression list.
	Suppress bool `json:"-"`
}

// Bounce classifies a failed recipient with bounce.Classify, the
// table that classifies synchronous SMTP failures, so that an
// asynchronous bounce gets the type and subtype the same reply would get
// during the SMTP transaction. ok is false unless the action is failed:
// delayed is no bounce yet (RFC 3464 §2.3.3), delivered, relayed and
// expanded are none.
//
// The status code decides permanent (5.X.X) or transient (4.X.X: the
// reporting MTA gave up after deferrals; a transient bounce never
// suppresses); the basic reply code of the diagnostic is used when its
// class agrees, else one of the status's class. A failure with neither a
// status nor a reply code, and no telling text, is Undetermined.
func (r Recipient) Bounce() (b Bounce, ok bool) {
	if r.Action != ActionFailed {
		return Bounce{}, false
	}
	code, enhanced, text := diagnosticReply(r.DiagnosticCode)
	status := r.Status
	if status == "" {
		status = enhanced
	}
	diagCode := code
	class := 0
	if c, _, _, ok := bounce.SplitStatus(status); ok && (c == 4 || c == 5) {
		class = c
	}
	switch {
	case class != 0 && code/100 != class:
		code = class*100 + 50 // 450 or 550: the class is all that is known
	case class == 0 && code/100 != 4 && code/100 != 5:
		code = 0
	}
	var c bounce.Class
	if code == 0 {
		c = bounce.Classify(550, "", text)
		if c.Type == bounce.Permanent && c.SubType == bounce.SubTypeGeneral {
			c = bounce.Class{Type: bounce.Undetermined, SubType: bounce.SubTypeUndetermined}
		}
	} else {
		c = bounce.Classify(code, status, text)
	}
	b = Bounce{Type: c.Type, SubType: c.SubType, DiagnosticCode: []string{},
		Suppress: c.Suppress && c.Type == bounce.Permanent}
	if r.DiagnosticCode != "" {
		b.DiagnosticCode = append(b.DiagnosticCode, r.DiagnosticCode)
	}
	b.Message = c.Reason()
	// The reply as the server gave it; the status when it gave none.
	if diagCode == 0 && enhanced == "" {
		enhanced = r.Status
	}
	reply := strings.Join(nonEmpty(replyCode(diagCode, enhanced), text), " ")
	if reply != "" {
		b.Message += ": " + reply
	} else {
		b.Message += "."
	}
	return b, true
}

func replyCode(code int, enhanced string) string {
	if code == 0 {
		return enhanced
	}
	if enhanced == "" {
		return strconv.Itoa(code)
	}
	return strconv.Itoa(code) + " " + enhanced
}

func nonEmpty(s ...string) []string {
	out := s[:0]
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// replyRE finds an SMTP reply in a diagnostic text: a 4xx or 5xx basic
// code (RFC 5321 §4.2), "-" or " ", and an optional RFC 3463 enhanced code.
var replyRE = regexp.MustCompile(`(?:^|[^0-9.])([45][0-9][0-9])(?:[ -]+|$)(?:([45]\.[0-9]{1,3}\.[0-9]{1,3})(?:[ -]+|$))?`)

// diagnosticReply reads the SMTP reply out of a Diagnostic-Code value
// (RFC 3464 §2.3.6): "smtp; 550 5.1.1 text", multi-line replies folded
// into one ("550-5.1.1 a 550-5.1.1 b"), or a reply quoted inside another
// type's text (Postfix's "X-Postfix; host x said: 550 5.1.1 ..."). code is
// 0 when there is none; text is the reply text without the repeated codes
// of continuation lines, or the whole value when no reply is found.
func diagnosticReply(v string) (code int, enhanced, text string) {
	_, val := typedValue(v)
	m := replyRE.FindStringSubmatchIndex(val)
	if m == nil {
		return 0, "", strings.TrimSpace(val)
	}
	code, _ = strconv.Atoi(val[m[2]:m[3]])
	if m[4] >= 0 {
		enhanced = val[m[4]:m[5]]
	}
	text = val[m[1]:]
	// Continuation lines of a multi-line reply repeat the codes.
	prefix := val[m[2]:m[3]]
	for _, sep := range []string{"-", " "} {
		rep := prefix + sep
		if enhanced != "" {
			rep += enhanced + " "
		}
		text = strings.ReplaceAll(text, " "+rep, " ")
	}
	return code, enhanced, strings.Join(strings.Fields(text), " ")
}
