package mxlisten

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/mail"
	"strings"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-message/textproto"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"github.com/posthaste/posthaste/internal/inmail"
	"golang.org/x/net/publicsuffix"
)

// maxDKIMSignatures bounds the signatures verified per message (each costs
// a DNS lookup and a hash of the body).
const maxDKIMSignatures = 5

// checker runs the authentication checks with one resolver.
type checker struct {
	resolver *net.Resolver
}

// check authenticates a message received from ip with the given HELO name
// and MAIL FROM ("" for the null sender). ctx bounds every lookup; SPF's
// own limits (10 lookups, 2 void lookups, RFC 7208 §4.6.4) apply too.
// msg returns a new reader of the message each time it is called, so that
// a message spooled to disk is streamed, not held in memory.
func (c checker) check(ctx context.Context, ip net.IP, helo, mailFrom string, msg func() io.Reader) inmail.Results {
	var r inmail.Results
	r.SPF = c.checkSPF(ctx, ip, helo, mailFrom)
	r.DKIM = c.checkDKIM(ctx, msg())
	r.DMARC = c.checkDMARC(ctx, msg(), r.SPF, r.DKIM)
	return r
}

func (c checker) checkSPF(ctx context.Context, ip net.IP, helo, mailFrom string) inmail.SPFResult {
	res := inmail.SPFResult{Domain: domainOf(mailFrom), Scope: "mailfrom"}
	sender := mailFrom
	if mailFrom == "" {
		// RFC 7208 §2.4: the null sender is checked as postmaster@HELO.
		res.Domain, res.Scope = strings.TrimSuffix(strings.ToLower(helo), "."), "helo"
		sender = "postmaster@" + res.Domain
	}
	if _, ok := normalizeDomain(res.Domain); !ok {
		// RFC 7208 §4.3: not a domain name (an address literal, a single
		// label) gives "none".
		res.Result = string(spf.None)
		return res
	}
	result, _ := spf.CheckHostWithSender(ip, helo, sender, spf.WithContext(ctx), spf.WithResolver(c.resolver))
	res.Result = string(result)
	return res
}

func (c checker) checkDKIM(ctx context.Context, msg io.Reader) []inmail.DKIMResult {
	verifs, err := dkim.VerifyWithOptions(msg, &dkim.VerifyOptions{
		LookupTXT:        func(name string) ([]string, error) { return c.resolver.LookupTXT(ctx, name) },
		MaxVerifications: maxDKIMSignatures,
	})
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		return nil // an unreadable header: nothing to verify
	}
	out := make([]inmail.DKIMResult, 0, len(verifs))
	for _, v := range verifs {
		d := inmail.DKIMResult{Result: "pass", Domain: strings.ToLower(v.Domain), Identifier: v.Identifier}
		switch {
		case v.Err == nil:
		case dkim.IsTempFail(v.Err):
			d.Result, d.Reason = "temperror", v.Err.Error()
		case dkim.IsPermFail(v.Err):
			d.Result, d.Reason = "permerror", v.Err.Error()
		default:
			d.Result, d.Reason = "fail", v.Err.Error()
		}
		out = append(out, d)
	}
	return out
}

func (c checker) checkDMARC(ctx context.Context, msg io.Reader, s inmail.SPFResult, ds []inmail.DKIMResult) inmail.DMARCResult {
	from, ok := fromDomain(msg)
	if !ok {
		// RFC 7489 §6.6.1: no single RFC5322.From domain to evaluate.
		return inmail.DMARCResult{Result: "permerror"}
	}
	res := inmail.DMARCResult{FromDomain: from}
	rec, at, temp := c.lookupDMARC(ctx, from)
	aspf, adkim := dmarc.AlignmentMode(dmarc.AlignmentRelaxed), dmarc.AlignmentMode(dmarc.AlignmentRelaxed)
	if rec != nil {
		if rec.SPFAlignment == dmarc.AlignmentStrict {
			aspf = dmarc.AlignmentStrict
		}
		if rec.DKIMAlignment == dmarc.AlignmentStrict {
			adkim = dmarc.AlignmentStrict
		}
	}
	res.SPFAligned = s.Result == string(spf.Pass) && aligned(s.Domain, from, aspf)
	for _, d := range ds {
		if d.Result == "pass" && aligned(d.Domain, from, adkim) {
			res.DKIMAligned = true
		}
	}
	switch {
	case temp:
		res.Result = "temperror"
		return res
	case rec == nil:
		res.Result = "none"
		return res
	}
	res.PolicyDomain = at
	res.Policy = string(rec.Policy)
	if at != from && rec.SubdomainPolicy != "" {
		res.Policy = string(rec.SubdomainPolicy) // RFC 7489 §6.3, sp=
	}
	res.Result = "fail"
	if res.SPFAligned || res.DKIMAligned {
		res.Result = "pass"
	}
	return res
}

// lookupDMARC finds the DMARC record for domain: at _dmarc.<domain>, else
// at the organizational domain's (RFC 7489 §6.6.3). temp reports a DNS
// failure other than "no such record".
func (c checker) lookupDMARC(ctx context.Context, domain string) (rec *dmarc.Record, at string, temp bool) {
	names := []string{domain}
	if org := orgDomain(domain); org != domain {
		names = append(names, org)
	}
	for _, d := range names {
		txts, err := c.resolver.LookupTXT(ctx, "_dmarc."+d)
		var de *net.DNSError
		if err != nil && !(errors.As(err, &de) && de.IsNotFound) {
			return nil, "", true
		}
		var found []string
		for _, t := range txts {
			if strings.HasPrefix(t, "v=DMARC1") {
				found = append(found, t)
			}
		}
		if len(found) != 1 {
			continue // none, or several: as if none (RFC 7489 §6.6.3 step 2)
		}
		r, err := dmarc.Parse(found[0])
		if err != nil {
			continue
		}
		return r, d, false
	}
	return nil, "", false
}

// aligned compares an authenticated domain with the From domain: equal in
// strict mode, the same organizational domain in relaxed mode (RFC 7489
// §3.1.1, §3.1.2).
func aligned(authDomain, from string, mode dmarc.AlignmentMode) bool {
	authDomain = strings.TrimSuffix(strings.ToLower(authDomain), ".")
	if authDomain == "" {
		return false
	}
	if mode == dmarc.AlignmentStrict {
		return authDomain == from
	}
	return orgDomain(authDomain) == orgDomain(from)
}

// orgDomain is the organizational domain (RFC 7489 §3.2): the public
// suffix plus one label.
func orgDomain(d string) string {
	org, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return org
}

// fromDomain returns the domain of the message's single RFC5322.From
// address.
func fromDomain(msg io.Reader) (string, bool) {
	h, err := textproto.ReadHeader(bufio.NewReader(msg))
	if err != nil {
		return "", false
	}
	vals := h.Values("From")
	if len(vals) != 1 {
		return "", false
	}
	addrs, err := mail.ParseAddressList(vals[0])
	if err != nil || len(addrs) != 1 {
		return "", false
	}
	d := domainOf(addrs[0].Address)
	a, ok := normalizeDomain(d)
	return a, ok
}
