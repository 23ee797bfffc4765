package main

import (
	"context"
	"io"
	"net/smtp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", []time.Duration{ms(7)}, 0.99, ms(7)},
		{"p50 of 100: the 50th", hundred, 0.50, ms(50)},
		{"p90 of 100: the 90th", hundred, 0.90, ms(90)},
		{"p99 of 100: the 99th", hundred, 0.99, ms(99)},
		{"max", hundred, 1, ms(100)},
		{"q 0: the smallest", hundred, 0, ms(1)},
		{"p50 of 4: nearest rank rounds half up", []time.Duration{ms(1), ms(2), ms(3), ms(4)}, 0.50, ms(2)},
		{"p99 of 10: the largest", []time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5), ms(6), ms(7), ms(8), ms(9), ms(10)}, 0.99, ms(10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, percentile(tc.sorted, tc.q))
		})
	}
}

func TestStatsOfSortsACopy(t *testing.T) {
	lat := []time.Duration{ms(30), ms(10), ms(20)}
	s := statsOf(lat)
	require.Equal(t, []time.Duration{ms(30), ms(10), ms(20)}, lat, "the input is left as it is")
	require.Equal(t, 3, s.n())
	require.Equal(t, ms(20), s.at(0.50))
	require.Equal(t, ms(30), s.at(1))
	require.Equal(t, 0, latencyStats{}.n())
	require.Zero(t, latencyStats{}.at(0.99))
}

func TestLatencyStreams(t *testing.T) {
	got, err := latencyStreams(60, 0, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, [2]latencyStream{{load: 0.25, perSec: 15, n: 300}, {load: 0.50, perSec: 30, n: 600}}, got)
	require.Equal(t, 25, got[0].percent())
	require.Equal(t, 50, got[1].percent())

	got, err = latencyStreams(61, 0, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, 76, got[0].n, "15.25/s for 5 s, rounded")
	require.Equal(t, 153, got[1].n, "30.5/s for 5 s, rounded")

	got, err = latencyStreams(60, 100, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 100, got[0].n, "a count given wins over the duration")
	require.Equal(t, 100, got[1].n)
	require.InDelta(t, 30, got[1].perSec, 1e-9, "the rate stays the load's")

	got, err = latencyStreams(0.1, 0, time.Second)
	require.NoError(t, err)
	require.Equal(t, 1, got[0].n, "at least one email")

	for _, bad := range []float64{0, -1} {
		_, err := latencyStreams(bad, 0, time.Second)
		require.Error(t, err, "reference %v", bad)
	}
}

func TestScheduledAt(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, start, scheduledAt(start, 0, 25))
	require.Equal(t, start.Add(40*time.Millisecond), scheduledAt(start, 1, 25))
	require.Equal(t, start.Add(4*time.Second), scheduledAt(start, 100, 25))
	require.Equal(t, start.Add(2500*time.Millisecond), scheduledAt(start, 5, 2))
}

func TestLatencyRcpts(t *testing.T) {
	require.Equal(t, []string{"lat-api-1@rcpt.test", "lat-api-2@rcpt.test"}, latencyRcpts("api", 2))
	require.Empty(t, latencyRcpts("api", 0))
}

func TestLatencyEmail(t *testing.T) {
	m := latencyEmail("lat-x-1@rcpt.test", map[string]any{"html": "<p>x</p>", "subject": "other"})
	require.Equal(t, "lat-x-1@rcpt.test", m["to"])
	require.Equal(t, "Bench <bench@sender.test>", m["from"])
	require.Equal(t, "other", m["subject"], "extra replaces a default")
	require.Equal(t, "<p>x</p>", m["html"])
	require.Equal(t, map[string]string{chaosKeyHeader: latencyKey}, m["headers"])
	id, key := chaosHeaders(latencyMessage("lat-x-1@rcpt.test"))
	require.Empty(t, id, "Postfix or the gateway adds the Message-ID")
	require.Equal(t, latencyKey, key)
}

