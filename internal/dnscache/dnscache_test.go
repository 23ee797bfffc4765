package dnscache

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

func newResolver(t *testing.T, d *dnstest.Server) (*Resolver, *clocktest.Clock) {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, err := New(Config{Servers: []string{d.Addr()}, Timeout: 2 * time.Second, Now: clock.Now})
	require.NoError(t, err)
	return r, clock
}

func requireNotFound(t *testing.T, err error) {
	t.Helper()
	var de *net.DNSError
	require.True(t, errors.As(err, &de), "%v", err)
	require.True(t, de.IsNotFound, "%v", err)
	require.False(t, de.IsTemporary, "%v", err)
}

func requireTemporary(t *testing.T, err error) {
	t.Helper()
	var de *net.DNSError
	require.True(t, errors.As(err, &de), "%v", err)
	require.False(t, de.IsNotFound, "%v", err)
	require.True(t, de.IsTemporary, "%v", err)
}

// Answers are kept for their TTL: a second lookup within it asks nothing,
// one after it asks again. A TTL above MaxTTL is kept for MaxTTL.
func TestPositiveCaching(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddMX("example.test", "mx.example.test", 10)
	d.AddA("mx.example.test", "192.0.2.1")
	d.AddA("mx.example.test", "2001:db8::1")
	d.AddTXT("_mta-sts.example.test", "v=STSv1; id=1")
	r, clock := newResolver(t, d)
	ctx := t.Context()

	d.SetTTL(30 * time.Second)
	for range 2 {
		mxs, err := r.LookupMX(ctx, "Example.test.")
		require.NoError(t, err)
		require.Equal(t, []*net.MX{{Host: "mx.example.test.", Pref: 10}}, mxs)
		addrs, err := r.LookupNetIP(ctx, "ip", "mx.example.test")
		require.NoError(t, err)
		require.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}, addrs)
		txt, err := r.LookupTXT(ctx, "_mta-sts.example.test.")
		require.NoError(t, err)
		require.Equal(t, []string{"v=STSv1; id=1"}, txt)
	}
	require.Equal(t, 1, d.Queries("example.test", dns.TypeMX))
	require.Equal(t, 1, d.Queries("mx.example.test", dns.TypeA))
	require.Equal(t, 1, d.Queries("mx.example.test", dns.TypeAAAA))
	require.Equal(t, 1, d.Queries("_mta-sts.example.test", dns.TypeTXT))

	clock.Advance(29 * time.Second)
	_, err := r.LookupMX(ctx, "example.test.")
	require.NoError(t, err)
	require.Equal(t, 1, d.Queries("example.test", dns.TypeMX), "within the TTL")
	clock.Advance(time.Second)
	d.SetTTL(time.Hour)
	_, err = r.LookupMX(ctx, "example.test.")
	require.NoError(t, err)
	require.Equal(t, 2, d.Queries("example.test", dns.TypeMX), "after the TTL")

	clock.Advance(5*time.Minute - time.Second)
	_, err = r.LookupMX(ctx, "example.test.")
	require.NoError(t, err)
	require.Equal(t, 2, d.Queries("example.test", dns.TypeMX))
	clock.Advance(time.Second)
	_, err = r.LookupMX(ctx, "example.test.")
	require.NoError(t, err)
	require.Equal(t, 3, d.Queries("example.test", dns.TypeMX), "an hour's TTL is kept 5 minutes")
}

// NXDOMAIN and NODATA are kept for the SOA's TTL and MINIMUM (RFC 2308
// §5), at most a minute; they report IsNotFound as net.Resolver does.
func TestNegativeCaching(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddA("bare.test", "192.0.2.1") // exists, without MX: NODATA
	r, clock := newResolver(t, d)
	ctx := t.Context()

	d.SetTTL(20 * time.Second)
	for range 2 {
		_, err := r.LookupMX(ctx, "nowhere.test.")
		requireNotFound(t, err)
		_, err = r.LookupMX(ctx, "bare.test.")
		requireNotFound(t, err)
		_, err = r.LookupNetIP(ctx, "ip", "nowhere.test.")
		requireNotFound(t, err)
	}
	require.Equal(t, 1, d.Queries("nowhere.test", dns.TypeMX))
	require.Equal(t, 1, d.Queries("bare.test", dns.TypeMX))
	require.Equal(t, 1, d.Queries("nowhere.test", dns.TypeAAAA))

	// Records published meanwhile are seen once the negative answer
	// expires.
	d.AddMX("nowhere.test", "mx.nowhere.test", 10)
	clock.Advance(19 * time.Second)
	_, err := r.LookupMX(ctx, "nowhere.test.")
	requireNotFound(t, err)
	clock.Advance(time.Second)
	mxs, err := r.LookupMX(ctx, "nowhere.test.")
	require.NoError(t, err)
	require.Len(t, mxs, 1)

	// An hour's SOA is kept a minute.
	d.SetTTL(time.Hour)
	_, err = r.LookupTXT(ctx, "gone.test.")
	requireNotFound(t, err)
	clock.Advance(59 * time.Second)
	_, err = r.LookupTXT(ctx, "gone.test.")
	requireNotFound(t, err)
	require.Equal(t, 1, d.Queries("gone.test", dns.TypeTXT))
	clock.Advance(time.Second)
	_, err = r.LookupTXT(ctx, "gone.test.")
	requireNotFound(t, err)
	require.Equal(t, 2, d.Queries("gone.test", dns.TypeTXT))
}

