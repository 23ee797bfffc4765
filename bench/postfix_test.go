package main

import (
	"context"
	"net/smtp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/postfixtest"
)

// TestDurableReference runs the bench's reference with small counts: each
// run gets a rate only when the instance logged all its messages.
func TestDurableReference(t *testing.T) {
	postfixtest.Require(t, "smtp-source")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := []smtpRun{{conns: 1, messages: 5}, {conns: 4, messages: 20}}
	require.NoError(t, durableReference(ctx, runs, t.Logf))
	for _, r := range runs {
		require.Equal(t, r.messages, r.durable.n)
		require.Positive(t, r.durable.elapsed)
	}
}

// TestRelayPostfix submits through the latency step's Postfix relay over
// one kept-open connection (smtpPool) and checks that each message
// reaches the bench's MX once, for its recipient, timed by arrivals.
func TestRelayPostfix(t *testing.T) {
	postfixtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := newArrivals()
	side := &deliverySide{counts: newMXCounts()}
	side.watcher.Store(rec)
	sink, err := startInspectingMXSink("mx.rcpt.test", "127.0.0.1:0", 0, side.counts, side.inspect)
	require.NoError(t, err)
	defer sink.close()
	pf, err := startRelayPostfix(ctx, sink.port())
	require.NoError(t, err)
	defer func() { require.NoError(t, pf.Stop()) }()

	pool := &smtpPool{dial: func(ctx context.Context) (*smtp.Client, error) { return dialPlain(ctx, pf.Addr()) }}
	defer pool.close()
	rcpts := latencyRcpts("relay", 3)
	for _, r := range rcpts {
		require.NoError(t, pool.send(ctx, r, func() { rec.start(r, time.Now()) }))
	}
	require.NoError(t, rec.wait(ctx, rcpts, time.Minute), pf.Tail(10))
	row := rec.row("relay", 0, rcpts)
	require.Equal(t, 3, row.stats.n())
	require.Equal(t, 3, row.copies)
	require.Zero(t, row.signed, "Postfix does not sign")
	require.Len(t, pool.idle, 1, "one connection, kept open")
	for _, r := range rcpts {
		require.Equal(t, 1, side.counts.snapshot().byKey[latencyKey+" "+r], r)
	}
}
