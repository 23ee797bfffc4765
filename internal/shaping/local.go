package shaping

import (
	"context"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/ratelimit"
)

// backend keeps the shared state of the limits: connection leases, rate
// buckets and back-off. local keeps it in this process, redisBackend in
// Redis for every process. Keys are built by Shaper; times come from its
// clock.
type backend interface {
	// acquire adds lease id to key's set of live leases when fewer than
	// limit are live; a lease lives until expires unless renewed.
	acquire(ctx context.Context, key, id string, limit int, now, expires time.Time) (bool, error)
	// renew moves the expiry of key's live lease id to expires.
	renew(ctx context.Context, key, id string, now, expires time.Time) error
	// release ends lease id.
	release(ctx context.Context, key, id string) error
	// live counts key's live leases.
	live(ctx context.Context, key string, now time.Time) (int, error)
	// take takes one message from every bucket in bs, or none: it returns
	// zero when it took, else how long until all of them would allow.
	take(ctx context.Context, bs []bucket, now time.Time) (time.Duration, error)
	// backoff starts a pause of key unless one runs: the level rises by
	// one and the pause lasts initial × 2^(level-1), at most max; the
	// level is forgotten a max after the pause ends. It returns when the
	// pause, new or running, ends.
	backoff(ctx context.Context, key string, now time.Time, initial, max time.Duration) (time.Time, error)
	// relax lowers key's level by one once its pause is over.
	relax(ctx context.Context, key string, now time.Time) error
	// paused returns when key's pause ends, or the zero time without one,
	// and its level (0: nothing to relax).
	paused(ctx context.Context, key string, now time.Time) (time.Time, int, error)
}

// bucket is one rate limit: limit messages per period, a burst of limit.
type bucket struct {
	key    string
	limit  int
	period time.Duration
}

// local is the in-process backend.
type local struct {
	mu     sync.Mutex
	leases map[string]map[string]time.Time // key → id → expiry
	tats   map[string]time.Time            // bucket → theoretical arrival time (GCRA)
	pauses map[string]*pause
}

type pause struct {
	level  int
	until  time.Time
	forget time.Time
}

func newLocal() *local {
	return &local{leases: map[string]map[string]time.Time{}, tats: map[string]time.Time{}, pauses: map[string]*pause{}}
}

func (l *local) acquire(_ context.Context, key, id string, limit int, now, expires time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.leases[key]
	for k, exp := range set {
		if !exp.After(now) {
			delete(set, k)
		}
	}
	if len(set) >= limit {
		return false, nil
	}
	if set == nil {
		set = map[string]time.Time{}
		l.leases[key] = set
	}
	set[id] = expires
	return true, nil
}

func (l *local) renew(_ context.Context, key, id string, _, expires time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.leases[key][id]; ok {
		l.leases[key][id] = expires
	}
	return nil
}

func (l *local) release(_ context.Context, key, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases[key], id)
	if len(l.leases[key]) == 0 {
		delete(l.leases, key)
	}
	return nil
}

func (l *local) live(_ context.Context, key string, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, exp := range l.leases[key] {
		if exp.After(now) {
			n++
		}
	}
	return n, nil
}

// take runs GCRA (ratelimit.Rate) on each bucket: a message is allowed
// when every bucket allows it.
func (l *local) take(_ context.Context, bs []bucket, now time.Time) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	next := make([]time.Time, len(bs))
	for i, b := range bs {
		var w time.Duration
		next[i], w = ratelimit.Rate{Limit: b.limit, Period: b.period}.Take(l.tats[b.key], now)
		wait = max(wait, w)
	}
	if wait > 0 {
		return wait, nil
	}
	for i, b := range bs {
		l.tats[b.key] = next[i]
	}
	if len(l.tats) > 10_000 {
		for k, t := range l.tats {
			if t.Before(now) {
				delete(l.tats, k)
			}
		}
	}
	return 0, nil
}

func (l *local) backoff(_ context.Context, key string, now time.Time, initial, max time.Duration) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pauses[key]
	if p != nil && !p.forget.After(now) {
		p = nil
	}
	if p == nil {
		if len(l.pauses) > 10_000 {
			for k, q := range l.pauses {
				if !q.forget.After(now) {
					delete(l.pauses, k)
				}
			}
		}
		p = &pause{}
		l.pauses[key] = p
	}
	if p.until.After(now) {
		return p.until, nil
	}
	p.level++
	p.until = now.Add(backoffFor(p.level, initial, max))
	p.forget = p.until.Add(max)
	return p.until, nil
}

// backoffFor is the pause at level (from 1): initial doubled level-1
// times, at most max.
func backoffFor(level int, initial, max time.Duration) time.Duration {
	d := initial
	for i := 1; i < level && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func (l *local) relax(_ context.Context, key string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pauses[key]
	if p == nil || p.until.After(now) {
		return nil
	}
	p.level--
	if p.level <= 0 || !p.forget.After(now) {
		delete(l.pauses, key)
	}
	return nil
}

func (l *local) paused(_ context.Context, key string, now time.Time) (time.Time, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pauses[key]
	if p == nil || !p.forget.After(now) {
		return time.Time{}, 0, nil
	}
	if p.until.After(now) {
		return p.until, p.level, nil
	}
	return time.Time{}, p.level, nil
}
