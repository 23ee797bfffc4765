package mxlisten

import (
	"bytes"
	"context"
	"crypto"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// testKey is one DKIM key for every test (RSA key generation is slow).
var testKey = sync.OnceValues(func() (dkim.Key, error) { return dkim.GenerateKey() })

func signer(t *testing.T) (crypto.Signer, string) {
	t.Helper()
	k, err := testKey()
	require.NoError(t, err)
	s, err := dkim.ParsePrivateKey(k.PrivatePKCS8)
	require.NoError(t, err)
	return s, dkim.RecordValue(k.PublicBase64)
}

// testMessage is a plain message from the given From address.
func testMessage(from, body string) []byte {
	return []byte("From: Sender <" + from + ">\r\nTo: someone@example.com\r\nSubject: Hello\r\n" +
		"Date: Tue, 24 Nov 2026 21:00:00 +0000\r\nMessage-ID: <1@sender.example>\r\n\r\n" + body)
}

// signed is msg with a DKIM signature of domain (selector "sel").
func signed(t *testing.T, msg []byte, domain string) []byte {
	t.Helper()
	key, _ := signer(t)
	out, err := dkim.Sign(msg, domain, "sel", key)
	require.NoError(t, err)
	return out
}

func TestAuthenticationResults(t *testing.T) {
	dns := dnstest.NewServer(t)
	_, record := signer(t)
	// sender.example: SPF allows 127.0.0.1, DKIM key "sel", DMARC p=reject.
	dns.AddTXT("sender.example", "v=spf1 ip4:127.0.0.1 -all")
	dns.AddTXT("sel._domainkey.sender.example", record)
	dns.AddTXT("_dmarc.sender.example", "v=DMARC1; p=reject")
	// soft.example: softfail for everyone, no DMARC record.
	dns.AddTXT("soft.example", "v=spf1 ~all")
	// strict.example: DMARC with strict alignment, a signing subdomain.
	dns.AddTXT("_dmarc.strict.example", "v=DMARC1; p=quarantine; adkim=s; aspf=s")
	dns.AddTXT("sel._domainkey.mail.strict.example", record)
	// org.example: only the organizational domain publishes DMARC, with sp=.
	dns.AddTXT("_dmarc.org.example", "v=DMARC1; p=none; sp=reject")
	dns.AddTXT("sel._domainkey.org.example", record)
	// helo.example: SPF for the HELO name of a null sender.
	dns.AddTXT("mx.helo.example", "v=spf1 ip4:127.0.0.1 -all")
	// broken.example: the DMARC lookup fails (SERVFAIL).
	dns.ServFail("_dmarc.broken.example", true)
	dns.AddTXT("broken.example", "v=spf1 ip4:127.0.0.1 -all")

	c := checker{resolver: dns.Resolver()}
	local, other := net.ParseIP("127.0.0.1"), net.ParseIP("192.0.2.7")
	plain := testMessage("alice@sender.example", "Hi\r\n")
	good := signed(t, plain, "sender.example")
	tampered := bytes.Replace(good, []byte("Hi\r\n"), []byte("Pay me\r\n"), 1)

	for _, tc := range []struct {
		name           string
		ip             net.IP
		helo, mailFrom string
		msg            []byte
		spf, spfDomain string
		dkim           []string // results, in order
		dmarc, policy  string
		spfAl, dkimAl  bool
	}{
		{name: "SPF pass and DKIM pass, DMARC pass by both", ip: local, helo: "mx.sender.example",
			mailFrom: "bounce@sender.example", msg: good, spf: "pass", spfDomain: "sender.example",
			dkim: []string{"pass"}, dmarc: "pass", policy: "reject", spfAl: true, dkimAl: true},
		{name: "SPF fail, DKIM pass: DMARC pass by DKIM alignment", ip: other, helo: "mx.sender.example",
			mailFrom: "bounce@sender.example", msg: good, spf: "fail", spfDomain: "sender.example",
			dkim: []string{"pass"}, dmarc: "pass", policy: "reject", dkimAl: true},
		{name: "SPF fail and a tampered body: DMARC fail with p=reject recorded", ip: other,
			helo: "mx.sender.example", mailFrom: "bounce@sender.example", msg: tampered, spf: "fail",
			spfDomain: "sender.example", dkim: []string{"fail"}, dmarc: "fail", policy: "reject"},
		{name: "unsigned, SPF pass for another domain: not aligned", ip: local, helo: "x.soft.example",
			mailFrom: "bounce@helo.example", msg: plain, spf: "none", spfDomain: "helo.example",
			dmarc: "fail", policy: "reject"},
		{name: "SPF softfail, no DMARC record", ip: local, helo: "x", mailFrom: "a@soft.example",
			msg: testMessage("a@soft.example", "x\r\n"), spf: "softfail", spfDomain: "soft.example", dmarc: "none"},
		{name: "SPF none (no record)", ip: local, helo: "x", mailFrom: "a@nothing.example",
			msg: testMessage("a@nothing.example", "x\r\n"), spf: "none", spfDomain: "nothing.example", dmarc: "none"},
		{name: "null sender: SPF checks the HELO name", ip: local, helo: "mx.helo.example", mailFrom: "",
			msg: testMessage("mailer-daemon@helo.example", "bounce\r\n"), spf: "pass", spfDomain: "mx.helo.example",
			dmarc: "none", spfAl: true},
		{name: "null sender with an address literal HELO: SPF none", ip: local, helo: "[127.0.0.1]", mailFrom: "",
			msg: testMessage("mailer-daemon@helo.example", "bounce\r\n"), spf: "none", spfDomain: "[127.0.0.1]",
			dmarc: "none"},
		{name: "strict alignment: a subdomain's signature does not align", ip: other, helo: "x",
			mailFrom: "a@strict.example", msg: signed(t, testMessage("a@strict.example", "x\r\n"), "mail.strict.example"),
			spf: "none", spfDomain: "strict.example", dkim: []string{"pass"}, dmarc: "fail", policy: "quarantine"},
		{name: "organizational domain's record, sp= applies to a subdomain", ip: other, helo: "x",
			mailFrom: "a@news.org.example", msg: signed(t, testMessage("a@news.org.example", "x\r\n"), "org.example"),
			spf: "none", spfDomain: "news.org.example", dkim: []string{"pass"}, dmarc: "pass", policy: "reject",
			dkimAl: true},
		{name: "DMARC lookup fails: temperror", ip: local, helo: "x", mailFrom: "a@broken.example",
			msg: testMessage("a@broken.example", "x\r\n"), spf: "pass", spfDomain: "broken.example",
			dmarc: "temperror", spfAl: true},
		{name: "two From addresses: DMARC permerror", ip: local, helo: "x", mailFrom: "a@sender.example",
			msg: []byte("From: a@sender.example, b@other.example\r\nSubject: x\r\n\r\nx\r\n"), spf: "pass",
			spfDomain: "sender.example", dmarc: "permerror"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := c.check(ctx, tc.ip, tc.helo, tc.mailFrom, func() io.Reader { return bytes.NewReader(tc.msg) })
			require.Equal(t, tc.spf, r.SPF.Result, "SPF")
			require.Equal(t, tc.spfDomain, r.SPF.Domain, "SPF domain")
			var got []string
			for _, d := range r.DKIM {
				got = append(got, d.Result)
			}
			require.Equal(t, tc.dkim, got, "DKIM: %+v", r.DKIM)
			require.Equal(t, tc.dmarc, r.DMARC.Result, "DMARC: %+v", r.DMARC)
			require.Equal(t, tc.policy, r.DMARC.Policy, "DMARC policy")
			require.Equal(t, tc.spfAl, r.DMARC.SPFAligned, "SPF aligned")
			require.Equal(t, tc.dkimAl, r.DMARC.DKIMAligned, "DKIM aligned")
		})
	}
}