// TestArrivals: each recipient's latency runs from its start to its first
// copy, whatever the order of start and arrival and the case of the
// address; copies and signatures are counted.
func TestArrivals(t *testing.T) {
	a := newArrivals()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a.start("lat-r-1@rcpt.test", t0)
	a.start("lat-r-2@rcpt.test", t0.Add(ms(10)))
	a.arrived([]string{"LAT-R-1@rcpt.test"}, t0.Add(ms(5)), true)
	a.arrived([]string{"lat-r-2@rcpt.test"}, t0.Add(ms(40)), false)
	a.arrived([]string{"lat-r-2@rcpt.test"}, t0.Add(ms(90)), true) // a second copy
	// An arrival before its start is recorded (the MX may be quicker than
	// the sender's bookkeeping); the latency uses the start set later.
	a.arrived([]string{"lat-r-3@rcpt.test"}, t0.Add(ms(70)), true)
	a.start("lat-r-3@rcpt.test", t0.Add(ms(50)))

	row := a.row("r", 12.5, latencyRcpts("r", 3))
	require.Equal(t, "r", row.name)
	require.Equal(t, 12.5, row.offered)
	require.True(t, row.signing)
	require.Equal(t, []time.Duration{ms(5), ms(20), ms(30)}, row.stats.sorted)
	require.Equal(t, 4, row.copies)
	require.Equal(t, 3, row.signed)

	all, by := a.count("lat-r-2@rcpt.test", t0.Add(ms(40)))
	require.Equal(t, 2, all)
	require.Equal(t, 1, by, "an arrival at t counts as by t")
	all, by = a.count("lat-r-2@rcpt.test", time.Time{})
	require.Equal(t, 2, all)
	require.Equal(t, 2, by)
	start, first, last := a.times("lat-r-2@rcpt.test")
	require.Equal(t, t0.Add(ms(10)), start)
	require.Equal(t, t0.Add(ms(40)), first)
	require.Equal(t, t0.Add(ms(90)), last)
	_, first, _ = a.times("lat-none@rcpt.test")
	require.True(t, first.IsZero())

	missing := a.row("m", 0, []string{"lat-none@rcpt.test"})
	require.Equal(t, 0, missing.stats.n(), "an email that never arrived has no latency")
}

func TestArrivalsWait(t *testing.T) {
	a := newArrivals()
	ctx := context.Background()
	rcpts := latencyRcpts("w", 3)
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, r := range rcpts {
			a.arrived([]string{r}, time.Now(), true)
		}
	})
	require.NoError(t, a.wait(ctx, rcpts, time.Minute))
	wg.Wait()
	require.NoError(t, a.waitCount(ctx, rcpts[0], 1, time.Minute))

	err := a.wait(ctx, append(rcpts, "lat-w-9@rcpt.test"), time.Millisecond)
	require.ErrorContains(t, err, "no email to lat-w-9@rcpt.test")
	require.ErrorContains(t, err, "3 of 4 arrived")
	require.ErrorContains(t, a.waitCount(ctx, rcpts[0], 2, time.Millisecond), "1 of 2 emails")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, a.wait(cancelled, []string{"lat-w-9@rcpt.test"}, time.Minute), context.Canceled)
}

// TestMXSinkTimesArrivals drives the delivery side's MX over loopback: the
// inspect function sees each message's recipients and the time of its
// DATA (the sink's clock), and arrivals times them from there.
func TestMXSinkTimesArrivals(t *testing.T) {
	rec := newArrivals()
	side := &deliverySide{counts: newMXCounts()}
	side.watcher.Store(rec)
	sink, err := startInspectingMXSink("mx.rcpt.test", "127.0.0.1:0", 0, side.counts, side.inspect)
	require.NoError(t, err)
	defer sink.close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sink.now = func() time.Time { return at }
	rec.start("lat-mx-1@rcpt.test", at.Add(-ms(12)))

	c, err := smtp.Dial(sink.ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Mail("bounces@send.sender.test"))
	require.NoError(t, c.Rcpt("lat-mx-1@rcpt.test"))
	require.NoError(t, c.Rcpt("lat-mx-2@rcpt.test"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = io.WriteString(w, "DKIM-Signature: v=1; d=sender.test; s=ph\r\nMessage-ID: <id1@sender.test>\r\n"+
		chaosKeyHeader+": "+latencyKey+"\r\n\r\nbody\r\n")
	require.NoError(t, err)
	require.NoError(t, w.Close(), "the 250 after DATA comes once the message was inspected")

	row := rec.row("mx", 0, []string{"lat-mx-1@rcpt.test"})
	require.Equal(t, []time.Duration{ms(12)}, row.stats.sorted)
	require.Equal(t, 1, row.signed)
	all, _ := rec.count("lat-mx-2@rcpt.test", time.Time{})
	require.Equal(t, 1, all)
	require.Equal(t, int64(1), side.signed.Load())
	require.Equal(t, map[string]int{"id1 lat-mx-1@rcpt.test": 1, "id1 lat-mx-2@rcpt.test": 1}, side.counts.snapshot().byID)
	require.NoError(t, c.Quit())
}
