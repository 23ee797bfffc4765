package reports

import (
	"strings"
)

// Feedback is a feedback report: the machine-readable part of an RFC 5965
// Abuse Reporting Format message (§3.1, §3.2), or what Microsoft's Junk
// Mail Reporting Program (JMRP) sends in its non-ARF formats.
type Feedback struct {
	// Type is Feedback-Type, lower-cased: abuse, fraud, virus, other
	// (RFC 5965 §7.3), not-spam (RFC 6650 §7.2), auth-failure (RFC 6591).
	// JMRP's non-ARF reports are abuse.
	Type string
	// UserAgent and Version are the report generator's (RFC 5965 §3.1).
	UserAgent, Version string
	// OriginalMailFrom is the envelope sender of the reported message
	// (the VERP return path), bare.
	OriginalMailFrom string
	// OriginalRcptTo are the envelope recipients of the reported message,
	// bare; for JMRP, X-HmXmrOriginalRecipient of the original, which is
	// where Microsoft names the complaining mailbox.
	OriginalRcptTo []string
	// RemovalRecipient are RFC 5965 §3.2 Removal-Recipient addresses.
	RemovalRecipient []string
	// ArrivalDate is Arrival-Date, or Received-Date as early reports and
	// Yahoo name it; unparsed.
	ArrivalDate    string
	ReportedDomain []string
	SourceIP       string
	ReportingMTA   string
	// JMRP is true for a Microsoft JMRP report in one of its non-ARF
	// formats (the original forwarded as it is, or attached as
	// message/rfc822), recognised by X-HmXmrOriginalRecipient.
	JMRP bool
}

// Complaint reports whether the feedback is a recipient's complaint: every
// type except not-spam (RFC 6650: the recipient says it is wanted) and
// auth-failure (RFC 6591: a DMARC/SPF/DKIM failure report, sent by a
// receiver and no recipient).
func (f *Feedback) Complaint() bool {
	switch f.Type {
	case "not-spam", "auth-failure":
		return false
	}
	return true
}

// Recipients are the addresses that complained, as far as the report
// names them: Original-Rcpt-To, else Removal-Recipient. Providers that
// redact the recipient (Yahoo) name none; the caller then falls back to
// the recipients of the email the VERP return path names.
func (f *Feedback) Recipients() []string {
	if len(f.OriginalRcptTo) > 0 {
		return f.OriginalRcptTo
	}
	return f.RemovalRecipient
}

// parseARF reads the body of a message/feedback-report part (RFC 5965
// §3.1): one group of fields.
func parseARF(b []byte) *Feedback {
	f := &Feedback{}
	groups := parseFieldGroups(b, 1, maxHeaderFields)
	if len(groups) == 0 {
		return f
	}
	g := groups[0]
	f.Type = strings.ToLower(firstWord(g.get("Feedback-Type")))
	f.UserAgent = g.get("User-Agent")
	f.Version = g.get("Version")
	f.OriginalMailFrom = cleanAddress(g.get("Original-Mail-From"))
	for _, v := range g.values("Original-Rcpt-To") {
		if a := cleanAddress(v); a != "" {
			f.OriginalRcptTo = append(f.OriginalRcptTo, a)
		}
	}
	for _, v := range g.values("Removal-Recipient") {
		if a := cleanAddress(v); a != "" {
			f.RemovalRecipient = append(f.RemovalRecipient, a)
		}
	}
	f.ArrivalDate = g.get("Arrival-Date")
	if f.ArrivalDate == "" {
		f.ArrivalDate = g.get("Received-Date")
	}
	for _, v := range g.values("Reported-Domain") {
		if v = strings.TrimSpace(v); v != "" {
			f.ReportedDomain = append(f.ReportedDomain, v)
		}
	}
	f.SourceIP = firstWord(g.get("Source-IP"))
	f.ReportingMTA = g.get("Reporting-MTA")
	return f
}

// hmxmrField is the header field in which Microsoft's JMRP names the
// mailbox that reported the message as junk.
const hmxmrField = "X-HmXmrOriginalRecipient"

// addJMRPRecipient fills OriginalRcptTo from X-HmXmrOriginalRecipient
// when the ARF part names no recipient: JMRP's ARF reports often carry
// the complaining address only there, on the attached original.
func (f *Feedback) addJMRPRecipient(top fieldGroup, orig Original) {
	if len(f.OriginalRcptTo) > 0 {
		return
	}
	for _, v := range []string{orig.Get(hmxmrField), top.get(hmxmrField)} {
		if a := cleanAddress(v); a != "" {
			f.OriginalRcptTo = []string{a}
			return
		}
	}
}

// jmrp recognises Microsoft's non-ARF JMRP formats: the reported message
// forwarded as it is (X-HmXmrOriginalRecipient in its own header) or
// attached as message/rfc822 (the field in the attachment's header).
func jmrp(top fieldGroup, orig Original) (*Feedback, bool) {
	v := top.get(hmxmrField)
	if v == "" {
		v = orig.Get(hmxmrField)
	}
	a := cleanAddress(v)
	if a == "" {
		return nil, false
	}
	f := &Feedback{Type: "abuse", OriginalRcptTo: []string{a}, JMRP: true}
	f.OriginalMailFrom = cleanAddress(orig.Get("Return-Path"))
	if f.OriginalMailFrom == "" {
		f.OriginalMailFrom = cleanAddress(top.get("Return-Path"))
	}
	return f, true
}
