package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/redistest"
)

func TestLocalBurstRefillAndReset(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewLocal(LocalConfig{Now: clock.Now})
	ctx := context.Background()
	for i := range 4 {
		r, err := l.Allow(ctx, "team:a", 4)
		require.NoError(t, err)
		require.True(t, r.Allowed, i)
		require.Equal(t, 4, r.Limit)
		require.Equal(t, 3-i, r.Remaining)
		require.Equal(t, 1, r.ResetSeconds())
	}
	r, _ := l.Allow(ctx, "team:a", 4)
	require.False(t, r.Allowed)
	require.Equal(t, 0, r.Remaining)
	require.Equal(t, 250*time.Millisecond, r.RetryAfter)
	require.Equal(t, 1, r.RetryAfterSeconds())

	other, _ := l.Allow(ctx, "team:b", 4)
	require.True(t, other.Allowed, "keys have their own buckets")

	clock.Advance(250 * time.Millisecond) // one token back
	r, _ = l.Allow(ctx, "team:a", 4)
	require.True(t, r.Allowed)
	require.Equal(t, 0, r.Remaining)

	// A new limit for the key starts a new, full bucket.
	r, _ = l.Allow(ctx, "team:a", 10)
	require.True(t, r.Allowed)
	require.Equal(t, 9, r.Remaining)
}

func TestLocalDropsIdleBuckets(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewLocal(LocalConfig{Now: clock.Now})
	for i := range maxIdleBuckets {
		_, _ = l.Allow(context.Background(), fmt.Sprint(i), 10)
	}
	clock.Advance(2 * time.Second)
	_, _ = l.Allow(context.Background(), "new", 10)
	require.Len(t, l.buckets, 1, "full buckets were dropped")
}

// TestRedisBurstRefillAndReset runs the GCRA script on a real Redis with
// an injected clock: two limiters (two processes) share one bucket, which
// refills by the clock, not by the time the test takes; its answers match
// Local's.
func TestRedisBurstRefillAndReset(t *testing.T) {
	url := redistest.Start(t)
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newRedis := func() *Redis {
		r, closeFn, err := NewRedis(RedisConfig{URL: url, Now: clock.Now, Timeout: time.Minute}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = closeFn() })
		return r
	}
	one, two := newRedis(), newRedis()
	ctx := context.Background()
	for i := range 3 {
		r, err := one.Allow(ctx, "team:a", 3)
		require.NoError(t, err)
		require.Equal(t, roundResult(Result{Allowed: true, Limit: 3, Remaining: 2 - i,
			Reset: time.Duration(i+1) * time.Second / 3}), roundResult(r), i)
		require.Equal(t, 1, r.ResetSeconds())
	}
	r, err := two.Allow(ctx, "team:a", 3)
	require.NoError(t, err)
	require.False(t, r.Allowed, "the other process sees the same bucket")
	require.Equal(t, 0, r.Remaining)
	require.Equal(t, (time.Second / 3).Round(time.Millisecond), roundResult(r).RetryAfter)
	require.Equal(t, 1, r.RetryAfterSeconds())
	r, err = two.Allow(ctx, "team:b", 3)
	require.NoError(t, err)
	require.True(t, r.Allowed, "keys have their own buckets")

	clock.Advance(time.Second / 3) // one token back
	r, err = two.Allow(ctx, "team:a", 3)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, 0, r.Remaining)
	r, err = one.Allow(ctx, "team:a", 3)
	require.NoError(t, err)
	require.False(t, r.Allowed, "only one token came back")

	clock.Advance(time.Minute) // long idle: a full bucket, not more
	for i := range 3 {
		r, err = one.Allow(ctx, "team:a", 3)
		require.NoError(t, err)
		require.True(t, r.Allowed, i)
	}
	r, err = one.Allow(ctx, "team:a", 3)
	require.NoError(t, err)
	require.False(t, r.Allowed)

	// The burst of a rate whose interval has a fraction of a microsecond
	// (1/6 s) is allowed whole: rounding never costs a request.
	clock.Advance(time.Second)
	for i := range 6 {
		r, err = one.Allow(ctx, "team:c", 6)
		require.NoError(t, err)
		require.True(t, r.Allowed, i)
		require.Equal(t, 5-i, r.Remaining, i)
	}
	r, err = one.Allow(ctx, "team:c", 6)
	require.NoError(t, err)
	require.False(t, r.Allowed)
}

// roundResult rounds r's durations to milliseconds: the script counts
// whole microseconds.
func roundResult(r Result) Result {
	r.Reset, r.RetryAfter = r.Reset.Round(time.Millisecond), r.RetryAfter.Round(time.Millisecond)
	return r
}

// TestRedisFallsBackWhenRedisIsDown: with Redis gone, each process limits
// on its own.
func TestRedisFallsBackWhenRedisIsDown(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r, closeFn, err := NewRedis(RedisConfig{URL: "redis://127.0.0.1:1/0", Now: clock.Now}, nil)
	require.NoError(t, err)
	defer closeFn()
	for i := range 2 {
		res, err := r.Allow(context.Background(), "team:a", 2)
		require.NoError(t, err)
		require.True(t, res.Allowed, i)
	}
	res, err := r.Allow(context.Background(), "team:a", 2)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	clock.Advance(time.Second / 2)
	res, err = r.Allow(context.Background(), "team:a", 2)
	require.NoError(t, err)
	require.True(t, res.Allowed, "the fallback refills by the same clock")
}

// TestAllowPer checks buckets whose period is not a second (the inbound
// MX's messages per minute), in process and on a real Redis: limit
// requests at once, then one every period/limit.
func TestAllowPer(t *testing.T) {
	type allowPer interface {
		AllowPer(ctx context.Context, key string, limit int, period time.Duration) (Result, error)
	}
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name string
		l    func(t *testing.T) allowPer
	}{
		{"local", func(*testing.T) allowPer { return NewLocal(LocalConfig{Now: clock.Now}) }},
		{"redis", func(t *testing.T) allowPer {
			r, closeFn, err := NewRedis(RedisConfig{URL: redistest.Start(t), Now: clock.Now, Timeout: time.Minute}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = closeFn() })
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ctx := tc.l(t), context.Background()
			for i := range 6 {
				r, err := l.AllowPer(ctx, "mx:ip:192.0.2.1", 6, time.Minute)
				require.NoError(t, err)
				require.True(t, r.Allowed, i)
				require.Equal(t, 5-i, r.Remaining, i)
			}
			r, err := l.AllowPer(ctx, "mx:ip:192.0.2.1", 6, time.Minute)
			require.NoError(t, err)
			require.False(t, r.Allowed, "the seventh within the minute")
			require.Equal(t, 10*time.Second, r.RetryAfter.Round(time.Millisecond))
			clock.Advance(9 * time.Second)
			r, _ = l.AllowPer(ctx, "mx:ip:192.0.2.1", 6, time.Minute)
			require.False(t, r.Allowed, "9 s: no token back yet")
			clock.Advance(time.Second)
			r, _ = l.AllowPer(ctx, "mx:ip:192.0.2.1", 6, time.Minute)
			require.True(t, r.Allowed, "10 s: one token back")
			r, _ = l.AllowPer(ctx, "mx:ip:192.0.2.1", 6, time.Minute)
			require.False(t, r.Allowed)
			clock.Advance(time.Minute) // full again for the next subtest
		})
	}
}
