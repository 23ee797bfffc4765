// Package ttlcache is a bounded in-memory cache whose entries expire after
// a time to live given with each value. Concurrent misses of one key share
// a single load (singleflight), so that a burst of identical lookups costs
// one query. When the cache is full, expired entries are dropped first and
// then the oldest stored.
package ttlcache

import (
	"container/list"
	"context"
	"math"
	"sync"
	"time"
)

// DefaultMaxEntries is the bound of a Cache whose Config gives none.
const DefaultMaxEntries = 10_000

// NoExpiry is a time to live for values that never go stale: they stay
// until evicted from a full cache or deleted.
const NoExpiry = time.Duration(math.MaxInt64)

// Config configures a Cache.
type Config struct {
	// MaxEntries bounds the entries kept; 0 means DefaultMaxEntries.
	MaxEntries int
	// Now returns the time; nil means time.Now. A seam for tests.
	Now func() time.Time
}

// Cache maps keys to values that expire. It is safe for concurrent use;
// the zero Cache is not usable, call New.
type Cache[K comparable, V any] struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[K]*list.Element // of *entry[K, V]
	order   *list.List          // entries, oldest stored first
	// soonest is at or before the earliest expiry of an entry, so that a
	// full cache scans for expired entries only when one may be there.
	soonest time.Time
	loads   map[K]*load[V] // misses being loaded
}

type entry[K comparable, V any] struct {
	key     K
	val     V
	expires time.Time
}

// load is one load under way; done is closed when val and err are set.
type load[V any] struct {
	done    chan struct{}
	val     V
	err     error
	callers int // that asked for it, for tests
}

// New returns an empty Cache.
func New[K comparable, V any](cfg Config) *Cache[K, V] {
	c := &Cache[K, V]{max: cfg.MaxEntries, now: cfg.Now, entries: make(map[K]*list.Element),
		order: list.New(), loads: make(map[K]*load[V])}
	if c.max <= 0 {
		c.max = DefaultMaxEntries
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Get returns the value of key when it is cached and has not expired.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.get(key, c.now())
}

func (c *Cache[K, V]) get(key K, now time.Time) (V, bool) {
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*entry[K, V])
		if now.Before(e.expires) {
			return e.val, true
		}
		c.remove(el)
	}
	var zero V
	return zero, false
}

// Set stores val under key for ttl; a ttl of 0 or less removes key.
func (c *Cache[K, V]) Set(key K, val V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(key, val, ttl, c.now())
}

func (c *Cache[K, V]) set(key K, val V, ttl time.Duration, now time.Time) {
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	if ttl <= 0 {
		return
	}
	if len(c.entries) >= c.max {
		c.evict(now)
	}
	e := &entry[K, V]{key: key, val: val, expires: now.Add(ttl)}
	c.entries[key] = c.order.PushBack(e)
	if len(c.entries) == 1 || e.expires.Before(c.soonest) {
		c.soonest = e.expires
	}
}

// evict makes room for one entry: expired entries go, and when none has
// expired, the oldest stored.
func (c *Cache[K, V]) evict(now time.Time) {
	if !now.Before(c.soonest) {
		var soonest time.Time
		for el := c.order.Front(); el != nil; {
			next := el.Next()
			e := el.Value.(*entry[K, V])
			if !now.Before(e.expires) {
				c.remove(el)
			} else if soonest.IsZero() || e.expires.Before(soonest) {
				soonest = e.expires
			}
			el = next
		}
		c.soonest = soonest
	}
	if len(c.entries) >= c.max {
		c.remove(c.order.Front())
	}
}

// Delete removes key. A Load of key already under way still stores what
// it loads.
func (c *Cache[K, V]) Delete(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
}

func (c *Cache[K, V]) remove(el *list.Element) {
	delete(c.entries, el.Value.(*entry[K, V]).key)
	c.order.Remove(el)
}

// Len returns the number of entries stored, expired or not.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Load returns the cached value of key or, on a miss, the value fn loads,
// which is stored for the ttl fn returns (not at all for 0 or less, or
// with an error). Callers that miss the same key while fn runs wait for
// its result instead of calling fn themselves. fn runs in its own
// goroutine with ctx's values but not its cancellation, so that one
// caller giving up does not fail the others; fn must bound its own
// running time. A caller whose ctx ends first gets ctx's error.
func (c *Cache[K, V]) Load(ctx context.Context, key K, fn func(ctx context.Context) (V, time.Duration, error)) (V, error) {
	c.mu.Lock()
	if v, ok := c.get(key, c.now()); ok {
		c.mu.Unlock()
		return v, nil
	}
	if ctx.Err() != nil {
		// A caller whose context already ended gets its end, always: a
		// load that might finish first would make the answer a race.
		c.mu.Unlock()
		var zero V
		return zero, context.Cause(ctx)
	}
	l, running := c.loads[key]
	if !running {
		l = &load[V]{done: make(chan struct{})}
		c.loads[key] = l
	}
	l.callers++
	c.mu.Unlock()

	if !running {
		go func() {
			v, ttl, err := fn(context.WithoutCancel(ctx))
			c.mu.Lock()
			if err == nil {
				c.set(key, v, ttl, c.now())
			}
			delete(c.loads, key)
			l.val, l.err = v, err
			c.mu.Unlock()
			close(l.done)
		}()
	}
	select {
	case <-l.done:
		return l.val, l.err
	case <-ctx.Done():
		var zero V
		return zero, context.Cause(ctx)
	}
}
