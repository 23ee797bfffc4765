package auththrottle

import (
	"context"
	"sync"
	"time"
)

// DelaysConfig shapes the delay of attempts after failures.
type DelaysConfig struct {
	// Free is how many failures from an address cost nothing (default 2).
	Free int
	// Base is the delay after the first failure past Free; it doubles
	// with each further failure up to Max (defaults 1 s and 16 s).
	Base, Max time.Duration
	// Forget drops an address's failures this long after its last one
	// (default 15 minutes).
	Forget time.Duration
	// Sleep waits d or until ctx ends; nil uses a timer. Tests record it.
	Sleep func(ctx context.Context, d time.Duration)
	Now   func() time.Time
}

// Delays slows down attempts from addresses that failed before (the SMTP
// gateway's AUTH): a password guesser gets ever fewer tries per minute,
// while a client with a mistyped key notices nothing until its third
// failure. The delay doubles with each failure past Free, up to Max.
type Delays struct {
	cfg   DelaysConfig
	mu    sync.Mutex
	fails map[string]failures
}

type failures struct {
	n    int
	last time.Time
}

// NewDelays returns a Delays with cfg's zero fields defaulted.
func NewDelays(cfg DelaysConfig) *Delays {
	if cfg.Free <= 0 {
		cfg.Free = 2
	}
	if cfg.Base <= 0 {
		cfg.Base = time.Second
	}
	if cfg.Max <= 0 {
		cfg.Max = 16 * time.Second
	}
	if cfg.Forget <= 0 {
		cfg.Forget = 15 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = func(ctx context.Context, d time.Duration) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}
	return &Delays{cfg: cfg, fails: map[string]failures{}}
}

// Delay is how long an attempt from ip waits before it is checked.
func (t *Delays) Delay(ip string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.fails[ip]
	if !ok {
		return 0
	}
	if t.cfg.Now().Sub(f.last) > t.cfg.Forget {
		delete(t.fails, ip)
		return 0
	}
	over := f.n - t.cfg.Free
	if over <= 0 {
		return 0
	}
	d := t.cfg.Base
	for i := 1; i < over && d < t.cfg.Max; i++ {
		d *= 2
	}
	return min(d, t.cfg.Max)
}

// Wait sleeps the delay of ip.
func (t *Delays) Wait(ctx context.Context, ip string) {
	if d := t.Delay(ip); d > 0 {
		t.cfg.Sleep(ctx, d)
	}
}

// Fail records a failed attempt from ip.
func (t *Delays) Fail(ip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	if len(t.fails) > 100_000 {
		for k, f := range t.fails {
			if now.Sub(f.last) > t.cfg.Forget {
				delete(t.fails, k)
			}
		}
	}
	f := t.fails[ip]
	if now.Sub(f.last) > t.cfg.Forget {
		f.n = 0
	}
	f.n++
	f.last = now
	t.fails[ip] = f
}

// Succeed forgets ip's failures.
func (t *Delays) Succeed(ip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.fails, ip)
}
