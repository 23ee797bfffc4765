package shaping

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/redistest"
)

// gmailHost is an MX host of the Gmail provider.
const gmailHost = "gmail-smtp-in.l.google.com."

func TestProviderOf(t *testing.T) {
	for host, want := range map[string]string{
		"gmail-smtp-in.l.google.com.":             Gmail,
		"ALT1.ASPMX.L.GOOGLE.COM":                 Gmail,
		"gmr-smtp-in.l.googlemail.com":            Gmail,
		"hotmail-com.olc.protection.outlook.com.": Outlook,
		"example-com.mail.protection.outlook.com": Outlook,
		"example-com.o-v1.mx.microsoft":           Outlook,
		"mx1.hotmail.com":                         Outlook,
		"mta5.am0.yahoodns.net.":                  Yahoo,
		"mx.example.test":                         Default,
		"smtp.google.com":                         Gmail,
		"notgoogle.com":                           Default,
		"mx.google.com.evil.test":                 Default,
		"":                                        Default,
	} {
		require.Equal(t, want, ProviderOf(host), host)
	}
}

func TestSlowDown(t *testing.T) {
	for _, tc := range []struct {
		code     int
		enhanced string
		text     string
		want     bool
	}{
		{421, "4.7.0", "Try again later, closing connection.", true},
		{421, "", "Service not available", true},
		{421, "4.7.28", "Our system has detected an unusual rate of unsolicited mail", true},
		{451, "4.7.500", "Server busy. Please try again later from [192.0.2.1]", true},
		{421, "4.7.0", "[TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume", true},
		{450, "4.7.1", "Client host rejected: too many connections", true},
		{451, "4.7.1", "Throttled: slow down", true},
		{450, "4.7.1", "You have been rate-limited", true},
		{451, "4.7.1", "Please try again later", false},
		{451, "4.7.1", "Greylisted, try again later", false},
		{450, "4.7.1", "Greylisting in action: too many attempts too soon", false},
		{421, "4.7.0", "Greylisted, come back later", true},
		{450, "4.2.1", "The user you are trying to contact is receiving mail at a rate that prevents additional messages", false},
		{451, "4.7.1", "Greylisted, see https://example.test", false},
		{451, "4.4.1", "connection refused, try again later", false},
		{550, "5.7.1", "rate limited", false},
		{452, "4.5.3", "Too many recipients", false},
		{250, "2.0.0", "OK", false},
	} {
		require.Equal(t, tc.want, SlowDown(tc.code, tc.enhanced, tc.text), "%d %s %s", tc.code, tc.enhanced, tc.text)
	}
}

func TestParseRules(t *testing.T) {
	def := DefaultRules()
	require.Equal(t, 5, def[Gmail].Connections)
	require.Equal(t, 50, def[Outlook].PerConnection)
	require.Equal(t, 20, def[Yahoo].PerConnection)
	require.Equal(t, 100, def[Default].PerSecond)

	got, err := ParseRules("")
	require.NoError(t, err)
	require.Equal(t, def, got)
	got, err = ParseRules("off")
	require.NoError(t, err)
	require.Nil(t, got)

	got, err = ParseRules(" gmail: conns=3, per_conn=20 ; default:per_sec=0,per_hour=20000,backoff=10s,backoff_max=5m;")
	require.NoError(t, err)
	want := DefaultRules()
	g := want[Gmail]
	g.Connections, g.PerConnection = 3, 20
	want[Gmail] = g
	d := want[Default]
	d.PerSecond, d.PerHour, d.Backoff, d.BackoffMax = 0, 20000, 10*time.Second, 5*time.Minute
	want[Default] = d
	require.Equal(t, want, got)
	again, err := ParseRules(got.String())
	require.NoError(t, err)
	require.Equal(t, got, again, "String reads back")

	for _, bad := range []string{
		"gmail",                  // no keys
		"aol:conns=1",            // unknown provider
		"gmail:conns",            // no value
		"gmail:conns=-1",         // negative
		"gmail:conns=x",          // not a number
		"gmail:speed=1",          // unknown key
		"gmail:backoff=0s",       // not positive
		"gmail:backoff=2h",       // longer than backoff_max (1h)
		"yahoo:per_sec=1e3",      // not a whole number
		"outlook:backoff_max=1s", // shorter than backoff
	} {
		_, err := ParseRules(bad)
		require.Error(t, err, bad)
	}
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"", "off", "gmail:conns=3", "default:per_sec=0,per_hour=20000;yahoo:backoff=5m",
		"gmail:;", "outlook:backoff_max=2h,backoff=1m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRules(s)
		if err != nil || r == nil {
			return
		}
		again, err := ParseRules(r.String())
		if err != nil {
			t.Fatalf("String of %q does not parse: %v", s, err)
		}
		require.Equal(t, r, again)
	})
}

