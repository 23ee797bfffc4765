// Package ratelimit limits request rates per key (a team, or a client
// address) with a token bucket whose burst equals the per-second rate.
// Local keeps the buckets in this process (golang.org/x/time/rate); Redis
// shares them between processes through Redis with GCRA (the generic cell
// rate algorithm, one Lua script), so several API processes enforce one
// limit between them.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
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

// Local is an in-process Limiter. Safe for concurrent use.
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
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
	return &Local{now: cfg.Now, buckets: map[string]*rate.Limiter{}}
}

// Allow takes one request from key's bucket of limit requests per second.
func (l *Local) Allow(ctx context.Context, key string, limit int) (Result, error) {
	return l.AllowPer(ctx, key, limit, time.Second)
}

// AllowPer takes one request from key's bucket of limit requests per
// period, the burst being limit too. Result.Limit is then per period.
func (l *Local) AllowPer(_ context.Context, key string, limit int, period time.Duration) (Result, error) {
	now := l.now()
	perSecond := float64(limit) / period.Seconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil || b.Burst() != limit || b.Limit() != rate.Limit(perSecond) {
		if len(l.buckets) >= maxIdleBuckets {
			l.sweep(now)
		}
		b = rate.NewLimiter(rate.Limit(perSecond), limit)
		l.buckets[key] = b
	}
	res := Result{Limit: limit}
	if b.AllowN(now, 1) {
		res.Allowed = true
	} else {
		// One token arrives every period/limit.
		missing := 1 - b.TokensAt(now)
		res.RetryAfter = time.Duration(missing / perSecond * float64(time.Second))
	}
	tokens := b.TokensAt(now)
	res.Remaining = max(0, int(math.Floor(tokens)))
	res.Reset = time.Duration((float64(limit) - tokens) / perSecond * float64(time.Second))
	return res, nil
}

// sweep drops full buckets; l.mu is held.
func (l *Local) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(l.buckets, k)
		}
	}
}
