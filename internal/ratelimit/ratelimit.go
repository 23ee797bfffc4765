// Package ratelimit is Posthaste's one rate-limit core: GCRA (the generic
// cell rate algorithm), a bucket per key whose burst equals its rate. Rate
// is the arithmetic, with the time passed in; Local keeps the buckets in
// this process; Redis shares them between processes through one Lua
// script (Script), so several processes enforce one limit between them.
// The API limits, the per-destination shaping and the sign-in throttle
// all use it.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Result is the outcome of one Allow call, with what the rate-limit
// headers report.
type Result struct {
	Allowed   bool
	Limit     int           // requests per second (per period for AllowPer), also the burst
	Remaining int           // requests that would be allowed right now
	Reset     time.Duration // until the bucket is full again
	// RetryAfter is how long to wait before a request is allowed again;
	// zero when Allowed.
	RetryAfter time.Duration
}

// ResetSeconds is Reset rounded up to whole seconds.
func (r Result) ResetSeconds() int { return ceilSeconds(r.Reset) }

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1.
func (r Result) RetryAfterSeconds() int { return max(1, ceilSeconds(r.RetryAfter)) }

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// maxIdleBuckets bounds the buckets Local keeps; beyond it, full buckets
// (keys idle for at least their period) are dropped.
const maxIdleBuckets = 10_000

// Local is an in-process Limiter: the GCRA of Rate, one TAT a key. Safe
// for concurrent use.
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]localBucket
}

// localBucket is a key's rate and theoretical arrival time.
type localBucket struct {
	rate Rate
	tat  time.Time
}

// LocalConfig configures a Local limiter; the zero value is production's.
type LocalConfig struct {
	// Now is the clock the buckets refill by; nil means time.Now. Tests
	// pass a settable clock instead of sleeping.
	Now func() time.Time
}

// NewLocal returns an empty Local limiter.
func NewLocal(cfg LocalConfig) *Local {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Local{now: cfg.Now, buckets: map[string]localBucket{}}
}

// Allow takes one request from key's bucket of limit requests per second.
func (l *Local) Allow(ctx context.Context, key string, limit int) (Result, error) {
	return l.AllowPer(ctx, key, limit, time.Second)
}

// AllowPer takes one request from key's bucket of limit requests per
// period, the burst being limit too. Result.Limit is then per period. A
// key whose limit changed starts with a full bucket.
func (l *Local) AllowPer(_ context.Context, key string, limit int, period time.Duration) (Result, error) {
	now := l.now()
	r := Rate{Limit: limit, Period: period}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok || b.rate != r {
		if len(l.buckets) >= maxIdleBuckets {
			l.sweep(now)
		}
		b = localBucket{rate: r}
	}
	var wait time.Duration
	b.tat, wait = r.Take(b.tat, now)
	l.buckets[key] = b
	return Result{Allowed: wait == 0, Limit: limit, Remaining: r.Remaining(b.tat, now),
		Reset: Ahead(b.tat, now), RetryAfter: wait}, nil
}

// sweep drops full buckets; l.mu is held.
func (l *Local) sweep(now time.Time) {
	for k, b := range l.buckets {
		if !b.tat.After(now) {
			delete(l.buckets, k)
		}
	}
}
