package main

import (
	"fmt"
	"net"
	"net/smtp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/shaping"
)

// at returns times at the given offsets in milliseconds.
func at(ms ...int) []time.Time {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = t0.Add(time.Duration(m) * time.Millisecond)
	}
	return out
}

// every returns n offsets step ms apart from first.
func every(first, step, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i*step
	}
	return out
}

func TestMaxInWindow(t *testing.T) {
	require.Equal(t, 0, maxInWindow(nil, time.Second))
	require.Equal(t, 1, maxInWindow(at(0), time.Second))
	require.Equal(t, 2, maxInWindow(at(0, 999, 1000, 1999), time.Second), "the window is half open")
	require.Equal(t, 3, maxInWindow(at(0, 900, 1100, 1200, 2500), time.Second), "the window may start at any message")
}

func TestMeanRate(t *testing.T) {
	require.Zero(t, meanRate(at(5)))
	require.InDelta(t, 10.0, meanRate(at(every(0, 100, 21)...)), 1e-9)
}

func TestBurstNeeded(t *testing.T) {
	// A full bucket of 10 at once, then the refill, 10 a second: what
	// package shaping lets through at per_sec=10. Its busiest second
	// holds twice the rate, yet it needed no more than the bucket.
	bucket := append(make([]int, 10), every(100, 100, 30)...)
	require.InDelta(t, 10.0, burstNeeded(at(bucket...), 10), 1e-9)
	require.Equal(t, 19, maxInWindow(at(bucket...), time.Second))

	// 15 a second for 10 seconds: each 1-second window holds only 15,
	// under twice the rate, but the bucket it needs grows with the run.
	fast := every(0, 1000/15, 150)
	require.LessOrEqual(t, maxInWindow(at(fast...), time.Second), 16)
	require.Greater(t, burstNeeded(at(fast...), 10), 45.0)

	require.Zero(t, burstNeeded(nil, 10))
	require.InDelta(t, 1.0, burstNeeded(at(0), 10), 1e-9)
}

func TestShapeVerdict(t *testing.T) {
	lim := shaping.Limits{Connections: 2, PerConnection: 10, PerSecond: 10}
	held := shapeObserved{maxConns: 2, maxPerConn: 10, burst: burstAllowed(10)}
	for _, tc := range []struct {
		name string
		lim  shaping.Limits
		obs  func(o *shapeObserved)
		want string
		why  []string
	}{
		{"at every limit", lim, func(*shapeObserved) {}, "held", nil},
		{"one connection too many", lim, func(o *shapeObserved) { o.maxConns = 3 }, "exceeded",
			[]string{"3 connections open at once, limit 2"}},
		{"one message too many over a connection", lim, func(o *shapeObserved) { o.maxPerConn = 11 }, "exceeded",
			[]string{"11 messages over one connection, limit 10"}},
		{"a burst beyond the bucket and the jitter", lim, func(o *shapeObserved) { o.burst = 13 }, "exceeded",
			[]string{"a burst of 13.0 messages at 10 a second, allowed 12.5"}},
		{"no limits", shaping.Limits{}, func(o *shapeObserved) { o.maxConns, o.maxPerConn, o.burst = 99, 99, 99 }, "held", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := held
			tc.obs(&o)
			v, why := shapeVerdict(tc.lim, o)
			require.Equal(t, tc.want, v)
			require.Equal(t, tc.why, why)
		})
	}
}

func TestObserve(t *testing.T) {
	rules, err := shaping.ParseRules(poolsShaping)
	require.NoError(t, err)
	tracks := map[shapeKey]*shapeTrack{
		{source: "127.0.0.3", host: "ol-test.mail.protection.outlook.com"}: {maxOpen: 3, maxPerConn: 20, conns: 4,
			starts: at(1000, 0, 500)},
		{source: "127.0.0.2", host: "gmail-smtp-in.l.google.com"}: {maxOpen: 1, maxPerConn: 1, conns: 1, starts: at(0)},
	}
	got := observe(tracks, rules)
	require.Len(t, got, 2)
	require.Equal(t, "gmail", got[0].provider, "sorted by provider")
	require.Equal(t, "outlook", got[1].provider)
	require.Equal(t, 3, got[1].messages)
	require.Equal(t, 2, got[1].maxPerSecond, "starts are sorted before they are counted")
	require.InDelta(t, 2.0, got[1].meanPerSecond, 1e-9)
	v, _ := shapeVerdict(rules[shaping.Outlook], got[1])
	require.Equal(t, "held", v)
}

