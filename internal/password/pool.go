package password

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
)

// ErrOverloaded means a hash was refused because the Pool is saturated:
// its queue was full, a caller of lower rank took the place, or the wait
// for a slot timed out. Callers answer it with 503 and Retry-After.
var ErrOverloaded = errors.New("too many password hashes at once")

// PoolConfig sets the cost of a Pool's hashes and bounds how many run;
// zero fields take their defaults. Production uses the defaults (Shared);
// tests lower the cost.
type PoolConfig struct {
	// Memory is the argon2id memory of the hashes Hash makes, in KiB, at
	// least 16 (RFC 9106 §3.1: 8 KiB for each of the two lanes); 0 → 64 MiB
	// (RFC 9106 §4, second recommended option).
	Memory uint32
	// Passes is the argon2id number of passes of the hashes Hash makes;
	// 0 → 3 (RFC 9106 §4).
	Passes uint32
	// Concurrency is how many hashes run at once, each holding Memory.
	// 0 → half of GOMAXPROCS (each hash uses two threads), at least 1 and
	// at most 2: at the default cost at most 128 MiB, about 30 sign-ins a
	// second on a fast machine, plenty for a dashboard.
	Concurrency int
	// Queue is how many callers may wait for a slot; 0 → 16 per slot.
	Queue int
	// Wait bounds the wait of one caller for a slot; 0 → 5 s.
	Wait time.Duration
}

// Pool runs argon2id hashes, a bounded number at a time. A caller that
// finds every slot taken waits in a bounded queue, served by rank (see
// WithRank), lowest first, and in order of arrival within a rank. When the
// queue is full, a newcomer takes the place of the longest-waiting caller
// of the highest rank, provided the newcomer's rank is not higher; that
// caller, or else the newcomer, gets ErrOverloaded, and so does a caller
// whose wait outlasts PoolConfig.Wait. Under a flood the oldest waiters,
// the likeliest to have given up, make way, and a caller ranked better
// than the flood still gets a slot. Construct with NewPool.
type Pool struct {
	// memory (KiB) and passes are the cost of Hash and bound Verify's.
	memory, passes uint32

	slots int
	limit int // of the queue
	wait  time.Duration
	// key is argon2.IDKey; tests of the queue replace it.
	key func(pw, salt []byte, t, m uint32, p uint8, n uint32) []byte

	mu      sync.Mutex
	running int
	queue   []*waiter
	arrived uint64 // numbers the waiters in order of arrival
}

type waiter struct {
	rank int
	seq  uint64
	// done receives nil when the waiter is given a slot (already counted
	// in running) or ErrOverloaded when another caller took its place.
	done chan error
}

// NewPool returns a Pool configured by cfg. A Memory below the minimum
// counts as the minimum.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Memory == 0 {
		cfg.Memory = defaultMemory
	}
	cfg.Memory = max(cfg.Memory, 8*threads)
	if cfg.Passes == 0 {
		cfg.Passes = defaultPasses
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = min(max(runtime.GOMAXPROCS(0)/2, 1), 2)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 16 * cfg.Concurrency
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Second
	}
	return &Pool{memory: cfg.Memory, passes: cfg.Passes, slots: cfg.Concurrency, limit: cfg.Queue, wait: cfg.Wait,
		key: argon2.IDKey}
}

type rankKey struct{}

// WithRank returns a context whose hashes wait behind those of callers of
// lower rank. A context without a rank has rank 0, the best; negative
// ranks count as 0. The dashboard ranks a sign-in by the recent attempts
// of its client address, so that an address that is not flooding is not
// stuck behind the ones that are.
func WithRank(ctx context.Context, rank int) context.Context {
	return context.WithValue(ctx, rankKey{}, max(rank, 0))
}

func rankOf(ctx context.Context) int {
	r, _ := ctx.Value(rankKey{}).(int)
	return r
}

// acquire takes a slot; each nil return is followed by one release.
func (p *Pool) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for a hashing slot: %w", err)
	}
	p.mu.Lock()
	if p.running < p.slots && len(p.queue) == 0 {
		p.running++
		p.mu.Unlock()
		return nil
	}
	w := &waiter{rank: rankOf(ctx), seq: p.arrived, done: make(chan error, 1)}
	p.arrived++
	if len(p.queue) >= p.limit {
		i := p.worst()
		if p.queue[i].rank < w.rank {
			p.mu.Unlock()
			return ErrOverloaded
		}
		p.queue[i].done <- ErrOverloaded
		p.remove(i)
	}
	p.queue = append(p.queue, w)
	p.mu.Unlock()

	timer := time.NewTimer(p.wait)
	defer timer.Stop()
	var err error
	select {
	case err = <-w.done:
		return err
	case <-timer.C:
		err = ErrOverloaded
	case <-ctx.Done():
		err = fmt.Errorf("waiting for a hashing slot: %w", ctx.Err())
	}
	p.mu.Lock()
	for i, q := range p.queue {
		if q == w {
			p.remove(i)
			p.mu.Unlock()
			return err
		}
	}
	p.mu.Unlock()
	// It was given a slot or displaced just as it stopped waiting.
	if got := <-w.done; got != nil {
		return got
	}
	p.release()
	return err
}

// release frees a slot, or hands it to the best waiter.
func (p *Pool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.running--
		return
	}
	best := 0
	for i, q := range p.queue {
		if q.rank < p.queue[best].rank || (q.rank == p.queue[best].rank && q.seq < p.queue[best].seq) {
			best = i
		}
	}
	p.queue[best].done <- nil
	p.remove(best)
}

// worst is the index of the waiter that makes way when the queue is full:
// the highest rank, the longest wait.
func (p *Pool) worst() int {
	worst := 0
	for i, q := range p.queue {
		if q.rank > p.queue[worst].rank || (q.rank == p.queue[worst].rank && q.seq < p.queue[worst].seq) {
			worst = i
		}
	}
	return worst
}

func (p *Pool) remove(i int) {
	p.queue = slices.Delete(p.queue, i, i+1)
}