func TestAuthenticationResultsHeader(t *testing.T) {
	r := inmail.Results{
		SPF:   inmail.SPFResult{Result: "pass", Domain: "sender.example", Scope: "mailfrom"},
		DKIM:  []inmail.DKIMResult{{Result: "pass", Domain: "sender.example"}, {Result: "fail", Domain: "x.example", Reason: "body hash did not verify"}},
		DMARC: inmail.DMARCResult{Result: "pass", FromDomain: "sender.example", Policy: "reject"},
	}
	h := r.Header("mx.posthaste.test")
	require.True(t, strings.HasPrefix(h, "mx.posthaste.test; spf=pass smtp.mailfrom=sender.example; "), h)
	require.Contains(t, h, "; dkim=pass header.d=sender.example")
	require.Contains(t, h, `; dkim=fail reason="body hash did not verify" header.d=x.example`)
	require.Contains(t, h, `; dmarc=pass reason="p=reject" header.from=sender.example`)

	null := inmail.Results{SPF: inmail.SPFResult{Result: "none", Domain: "mx.helo.example", Scope: "helo"},
		DMARC: inmail.DMARCResult{Result: "none"}}
	h = null.Header("mx.posthaste.test")
	require.Contains(t, h, "spf=none smtp.helo=mx.helo.example")
	require.Contains(t, h, "dkim=none")
	require.Contains(t, h, "dmarc=none")
}
