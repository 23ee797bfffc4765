// Package clocktest is a settable clock for tests: code under test takes a
// `now func() time.Time` through its Config (nil meaning time.Now), and the
// test hands it Clock.Now and moves time on with Advance or AdvanceTo
// instead of sleeping.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock; pass it where code wants a `func() time.Time`.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// AdvanceTo moves the clock to t unless it already reads t or later; the
// clock never goes back. It returns the new time.
func (c *Clock) AdvanceTo(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	return c.now
}
