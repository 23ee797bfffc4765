package api

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/ratelimit"
)

// maxLookupBuckets bounds the client addresses lookupBudget tracks. Beyond
// it, idle full buckets are dropped; if none is (a flood from more
// addresses than that), the newcomers share one bucket, so the flood still
// reaches PostgreSQL at no more than one address's rate and the addresses
// already tracked keep their own budget.
const maxLookupBuckets = 10_000

// maxLookupWait bounds how long a request waits for one of its address's
// lookup slots before it is refused.
const maxLookupWait = 5 * time.Second

// lookupBudget throttles, per client address, the database lookups of API
// keys this process does not have cached. Each address has a budget of
// keys that match nothing (rate a second, burst the same): once spent,
// its uncached keys are refused without a lookup until it refills. Live
// keys spend nothing, so a client with valid keys is never refused for
// its own sake. An address also runs at most rate lookups at once (the
// others wait for a slot), so a burst of random keys sent in parallel
// reaches PostgreSQL at most about twice the rate before the budget shows
// it spent. IPv6 clients are counted per /64, the block one host usually
// holds. The buckets live in this process and follow ratelimit.Rate
// (GCRA), charged after the lookup, when it found nothing. Safe for
// concurrent use.
type lookupBudget struct {
	rate ratelimit.Rate
	now  func() time.Time

	mu      sync.Mutex
	buckets map[netip.Prefix]*lookupBucket
}

type lookupBucket struct {
	tat   time.Time     // GCRA's theoretical arrival time; zero when full
	slots chan struct{} // lookups in flight
}

func newLookupBudget(rate int, now func() time.Time) *lookupBudget {
	if now == nil {
		now = time.Now
	}
	return &lookupBudget{rate: ratelimit.Rate{Limit: rate, Period: time.Second}, now: now,
		buckets: map[netip.Prefix]*lookupBucket{}}
}

// overflowBucket is the bucket newcomers share when the map is full.
var overflowBucket = netip.Prefix{}

// clientPrefix is the bucket of a client address: the address itself for
// IPv4, its /64 for IPv6; an unparsable one shares the overflow bucket.
func clientPrefix(addr string) netip.Prefix {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return overflowBucket
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p
	}
	return netip.PrefixFrom(a, a.BitLen())
}

// bucket returns addr's bucket; l.mu is held.
func (l *lookupBudget) bucket(addr string, now time.Time) *lookupBucket {
	key := clientPrefix(addr)
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxLookupBuckets {
			l.sweep(now)
		}
		if len(l.buckets) >= maxLookupBuckets {
			key = overflowBucket
			b = l.buckets[key]
		}
		if b == nil {
			b = &lookupBucket{slots: make(chan struct{}, l.rate.Limit)}
			l.buckets[key] = b
		}
	}
	return b
}

// retryAfter is how long until b allows a lookup, zero when it does now;
// l.mu is held.
func (l *lookupBudget) retryAfter(b *lookupBucket, now time.Time) time.Duration {
	_, wait := l.rate.Take(b.tat, now)
	return wait
}

// begin asks to look up a key for addr. When the address's budget is
// spent, or no slot frees up in time, ok is false and retry says when to
// try again. Otherwise the lookup may run and done must be called with
// whether it found a live key.
func (l *lookupBudget) begin(ctx context.Context, addr string) (done func(live bool), retry time.Duration, ok bool) {
	l.mu.Lock()
	now := l.now()
	b := l.bucket(addr, now)
	if wait := l.retryAfter(b, now); wait > 0 {
		defer l.mu.Unlock()
		return nil, wait, false
	}
	l.mu.Unlock()

	wait := time.NewTimer(maxLookupWait)
	defer wait.Stop()
	select {
	case b.slots <- struct{}{}:
	case <-wait.C:
		return nil, time.Second, false
	case <-ctx.Done():
		return nil, time.Second, false
	}
	// The lookups this one waited for may have spent the budget.
	l.mu.Lock()
	if wait := l.retryAfter(b, l.now()); wait > 0 {
		defer l.mu.Unlock()
		<-b.slots
		return nil, wait, false
	}
	l.mu.Unlock()
	return func(live bool) {
		if !live {
			l.mu.Lock()
			b.tat = l.rate.Charge(b.tat, l.now())
			l.mu.Unlock()
		}
		<-b.slots
	}, 0, true
}

// sweep drops the full buckets no lookup is using; l.mu is held.
func (l *lookupBudget) sweep(now time.Time) {
	for k, b := range l.buckets {
		if !b.tat.After(now) && len(b.slots) == 0 {
			delete(l.buckets, k)
		}
	}
}
