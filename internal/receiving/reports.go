package receiving

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
)

// reportTarget is what a report may act on: the email its return path
// names and, for a per-recipient return path, that one recipient.
type reportTarget struct {
	email store.Email
	// rcpt is the address of the recipient a per-recipient return path
	// names (reports.RecipientReturnPath); "" for a per-email return
	// path, which only emails from before per-recipient return paths
	// were sent with: a report to one acts only when it names a single
	// recipient of the email.
	rcpt string
}

// reportTarget finds what a report may act on, within the message's team:
// the return path the message was sent to (its route), else the VERP
// return path the report quotes (rep.VERP: the Return-Path of the
// original, for a report that reached a receiving address), under the
// rules of inroute.Router.ReturnPath (signature, recipient, the per-email
// forms only for emails from before per-recipient return paths). A report
// is never matched by its Message-ID alone: every recipient of an email
// sees it, so it names no recipient. ok is false when nothing matches.
func (a *Activities) reportTarget(ctx context.Context, m store.InboundMessage, rep *reports.Report) (reportTarget, bool, error) {
	var paths []reports.VERP
	for _, r := range m.Recipients {
		if r.Kind != inmail.RouteReturnPath {
			continue // a report comes to a return path, not to an unsubscribe address
		}
		if v, ok := reports.ParseVERP(r.Address); ok {
			paths = append(paths, v)
		}
	}
	if v, ok := rep.VERP(); ok {
		paths = append(paths, v)
	}
	router := inroute.New(a.received, a.emails, a.verpKey, nil)
	for _, v := range paths {
		e, err := router.EmailByVERP(ctx, m.TeamID, v)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return reportTarget{}, false, err
		}
		t := reportTarget{email: e}
		if v.PerRecipient {
			if v.Index >= len(e.Recipients) {
				continue
			}
			t.rcpt = e.Recipients[v.Index].Address
		}
		return t, true, nil
	}
	return reportTarget{}, false, nil
}

// named returns the recipients of t's email among addrs (compared
// case-insensitively), once each, as the email stores them.
func (t reportTarget) named(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if r, ok := emailRecipient(t.email, a); ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// subject is the one recipient a report naming addrs may act on: the
// recipient a per-recipient return path names when the report names it;
// for a per-email return path, the single recipient of the email the
// report names. ok is false otherwise: a report to recipient A's return
// path naming recipient B acts on nobody, and one to a per-email return
// path naming several recipients acts on none of them.
func (t reportTarget) subject(addrs []string) (string, bool) {
	named := t.named(addrs)
	if t.rcpt != "" {
		return t.rcpt, slices.ContainsFunc(named, func(n string) bool { return strings.EqualFold(n, t.rcpt) })
	}
	if len(named) != 1 {
		return "", false
	}
	return named[0], true
}

// bounceReport keeps of dsn the recipients that name t's subject (see
// subject); nil when there are none.
func (t reportTarget) bounceReport(dsn *reports.DSN) *reports.DSN {
	addrs := make([]string, 0, len(dsn.Recipients))
	for _, r := range dsn.Recipients {
		addrs = append(addrs, r.Address())
	}
	who, ok := t.subject(addrs)
	if !ok {
		return nil
	}
	out := *dsn
	out.Recipients = slices.DeleteFunc(slices.Clone(dsn.Recipients), func(r reports.Recipient) bool {
		return !strings.EqualFold(strings.TrimSpace(r.Address()), who)
	})
	return &out
}

// complainants are the recipients of t's email a complaint f counts
// against: its subject (see subject). A report that names no recipient
// (Yahoo redacts them) counts against the recipient a per-recipient
// return path names, and against the only recipient of an email from
// before them; an email with several is left alone rather than suppress
// the innocent.
func (t reportTarget) complainants(f *reports.Feedback) []string {
	names := f.Recipients()
	if len(names) == 0 {
		switch {
		case t.rcpt != "":
			return []string{t.rcpt}
		case len(t.email.Recipients) == 1:
			return []string{t.email.Recipients[0].Address}
		}
		return nil
	}
	if who, ok := t.subject(names); ok {
		return []string{who}
	}
	return nil
}

// fromFeedbackLoop reports whether a complaint comes from a feedback loop
// the operator trusts (ActivitiesConfig.FBLDomains): its RFC5322.From domain is one
// of domains or a subdomain of one, and it is authenticated by that
// domain: a DKIM signature that passed with d= within it (aligned, RFC
// 7489 §3.1.1, the listed domain standing for the organizational domain),
// or an SPF pass for a MAIL FROM domain (HELO name, for the null sender)
// within it. Anyone can write an
// ARF report; only one a mailbox provider demonstrably sent is acted on.
func fromFeedbackLoop(auth inmail.Results, from string, domains []string) bool {
	fromDomain := strings.ToLower(strings.TrimSuffix(auth.DMARC.FromDomain, "."))
	if fromDomain == "" {
		if at := strings.LastIndexByte(from, '@'); at >= 0 {
			fromDomain = strings.ToLower(strings.TrimSuffix(from[at+1:], "."))
		}
	}
	if fromDomain == "" {
		return false
	}
	within := func(d, parent string) bool {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		return d != "" && (d == parent || strings.HasSuffix(d, "."+parent))
	}
	for _, l := range domains {
		l = strings.ToLower(strings.Trim(strings.TrimSpace(l), "."))
		if l == "" || !within(fromDomain, l) {
			continue
		}
		for _, d := range auth.DKIM {
			if d.Result == "pass" && within(d.Domain, l) {
				return true
			}
		}
		if auth.SPF.Result == "pass" && within(auth.SPF.Domain, l) {
			return true
		}
	}
	return false
}
