package mtasts

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dnscache"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/ststest"
)

const enforce = "version: STSv1\r\nmode: enforce\r\nmx: mx.example.test\r\nmax_age: 3600\r\n"

type env struct {
	dns   *dnstest.Server
	srv   *ststest.Server
	clock *clocktest.Clock
	cache *Cache
}

// newEnv serves policies for example.test and other.test from a loopback
// HTTPS server found through the test DNS server, fetched through the
// egress guard (which allows loopback here) with the server's certificate
// trusted.
func newEnv(t *testing.T, edit func(*Config, *egress.Config)) *env {
	t.Helper()
	e := &env{dns: dnstest.NewServer(t), srv: ststest.NewServer(t, "example.test", "other.test"),
		clock: clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	for _, d := range []string{"example.test", "other.test"} {
		e.dns.AddA("mta-sts."+d, "127.0.0.1")
	}
	ecfg := egress.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Resolver: e.dns.Resolver(),
		RootCAs: e.srv.CertPool(), Timeout: 5 * time.Second}
	// The resolver the program gives: it keeps answers for their TTL, by
	// the test's clock.
	r, err := dnscache.New(dnscache.Config{Servers: []string{e.dns.Addr()}, Timeout: 5 * time.Second, Now: e.clock.Now})
	require.NoError(t, err)
	cfg := Config{Resolver: r, Port: e.srv.Port(), Now: e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if edit != nil {
		edit(&cfg, &ecfg)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = egress.New(ecfg).HTTPClient()
	}
	c, err := New(cfg)
	require.NoError(t, err)
	e.cache = c
	return e
}

// dnsChanged lets the resolver's kept answers expire (dnstest's TTL is
// 60 seconds), as after a change of the records a test just made.
func (e *env) dnsChanged() { e.clock.Advance(time.Minute) }

func (e *env) lookup(t *testing.T, domain string) *Policy {
	return e.cache.Lookup(t.Context(), domain)
}

func TestLookupFetchesAndCaches(t *testing.T) {
	e := newEnv(t, nil)
	require.Nil(t, e.lookup(t, "example.test"), "no TXT record: no policy")
	require.Zero(t, e.srv.Requests("example.test"), "nothing fetched without a record")

	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=one;")
	e.srv.SetPolicy("example.test", enforce)
	require.Nil(t, e.lookup(t, "example.test"), "the answer \"no record\" is kept for a while")
	e.dnsChanged()
	p := e.lookup(t, "Example.Test.")
	require.NotNil(t, p)
	require.Equal(t, &Policy{Mode: Enforce, MX: []string{"mx.example.test"}, MaxAge: time.Hour, ID: "one"}, p)
	require.Equal(t, 1, e.srv.Requests("example.test"))

	// Within max_age and under the same id, the cached policy serves.
	e.clock.Advance(58 * time.Minute)
	require.Same(t, p, e.lookup(t, "example.test"))
	require.Equal(t, 1, e.srv.Requests("example.test"))

	// A new id is fetched once the kept record answer expires.
	e.dns.Remove("_mta-sts.example.test", 16)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=two")
	e.srv.SetPolicy("example.test", strings.Replace(enforce, "enforce", "testing", 1))
	require.Same(t, p, e.lookup(t, "example.test"))
	e.dnsChanged()
	p = e.lookup(t, "example.test")
	require.Equal(t, Testing, p.Mode)
	require.Equal(t, "two", p.ID)
	require.Equal(t, 2, e.srv.Requests("example.test"))

	// Past max_age, the policy is fetched again, same id or not.
	e.clock.Advance(time.Hour)
	require.Equal(t, Testing, e.lookup(t, "example.test").Mode)
	require.Equal(t, 3, e.srv.Requests("example.test"))
}

// The _mta-sts record is kept for its TTL, not a fixed time: a new id is
// seen as soon as the old answer expires.
func TestRecordKeptForItsTTL(t *testing.T) {
	e := newEnv(t, nil)
	e.dns.SetTTL(10 * time.Second)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=one;")
	e.srv.SetPolicy("example.test", enforce)
	require.Equal(t, "one", e.lookup(t, "example.test").ID)

	e.dns.Remove("_mta-sts.example.test", 16)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=two")
	e.clock.Advance(9 * time.Second)
	require.Equal(t, "one", e.lookup(t, "example.test").ID)
	e.clock.Advance(time.Second)
	require.Equal(t, "two", e.lookup(t, "example.test").ID)
	require.Equal(t, 2, e.dns.Queries("_mta-sts.example.test", 16))
}

// RFC 8461 §3.3: a policy that cannot be fetched leaves a cached,
// unexpired one in force; with none, no policy applies.
func TestFetchFailureKeepsCachedPolicy(t *testing.T) {
	e := newEnv(t, nil)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=one;")
	e.srv.SetPolicy("example.test", enforce)
	p := e.lookup(t, "example.test")
	require.NotNil(t, p)

	e.dns.Remove("_mta-sts.example.test", 16)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=two;")
	e.dnsChanged()
	e.srv.SetResponse("example.test", ststest.Response{Status: http.StatusInternalServerError})
	require.Same(t, p, e.lookup(t, "example.test"), "the cached policy stays in force")
	require.Equal(t, 2, e.srv.Requests("example.test"))
	require.Same(t, p, e.lookup(t, "example.test"))
	require.Equal(t, 2, e.srv.Requests("example.test"), "a failed fetch is not retried at once")

	// The record disappearing does not withdraw the cached policy either.
	e.dns.Remove("_mta-sts.example.test", 16)
	e.dnsChanged()
	require.Same(t, p, e.lookup(t, "example.test"))

	// Once it expires, nothing is left.
	e.clock.Advance(time.Hour)
	require.Nil(t, e.lookup(t, "example.test"))
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=two;")
	e.dnsChanged()
	require.Nil(t, e.lookup(t, "example.test"))
	require.Equal(t, 3, e.srv.Requests("example.test"), "the failure backoff has passed")
}

// Each failed fetch means no policy (nothing cached), and the server is
// asked each time only after the failure backoff.
func TestFetchFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp ststest.Response
		edit func(*Config, *egress.Config)
	}{
		{name: "not found", resp: ststest.Response{Status: http.StatusNotFound}},
		{name: "redirect not followed (RFC 8461 §3.3)", resp: ststest.Response{Status: http.StatusFound, Location: "https://mta-sts.other.test/.well-known/mta-sts.txt"}},
		{name: "media type not text/plain", resp: ststest.Response{ContentType: "text/html", Body: enforce}},
		{name: "body over 64 KiB", resp: ststest.Response{Body: enforce + strings.Repeat("x: y\r\n", 12000)}},
		{name: "invalid policy", resp: ststest.Response{Body: "version: STSv1\r\nmode: enforce\r\n"}},
		{name: "untrusted certificate", resp: ststest.Response{Body: enforce},
			edit: func(_ *Config, e *egress.Config) { e.RootCAs = nil }},
		{name: "refused by the egress guard", resp: ststest.Response{Body: enforce},
			edit: func(_ *Config, e *egress.Config) { e.Allow = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.edit)
			e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=one;")
			e.srv.SetPolicy("other.test", enforce)
			e.srv.SetResponse("example.test", tc.resp)
			require.Nil(t, e.lookup(t, "example.test"))
			require.Nil(t, e.lookup(t, "example.test"))
			// Sanity: the same setup serves a good policy.
			e.srv.SetResponse("example.test", ststest.Response{Body: enforce})
			e.clock.Advance(failureBackoff)
			if tc.edit == nil {
				require.NotNil(t, e.lookup(t, "example.test"))
			}
		})
	}
}

