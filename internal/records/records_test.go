package records

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

var cfg = Config{BounceHost: "feedback.posthaste.example", SPFInclude: "_spf.posthaste.example"}

func testDomain(t *testing.T) Domain {
	k, err := dkim.GenerateKey()
	require.NoError(t, err)
	return Domain{Name: "example.test", ReturnPath: "send", DKIMSelector: "posthaste", DKIMPublicKey: k.PublicBase64}
}

func TestFor(t *testing.T) {
	d := testDomain(t)
	recs := For(cfg, d)
	require.Len(t, recs, 4)
	require.Equal(t, Record{Key: KeyDKIM, Record: "DKIM", Type: "TXT", Name: "posthaste._domainkey",
		FQDN: "posthaste._domainkey.example.test", Value: "v=DKIM1; k=rsa; p=" + d.DKIMPublicKey}, recs[0])
	require.Greater(t, len(recs[0].Value), 255, "a 2048-bit key does not fit one TXT string")
	require.Equal(t, Record{Key: KeySPFMX, Record: "SPF", Type: "MX", Name: "send", FQDN: "send.example.test",
		Value: "feedback.posthaste.example", Priority: 10}, recs[1])
	require.Equal(t, "v=spf1 include:_spf.posthaste.example ~all", recs[2].Value)
	require.Equal(t, Record{Key: KeyDMARC, Record: "DMARC", Type: "TXT", Name: "_dmarc", FQDN: "_dmarc.example.test",
		Value: "v=DMARC1; p=none;"}, recs[3])
	require.True(t, Required(KeyDKIM))
	require.True(t, Required(KeySPFMX))
	require.False(t, Required(KeyDMARC))
}

func found(rs []Result) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		out[r.Key] = r.Found
	}
	return out
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	d := testDomain(t)
	recs := For(cfg, d)

	cases := []struct {
		name    string
		publish func(s *dnstest.Server)
		want    map[string]bool
	}{
		{"nothing", func(*dnstest.Server) {}, map[string]bool{KeyDKIM: false, KeySPFMX: false, KeySPFTXT: false, KeyDMARC: false}},
		{"all, DKIM split into 255-byte strings", func(s *dnstest.Server) {
			s.AddTXT(recs[0].FQDN, recs[0].Value)
			s.AddMX(recs[1].FQDN, recs[1].Value, 10)
			s.AddTXT(recs[2].FQDN, recs[2].Value)
			s.AddTXT(recs[3].FQDN, "v=DMARC1; p=reject; rua=mailto:d@example.test")
		}, map[string]bool{KeyDKIM: true, KeySPFMX: true, KeySPFTXT: true, KeyDMARC: true}},
		{"DKIM with another key, SPF without our include, MX elsewhere", func(s *dnstest.Server) {
			other := testDomain(t)
			s.AddTXT(recs[0].FQDN, dkim.RecordValue(other.DKIMPublicKey))
			s.AddMX(recs[1].FQDN, "mx.elsewhere.test", 10)
			s.AddTXT(recs[2].FQDN, "v=spf1 include:_spf.google.com ~all")
		}, map[string]bool{KeyDKIM: false, KeySPFMX: false, KeySPFTXT: false, KeyDMARC: false}},
		{"two SPF records are a permanent error", func(s *dnstest.Server) {
			s.AddTXT(recs[2].FQDN, recs[2].Value)
			s.AddTXT(recs[2].FQDN, "v=spf1 -all")
		}, map[string]bool{KeyDKIM: false, KeySPFMX: false, KeySPFTXT: false, KeyDMARC: false}},
		{"case and extra mechanisms, DKIM folded", func(s *dnstest.Server) {
			s.AddTXT(recs[0].FQDN, "v=DKIM1; k=rsa; t=s; p="+d.DKIMPublicKey[:100]+" "+d.DKIMPublicKey[100:])
			s.AddMX(recs[1].FQDN, "Feedback.Posthaste.Example", 20)
			s.AddTXT(recs[2].FQDN, "some-verification=1")
			s.AddTXT(recs[2].FQDN, "v=spf1 ip4:192.0.2.1 +INCLUDE:_spf.posthaste.example -all")
		}, map[string]bool{KeyDKIM: true, KeySPFMX: true, KeySPFTXT: true, KeyDMARC: false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := dnstest.NewServer(t)
			s.AddA("example.test", "192.0.2.10")
			tc.publish(s)
			rs := Check(ctx, s.Resolver(), cfg, d)
			require.Equal(t, tc.want, found(rs))
			for _, r := range rs {
				require.False(t, r.Temporary, r.Error)
			}
		})
	}

	t.Run("SERVFAIL is temporary", func(t *testing.T) {
		s := dnstest.NewServer(t)
		s.ServFail(recs[0].FQDN, true)
		rs := Check(ctx, s.Resolver(), cfg, d)
		require.False(t, rs[0].Found)
		require.True(t, rs[0].Temporary, rs[0].Error)
		require.True(t, strings.Contains(rs[0].Error, "posthaste._domainkey"), rs[0].Error)
	})
}

func TestCheckKeepsDMARCPolicy(t *testing.T) {
	ctx := context.Background()
	d := testDomain(t)
	recs := For(cfg, d)
	for _, tc := range []struct{ record, want string }{
		{"v=DMARC1; p=reject; rua=mailto:d@example.test", "reject"},
		{"v=DMARC1;p=None", "none"},
		{"v=DMARC1; rua=mailto:d@example.test; p = Quarantine ;", "quarantine"},
		{"v=DMARC1", ""},
	} {
		s := dnstest.NewServer(t)
		s.AddTXT(recs[3].FQDN, tc.record)
		var got *Result
		for _, r := range Check(ctx, s.Resolver(), cfg, d) {
			if r.Key == KeyDMARC {
				got = &r
			}
		}
		require.NotNil(t, got)
		require.True(t, got.Found, tc.record)
		require.Equal(t, tc.want, got.Policy, tc.record)
	}
}
