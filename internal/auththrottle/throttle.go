// Package auththrottle throttles failed authentication: Throttle refuses
// attempts past a GCRA limit per key (the dashboard's sign-in, second
// factor, password reset and anonymous endpoints: at most Max attempts
// at once, then one every Window/Max); Delays slows attempts down after
// failures, doubling the delay with each (the SMTP gateway's AUTH). Both
// take their clock from the caller, so tests need no sleeps.
package auththrottle

import (
	"container/heap"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/ratelimit"
)

// Capacity is how many keys a Throttle remembers.
const Capacity = 100_000

// A Limit is how many attempts a key may make: Max at once, then one more
// every Window/Max, so at most Max per Window in the long run: GCRA
// (ratelimit.Rate) with a burst of Max. Window should be a multiple of
// Max.
type Limit struct {
	Max    int
	Window time.Duration
}

func (l Limit) rate() ratelimit.Rate { return ratelimit.Rate{Limit: l.Max, Period: l.Window} }

func (l Limit) step() time.Duration { return l.rate().Interval() }

// Key is a throttled key with its limit.
type Key struct {
	Name  string
	Limit Limit
}

// Throttle counts attempts per key (the dashboard's sign-in, second
// factor, password reset and anonymous endpoints). It remembers at most
// Capacity keys,
// each in the same few bytes (a SHA-256 prefix of the key): when full it
// forgets the key with the least charge outstanding, so a flood of new
// keys, each charged once, pushes out only its own kind, never a key that
// failures charged more.
type Throttle struct {
	capacity int
	mu       sync.Mutex
	keys     map[[16]byte]*charge
	byDue    dueHeap // the key with the least charge first
}

// charge is what a key owes: it is clear again at due, each attempt
// adding its limit's step.
type charge struct {
	key   [16]byte
	due   time.Time
	index int // in Throttle.byDue
}

// New returns an empty Throttle.
func New() *Throttle { return newThrottle(Capacity) }

func newThrottle(capacity int) *Throttle {
	return &Throttle{capacity: capacity, keys: map[[16]byte]*charge{}}
}

func digest(name string) [16]byte {
	s := sha256.Sum256([]byte(name))
	return [16]byte(s[:16])
}

// outstanding is how many attempts of a key still count at now.
func outstanding(c *charge, l Limit, now time.Time) int {
	if c == nil || !c.due.After(now) {
		return 0
	}
	return int((c.due.Sub(now) + l.step() - 1) / l.step())
}

// Count is how many attempts of k still count at now.
func (t *Throttle) Count(k Key, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return outstanding(t.keys[digest(k.Name)], k.Limit, now)
}

// Note charges k one attempt whatever its limit says and returns how many
// of its attempts counted before. Nothing refunds it: it ranks sign-ins in
// the password pool by how much their address tried lately, including the
// attempts the pool turned away.
func (t *Throttle) Note(k Key, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := digest(k.Name)
	n := outstanding(t.keys[key], k.Limit, now)
	t.add(key, k.Limit, now)
	return n
}

// Take charges an attempt to every key, or to none when one of them is at
// its limit; then it returns how long until that key may try again.
func (t *Throttle) Take(now time.Time, keys ...Key) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		var due time.Time
		if c := t.keys[digest(k.Name)]; c != nil {
			due = c.due
		}
		_, w := k.Limit.rate().Take(due, now)
		wait = max(wait, w)
	}
	if wait > 0 {
		return false, wait
	}
	for _, k := range keys {
		t.add(digest(k.Name), k.Limit, now)
	}
	return true, 0
}

// Refund takes back one attempt of each key.
func (t *Throttle) Refund(now time.Time, keys ...Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		c := t.keys[digest(k.Name)]
		if c == nil {
			continue
		}
		c.due = c.due.Add(-k.Limit.step())
		if c.due.After(now) {
			heap.Fix(&t.byDue, c.index)
		} else {
			t.drop(c)
		}
	}
}

// Allow reports whether k may make an attempt.
func (t *Throttle) Allow(k Key, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return outstanding(t.keys[digest(k.Name)], k.Limit, now) < k.Limit.Max
}

// Fail charges k an attempt whatever its limit says.
func (t *Throttle) Fail(k Key, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(digest(k.Name), k.Limit, now)
}

// Reset forgets a key's attempts.
func (t *Throttle) Reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.keys[digest(key)]; c != nil {
		t.drop(c)
	}
}

// add charges key one step of l, at most a window ahead of now.
func (t *Throttle) add(key [16]byte, l Limit, now time.Time) {
	c := t.keys[key]
	if c == nil {
		t.makeRoom(now)
		c = &charge{key: key, due: now}
		t.keys[key] = c
		heap.Push(&t.byDue, c)
	}
	c.due = l.rate().Charge(c.due, now)
	if most := now.Add(l.Window); c.due.After(most) {
		c.due = most
	}
	heap.Fix(&t.byDue, c.index)
}

// makeRoom forgets the keys that are clear and, when still full, the key
// with the least charge.
func (t *Throttle) makeRoom(now time.Time) {
	for len(t.byDue) > 0 && !t.byDue[0].due.After(now) {
		t.drop(t.byDue[0])
	}
	if len(t.byDue) >= t.capacity {
		t.drop(t.byDue[0])
	}
}

func (t *Throttle) drop(c *charge) {
	heap.Remove(&t.byDue, c.index)
	delete(t.keys, c.key)
}

// dueHeap orders charges by due, soonest first (container/heap).
type dueHeap []*charge

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	c := x.(*charge)
	c.index = len(*h)
	*h = append(*h, c)
}
func (h *dueHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}