// RFC 8461 §3.1: records not starting with v=STSv1 are ignored; more than
// one left, or an invalid one, means no policy.
func TestRecordSelection(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.SetPolicy("example.test", enforce)
	e.dns.AddTXT("_mta-sts.example.test", "v=spf1 -all")
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=one")
	require.NotNil(t, e.lookup(t, "example.test"))

	e = newEnv(t, nil)
	e.srv.SetPolicy("example.test", enforce)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=one")
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=two")
	require.Nil(t, e.lookup(t, "example.test"))

	e = newEnv(t, nil)
	e.srv.SetPolicy("example.test", enforce)
	e.dns.AddTXT("_mta-sts.example.test", "v=STSv1; id=not-valid")
	require.Nil(t, e.lookup(t, "example.test"))
	require.Zero(t, e.srv.Requests("example.test"))
}

func TestCacheIsBounded(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *egress.Config) { c.MaxPolicies = 1 })
	for _, d := range []string{"example.test", "other.test"} {
		e.dns.AddTXT("_mta-sts."+d, "v=STSv1; id=one")
		e.srv.SetPolicy(d, enforce)
	}
	require.NotNil(t, e.lookup(t, "example.test"))
	require.NotNil(t, e.lookup(t, "other.test"))
	require.Len(t, e.cache.entries, 1)
	require.NotNil(t, e.lookup(t, "example.test"))
	require.Equal(t, 2, e.srv.Requests("example.test"), "evicted, fetched again")
}
