package dnstest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
)

func TestLookups(t *testing.T) {
	s := NewServer(t)
	s.AddMX("Example.TEST", "mx1.example.test", 20)
	s.AddMX("example.test", "mx0.example.test.", 10)
	s.AddA("mx0.example.test", "127.0.0.1")
	s.AddA("mx0.example.test", "::1")
	s.AddNullMX("nomail.test")
	long := strings.Repeat("k", 600)
	s.AddTXT("sel._domainkey.example.test", "v=DKIM1; p="+long)
	s.AddMX("bücher.test", "mx.bücher.test", 5)

	r := s.Resolver()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	mxs, err := r.LookupMX(ctx, "example.test.")
	require.NoError(t, err)
	require.Len(t, mxs, 2)
	require.Equal(t, "mx0.example.test.", mxs[0].Host)
	require.Equal(t, uint16(10), mxs[0].Pref)

	ips, err := r.LookupNetIP(ctx, "ip", "MX0.example.test.")
	require.NoError(t, err)
	require.Len(t, ips, 2)

	null, err := r.LookupMX(ctx, "nomail.test.")
	require.NoError(t, err)
	require.Len(t, null, 1)
	require.Equal(t, ".", null[0].Host)

	// Over 512 bytes: truncated on UDP, fetched again over TCP. Go joins the
	// strings of one record.
	txt, err := r.LookupTXT(ctx, "sel._domainkey.example.test.")
	require.NoError(t, err)
	require.Equal(t, []string{"v=DKIM1; p=" + long}, txt)
	m := new(dns.Msg)
	m.SetQuestion("sel._domainkey.example.test.", dns.TypeTXT)
	resp, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, s.Addr())
	require.NoError(t, err)
	require.Len(t, resp.Answer, 1)
	parts := resp.Answer[0].(*dns.TXT).Txt
	require.Len(t, parts, 3)
	require.Len(t, parts[0], 255)
	require.Equal(t, "v=DKIM1; p="+long, strings.Join(parts, ""))

	idn, err := r.LookupMX(ctx, "xn--bcher-kva.test.")
	require.NoError(t, err)
	require.Equal(t, "mx.xn--bcher-kva.test.", idn[0].Host)

	s.Remove("example.test", dns.TypeMX)
	_, err = r.LookupMX(ctx, "example.test.")
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	require.True(t, dnsErr.IsNotFound)
}

func TestNXDOMAINAndNODATA(t *testing.T) {
	s := NewServer(t)
	s.AddA("host.example.test", "127.0.0.1")
	s.AddTXT("a.b.deep.test", "x")

	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"host.example.test.", dns.TypeA, dns.RcodeSuccess},
		{"host.example.test.", dns.TypeMX, dns.RcodeSuccess},     // NODATA
		{"example.test.", dns.TypeMX, dns.RcodeSuccess},          // empty non-terminal
		{"b.deep.test.", dns.TypeTXT, dns.RcodeSuccess},          // empty non-terminal
		{"missing.example.test.", dns.TypeA, dns.RcodeNameError}, // NXDOMAIN
		{"HOST.EXAMPLE.TEST.", dns.TypeA, dns.RcodeSuccess},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(tc.name+dns.TypeToString[tc.qtype]+network, func(t *testing.T) {
				c := &dns.Client{Net: network, Timeout: 5 * time.Second}
				m := new(dns.Msg)
				m.SetQuestion(tc.name, tc.qtype)
				resp, _, err := c.Exchange(m, s.Addr())
				require.NoError(t, err)
				require.Equal(t, tc.rcode, resp.Rcode)
				require.True(t, resp.Authoritative)
				if len(resp.Answer) == 0 {
					require.Len(t, resp.Ns, 1, "negative answers carry the SOA")
				} else {
					require.Equal(t, tc.name, resp.Answer[0].Header().Name)
				}
			})
		}
	}
}

func TestServFail(t *testing.T) {
	s := NewServer(t)
	s.AddMX("flaky.test", "mx.flaky.test", 10)
	s.ServFail("flaky.test", true)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := s.Resolver().LookupMX(ctx, "flaky.test.")
	var dnsErr *net.DNSError
	require.True(t, errors.As(err, &dnsErr))
	require.False(t, dnsErr.IsNotFound)
	require.True(t, dnsErr.IsTemporary)

	s.ServFail("flaky.test", false)
	mxs, err := s.Resolver().LookupMX(ctx, "flaky.test.")
	require.NoError(t, err)
	require.Len(t, mxs, 1)
}

func TestTXTEscaping(t *testing.T) {
	s := NewServer(t)
	s.AddTXT("esc.test", `a\b"c`)
	txt, err := s.Resolver().LookupTXT(t.Context(), "esc.test.")
	require.NoError(t, err)
	require.Equal(t, []string{`a\b"c`}, txt)
}

// Secure zones answer with AD, only to queries that ask with DO or AD (RFC
// 6840 §5.7, §5.8), and never with SERVFAIL.
func TestSecureZonesAndTLSA(t *testing.T) {
	s := NewServer(t)
	s.AddTLSA("_25._tcp.mx.example.test", 3, 1, 1, []byte{0xde, 0xad})
	s.AddA("mx.other.test", "127.0.0.1")
	s.SetSecure("example.test", true)

	ask := func(name string, qtype uint16, do bool) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if do {
			m.SetEdns0(1232, true)
		}
		resp, err := dns.ExchangeContext(t.Context(), m, s.Addr())
		require.NoError(t, err)
		return resp
	}
	resp := ask("_25._tcp.mx.example.test.", dns.TypeTLSA, true)
	require.True(t, resp.AuthenticatedData)
	require.Len(t, resp.Answer, 1)
	tlsa := resp.Answer[0].(*dns.TLSA)
	require.Equal(t, []uint8{3, 1, 1}, []uint8{tlsa.Usage, tlsa.Selector, tlsa.MatchingType})
	require.Equal(t, "dead", tlsa.Certificate)

	require.False(t, ask("_25._tcp.mx.example.test.", dns.TypeTLSA, false).AuthenticatedData, "no DO, no AD")
	require.True(t, ask("nothing.example.test.", dns.TypeTLSA, true).AuthenticatedData, "secure denial")
	require.False(t, ask("mx.other.test.", dns.TypeA, true).AuthenticatedData, "insecure zone")

	s.ServFail("_25._tcp.mx.example.test", true)
	resp = ask("_25._tcp.mx.example.test.", dns.TypeTLSA, true)
	require.Equal(t, dns.RcodeServerFailure, resp.Rcode)
	require.False(t, resp.AuthenticatedData)

	s.SetSecure("example.test", false)
	s.ServFail("_25._tcp.mx.example.test", false)
	require.False(t, ask("_25._tcp.mx.example.test.", dns.TypeTLSA, true).AuthenticatedData)
}