// SERVFAIL is a temporary failure and is not kept: the next lookup asks
// again, and gets the answer once the server has it.
func TestServFailNotCached(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddMX("flaky.test", "mx.flaky.test", 10)
	d.ServFail("flaky.test", true)
	r, _ := newResolver(t, d)
	ctx := t.Context()

	for range 2 {
		_, err := r.LookupMX(ctx, "flaky.test.")
		requireTemporary(t, err)
	}
	require.Equal(t, 2, d.Queries("flaky.test", dns.TypeMX))
	d.ServFail("flaky.test", false)
	mxs, err := r.LookupMX(ctx, "flaky.test.")
	require.NoError(t, err)
	require.Len(t, mxs, 1)
}

// A server that does not answer is a temporary timeout; the next server
// is tried.
func TestTimeoutAndNextServer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing
	require.NoError(t, err)
	t.Cleanup(func() { _ = pc.Close() })
	d := dnstest.NewServer(t)
	d.AddA("host.test", "192.0.2.1")

	mute, err := New(Config{Servers: []string{pc.LocalAddr().String()}, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = mute.LookupNetIP(t.Context(), "ip4", "host.test.")
	requireTemporary(t, err)
	var de *net.DNSError
	require.ErrorAs(t, err, &de)
	require.True(t, de.IsTimeout)

	two, err := New(Config{Servers: []string{pc.LocalAddr().String(), d.Addr()}, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	addrs, err := two.LookupNetIP(t.Context(), "ip4", "host.test.")
	require.NoError(t, err)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.1")}, addrs)
}

// Concurrent identical lookups make one query.
func TestConcurrentLookupsShareOneQuery(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddMX("busy.test", "mx.busy.test", 10)
	r, _ := newResolver(t, d)

	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.LookupMX(t.Context(), "busy.test.")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, d.Queries("busy.test", dns.TypeMX))
}

// CNAMEs are followed for MX, A and AAAA as a system resolver follows
// them, including a chain the answer leaves unfinished, and the answer is
// kept for the smallest TTL on the way.
func TestCNAME(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddCNAME("alias.test", "mx.real.test")
	d.AddA("mx.real.test", "192.0.2.7")
	d.AddCNAME("mail.alias.test", "real.test")
	d.AddMX("real.test", "mx.real.test", 5)
	// Two hops: the server answers one, the resolver asks for the next.
	d.AddCNAME("a.chain.test", "b.chain.test")
	d.AddCNAME("b.chain.test", "mx.real.test")
	d.AddCNAME("dangling.test", "missing.test")
	d.AddCNAME("loop1.test", "loop2.test")
	d.AddCNAME("loop2.test", "loop1.test")
	r, _ := newResolver(t, d)
	ctx := t.Context()

	want := []netip.Addr{netip.MustParseAddr("192.0.2.7")}
	addrs, err := r.LookupNetIP(ctx, "ip", "alias.test.")
	require.NoError(t, err)
	require.Equal(t, want, addrs)
	addrs, err = r.LookupNetIP(ctx, "ip4", "a.chain.test.")
	require.NoError(t, err)
	require.Equal(t, want, addrs)
	mxs, err := r.LookupMX(ctx, "mail.alias.test.")
	require.NoError(t, err)
	require.Equal(t, []*net.MX{{Host: "mx.real.test.", Pref: 5}}, mxs)

	_, err = r.LookupNetIP(ctx, "ip", "dangling.test.")
	requireNotFound(t, err)
	_, err = r.LookupNetIP(ctx, "ip4", "loop1.test.")
	require.Error(t, err)
}

// An answer too large for UDP comes truncated and is asked again over
// TCP (RFC 7766 §5).
func TestTruncatedAnswerOverTCP(t *testing.T) {
	d := dnstest.NewServer(t)
	long := strings.Repeat("k", 2000) // over the 1232 bytes of EDNS0
	d.AddTXT("sel._domainkey.example.test", `v=DKIM1; "quoted" \ p=`+long)
	r, _ := newResolver(t, d)

	txt, err := r.LookupTXT(t.Context(), "sel._domainkey.example.test.")
	require.NoError(t, err)
	require.Equal(t, []string{`v=DKIM1; "quoted" \ p=` + long}, txt)
	require.Equal(t, 1, d.TCPQueries("sel._domainkey.example.test", dns.TypeTXT))
	require.Equal(t, 2, d.Queries("sel._domainkey.example.test", dns.TypeTXT), "UDP, then TCP")
}

// Numeric hosts are not looked up; the caller's context ending is not a
// DNS answer and is not kept.
func TestLiteralAndCanceled(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddA("host.test", "192.0.2.1")
	r, _ := newResolver(t, d)

	addrs, err := r.LookupNetIP(t.Context(), "ip", "2001:db8::5")
	require.NoError(t, err)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("2001:db8::5")}, addrs)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = r.LookupNetIP(ctx, "ip4", "host.test.")
	require.ErrorIs(t, err, context.Canceled)
	var de *net.DNSError
	require.ErrorAs(t, err, &de)
	require.False(t, de.IsNotFound)
}

func TestUnescapeTXT(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        "plain",
		`a\"b`:         `a"b`,
		`a\\b`:         `a\b`,
		`\255\000x`:    "\xff\x00x",
		`trailing\`:    `trailing\`,
		`\1a`:          "1a",
		`v=STSv1\; id`: "v=STSv1; id",
	} {
		require.Equal(t, want, unescapeTXT(in), in)
	}
}