// shapers returns two Shapers on clock as two processes would have them:
// sharing one Redis, or, for "local", the same in-process Shaper twice.
func shapers(t *testing.T, kind string, rules Rules, clock *clocktest.Clock) (*Shaper, *Shaper) {
	t.Helper()
	url := ""
	if kind == "redis" {
		url = redistest.Start(t)
	}
	newShaper := func() *Shaper {
		s, err := New(Config{Rules: rules, RedisURL: url, Now: clock.Now})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
	one := newShaper()
	if kind == "local" {
		return one, one
	}
	return one, newShaper()
}

// ms rounds d to milliseconds: Redis keeps times in microseconds.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func requireHeld(t *testing.T, err error, reason string) *HeldError {
	t.Helper()
	var he *HeldError
	require.True(t, errors.As(err, &he), "want a HeldError, got %v", err)
	require.Equal(t, reason, he.Reason, he.Error())
	return he
}

// TestLimitsHoldBetweenProcesses: two Shapers sharing Redis (two
// processes) keep one connection limit, one message rate and one back-off
// per provider and source address; an in-process Shaper keeps the same
// within itself.
func TestLimitsHoldBetweenProcesses(t *testing.T) {
	for _, kind := range []string{"redis", "local"} {
		t.Run(kind, func(t *testing.T) {
			clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			rules := Rules{Gmail: {Connections: 2, PerSecond: 3, PerHour: 5, Backoff: time.Minute, BackoffMax: 3 * time.Minute}}
			a, b := shapers(t, kind, rules, clock)
			ctx := context.Background()
			const src = "192.0.2.1"

			// Connections.
			l1, err := a.Open(ctx, gmailHost, src, nil)
			require.NoError(t, err)
			l2, err := b.Open(ctx, gmailHost, src, nil)
			require.NoError(t, err)
			_, err = a.Open(ctx, gmailHost, src, nil)
			requireHeld(t, err, "connections")
			u, err := b.Usage(ctx, gmailHost, src)
			require.NoError(t, err)
			require.Equal(t, Usage{Connections: 2}, u)
			other, err := b.Open(ctx, gmailHost, "192.0.2.2", nil)
			require.NoError(t, err, "each source address has its own slots")
			other.Release()
			unlimited, err := b.Open(ctx, "mx.example.test", src, nil)
			require.NoError(t, err, "providers without rules are not limited")
			unlimited.Release()
			l1.Release()
			l1.Release() // idempotent
			l3, err := b.Open(ctx, gmailHost, src, nil)
			require.NoError(t, err, "a released slot is free again")
			_, err = a.Open(ctx, gmailHost, src, nil)
			requireHeld(t, err, "connections")
			l2.Release()
			l3.Release()

			// Messages per second, then per hour.
			require.NoError(t, a.Send(ctx, gmailHost, src))
			require.NoError(t, b.Send(ctx, gmailHost, src))
			require.NoError(t, a.Send(ctx, gmailHost, src))
			he := requireHeld(t, b.Send(ctx, gmailHost, src), "rate")
			require.InDelta(t, float64(time.Second/3), float64(he.RetryAfter), float64(time.Millisecond))
			require.NoError(t, a.Send(ctx, "outlook-com.olc.protection.outlook.com", src), "another provider has its own buckets")
			clock.Advance(time.Second / 3)
			require.NoError(t, b.Send(ctx, gmailHost, src), "one message a third of a second")
			requireHeld(t, a.Send(ctx, gmailHost, src), "rate")
			clock.Advance(time.Second)
			require.NoError(t, a.Send(ctx, gmailHost, src), "the fifth message this hour")
			he = requireHeld(t, b.Send(ctx, gmailHost, src), "rate")
			require.Greater(t, he.RetryAfter, 10*time.Minute, "the hourly bucket is empty")
			clock.Advance(time.Hour)

			// Back-off: a slow-down reply pauses the provider for the
			// source in both processes, until it ends by itself.
			b.Observe(ctx, gmailHost, src, 421, "4.7.0", "Try again later, closing connection.")
			he = requireHeld(t, a.Send(ctx, gmailHost, src), "backoff")
			require.Equal(t, time.Minute, ms(he.RetryAfter))
			_, err = a.Open(ctx, gmailHost, src, nil)
			requireHeld(t, err, "backoff")
			require.NoError(t, a.Send(ctx, gmailHost, "192.0.2.2"), "other source addresses go on")
			a.Observe(ctx, gmailHost, src, 421, "4.7.0", "Try again later")
			u, err = a.Usage(ctx, gmailHost, src)
			require.NoError(t, err)
			require.Equal(t, time.Minute, ms(u.PausedFor), "a slow-down during a pause does not lengthen it")
			clock.Advance(time.Minute)
			require.NoError(t, b.Send(ctx, gmailHost, src), "the pause ended by itself")

			// Another slow-down doubles the pause, up to the maximum.
			a.Observe(ctx, gmailHost, src, 451, "4.7.500", "Server busy. Please try again later")
			u, _ = b.Usage(ctx, gmailHost, src)
			require.Equal(t, 2*time.Minute, ms(u.PausedFor))
			clock.Advance(2 * time.Minute)
			a.Observe(ctx, gmailHost, src, 421, "", "busy")
			u, _ = b.Usage(ctx, gmailHost, src)
			require.Equal(t, 3*time.Minute, ms(u.PausedFor), "capped at BackoffMax")
			clock.Advance(3 * time.Minute)

			// Successes relax it: after three, the next pause is the
			// first again.
			for range 3 {
				b.Observe(ctx, gmailHost, src, 250, "2.0.0", "OK")
			}
			a.Observe(ctx, gmailHost, src, 421, "", "closing")
			u, _ = b.Usage(ctx, gmailHost, src)
			require.Equal(t, time.Minute, ms(u.PausedFor))

			// A reply that does not ask to slow down changes nothing.
			clock.Advance(time.Minute)
			a.Observe(ctx, gmailHost, src, 450, "4.2.1", "mailbox busy")
			u, _ = b.Usage(ctx, gmailHost, src)
			require.Zero(t, ms(u.PausedFor))
		})
	}
}