func TestIsQuit(t *testing.T) {
	for in, want := range map[string]bool{
		"QUIT\r\n":                    true,
		"quit\r\n":                    true,
		"RSET\r\nQUIT\r\n":            true,
		"QUIT":                        true,
		"MAIL FROM:<QUIT@x.test>\r\n": false,
		"QUITE\r\n":                   false,
		"":                            false,
	} {
		require.Equal(t, want, isQuit([]byte(in)), "%q", in)
	}
}

// TestShapeMXCounts drives the MX over loopback with Go's SMTP client
// from two source addresses: connections open at once end with their
// QUIT, messages are counted per connection and per (source, host), and
// the sender domain is checked against its pool.
func TestShapeMXCounts(t *testing.T) {
	rec := newShapeRecorder(map[string]string{"127.0.0.2": "shared", "127.0.0.3": "acme"},
		map[string]string{"pool-shared.test": "shared", "pool-acme.test": "acme"})
	mx, err := startShapeMX(map[string]string{"gmail-smtp-in.l.google.com": "127.0.0.11"}, rec)
	require.NoError(t, err)
	t.Cleanup(mx.close)

	dial := func(src string) *smtp.Client {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		nc, err := d.Dial("tcp", net.JoinHostPort("127.0.0.11", strconv.Itoa(mx.port)))
		require.NoError(t, err)
		c, err := smtp.NewClient(nc, "gmail-smtp-in.l.google.com")
		require.NoError(t, err)
		return c
	}
	send := func(c *smtp.Client, id, domain string) {
		require.NoError(t, c.Mail("bench@"+domain))
		require.NoError(t, c.Rcpt("u@gm.test"))
		w, err := c.Data()
		require.NoError(t, err)
		_, err = fmt.Fprintf(w, "From: <bench@%s>\r\nMessage-ID: <%s@%s>\r\n\r\nbody\r\n", domain, id, domain)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}

	a, b := dial("127.0.0.2"), dial("127.0.0.2")
	send(a, "e1", "pool-shared.test")
	send(a, "e2", "pool-shared.test")
	send(b, "e3", "pool-acme.test") // from the wrong pool
	require.NoError(t, a.Quit())
	require.NoError(t, b.Quit())
	// Both ended with QUIT, answered only after the MX counted them
	// closed: a third connection is the only one open.
	c := dial("127.0.0.2")
	send(c, "e4", "pool-shared.test")
	require.NoError(t, c.Quit())
	d := dial("127.0.0.3")
	send(d, "e1", "pool-acme.test") // e1 again: a duplicate
	require.NoError(t, d.Quit())

	total, distinct := rec.received()
	require.Equal(t, 5, total)
	require.Equal(t, 4, distinct)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, 1, rec.misrouted)
	require.Equal(t, 2, rec.byID["e1"])
	shared := rec.tracks[shapeKey{source: "127.0.0.2", host: "gmail-smtp-in.l.google.com"}]
	require.NotNil(t, shared)
	require.Equal(t, 2, shared.maxOpen)
	require.Equal(t, 3, shared.conns)
	require.Equal(t, 2, shared.maxPerConn)
	require.Len(t, shared.starts, 4)
	acme := rec.tracks[shapeKey{source: "127.0.0.3", host: "gmail-smtp-in.l.google.com"}]
	require.NotNil(t, acme)
	require.Equal(t, 1, acme.maxOpen)
	require.Equal(t, 0, acme.open)
	require.Equal(t, map[string]int{"shared": 4, "acme": 1}, rec.perPool)
}