// TestWaitsWithinMaxWait: with a MaxWait, Open waits for a slot that a
// release frees, and gives up after MaxWait when none does.
func TestWaitsWithinMaxWait(t *testing.T) {
	s, err := New(Config{Rules: Rules{Gmail: {Connections: 1}}, MaxWait: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	l, err := s.Open(ctx, gmailHost, "default", nil)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l2, err := s.Open(ctx, gmailHost, "default", nil)
		if err == nil {
			l2.Release()
		}
		got <- err
	}()
	l.Release()
	require.NoError(t, <-got, "the waiting Open took the released slot")

	short, err := New(Config{Rules: Rules{Gmail: {Connections: 1}}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = short.Close() })
	l, err = short.Open(ctx, gmailHost, "default", nil)
	require.NoError(t, err)
	defer l.Release()
	_, err = short.Open(ctx, gmailHost, "default", nil)
	requireHeld(t, err, "connections")
}

// TestRedisDownFallsBackToProcess: with Redis gone, each process limits
// on its own and delivery goes on.
func TestRedisDownFallsBackToProcess(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Rules: Rules{Gmail: {Connections: 1, PerSecond: 1}}, RedisURL: "redis://127.0.0.1:1/0", Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	l, err := s.Open(ctx, gmailHost, "default", nil)
	require.NoError(t, err)
	_, err = s.Open(ctx, gmailHost, "default", nil)
	requireHeld(t, err, "connections")
	l.Release()
	require.NoError(t, s.Send(ctx, gmailHost, "default"))
	requireHeld(t, s.Send(ctx, gmailHost, "default"), "rate")
}

// TestDefaultIsPerHost: hosts of no known provider each have their own
// limits and pauses; a known provider's hosts share theirs.
func TestDefaultIsPerHost(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Rules: Rules{Default: {Connections: 1, Backoff: time.Minute, BackoffMax: time.Hour},
		Gmail: {Connections: 1}}, Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	a, err := s.Open(ctx, "mx.a.test", "default", nil)
	require.NoError(t, err)
	defer a.Release()
	b, err := s.Open(ctx, "MX.B.test.", "default", nil)
	require.NoError(t, err, "another host of Default has its own slot")
	defer b.Release()
	_, err = s.Open(ctx, "mx.a.test.", "default", nil)
	he := requireHeld(t, err, "connections")
	require.Contains(t, he.Error(), "holds mail to mx.a.test from default")

	g, err := s.Open(ctx, "gmail-smtp-in.l.google.com", "default", nil)
	require.NoError(t, err)
	defer g.Release()
	_, err = s.Open(ctx, "alt1.gmail-smtp-in.l.google.com", "default", nil)
	requireHeld(t, err, "connections")

	s.Observe(ctx, "mx.a.test", "default", 421, "4.7.0", "Try again later")
	requireHeld(t, s.Send(ctx, "mx.a.test", "default"), "backoff")
	require.NoError(t, s.Send(ctx, "mx.b.test", "default"), "one small server's 421 does not pause the others")
}

// TestLeasesOfACrashedProcessExpire: a process that dies holding
// connection slots stops renewing them, and they free themselves after
// the lease's time to live; a live process's renewed slots do not.
func TestLeasesOfACrashedProcessExpire(t *testing.T) {
	for _, kind := range []string{"redis", "local"} {
		t.Run(kind, func(t *testing.T) {
			clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			live, crashed := shapers(t, kind, Rules{Gmail: {Connections: 2}}, clock)
			ctx := context.Background()
			kept, err := live.Open(ctx, gmailHost, "default", nil)
			require.NoError(t, err)
			defer kept.Release()
			lost, err := crashed.Open(ctx, gmailHost, "default", nil)
			require.NoError(t, err)
			if kind == "local" {
				// One process: forget the lease as a crash would.
				crashed.mu.Lock()
				delete(crashed.leases, lost)
				crashed.mu.Unlock()
			}
			_, err = live.Open(ctx, gmailHost, "default", nil)
			requireHeld(t, err, "connections")

			clock.Advance(leaseTTL / 2)
			live.renewAll()
			if kind == "redis" {
				// The crashed process renews nothing.
				crashed.mu.Lock()
				delete(crashed.leases, lost)
				crashed.mu.Unlock()
				crashed.renewAll()
			}
			clock.Advance(leaseTTL/2 + time.Second)
			u, err := live.Usage(ctx, gmailHost, "default")
			require.NoError(t, err)
			require.Equal(t, 1, u.Connections, "the renewed lease lives, the other expired")
			l, err := live.Open(ctx, gmailHost, "default", nil)
			require.NoError(t, err, "the crashed process's slot is free again")
			l.Release()
		})
	}
}

func TestMetrics(t *testing.T) {
	m := Metrics{
		Connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "c"}, []string{"provider", "source"}),
		Messages:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "m"}, []string{"provider", "source"}),
		Held:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "h"}, []string{"provider", "source", "reason"}),
		Backoffs:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b"}, []string{"provider", "source"}),
	}
	s, err := New(Config{Rules: Rules{Gmail: {Connections: 1, PerSecond: 1}, Default: {}}, Metrics: m})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	l, err := s.Open(ctx, gmailHost, "192.0.2.1", nil)
	require.NoError(t, err)
	_, err = s.Open(ctx, gmailHost, "192.0.2.1", nil)
	requireHeld(t, err, "connections")
	d, err := s.Open(ctx, "mx.example.test", "192.0.2.1", nil)
	require.NoError(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(m.Connections.WithLabelValues(Gmail, "192.0.2.1")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Connections.WithLabelValues(Default, "192.0.2.1")))
	require.NoError(t, s.Send(ctx, gmailHost, "192.0.2.1"))
	requireHeld(t, s.Send(ctx, gmailHost, "192.0.2.1"), "rate")
	s.Observe(ctx, gmailHost, "192.0.2.1", 421, "", "closing")
	l.Release()
	d.Release()
	require.Equal(t, 0.0, testutil.ToFloat64(m.Connections.WithLabelValues(Gmail, "192.0.2.1")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Messages.WithLabelValues(Gmail, "192.0.2.1")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Held.WithLabelValues(Gmail, "192.0.2.1", "connections")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Held.WithLabelValues(Gmail, "192.0.2.1", "rate")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Backoffs.WithLabelValues(Gmail, "192.0.2.1")))
}
