package password

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHashVerify(t *testing.T) {
	ctx := context.Background()
	p := Shared()
	h, err := p.Hash(ctx, "correct horse")
	require.NoError(t, err)
	require.Regexp(t, `^\$argon2id\$v=19\$m=65536,t=3,p=2\$`, h)
	ok, err := p.Verify(ctx, "correct horse", h)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = p.Verify(ctx, "wrong horse", h)
	require.NoError(t, err)
	require.False(t, ok)
	h2, err := p.Hash(ctx, "correct horse")
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "salted")
	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$AA$AA", "$argon2id$v=19$m=x$AA$AA", "$argon2id$v=19$m=1,t=1,p=1$!!$AA",
		// argon2 panics on no lane; more memory than Hash uses would
		// break the Pool's bound.
		"$argon2id$v=19$m=65536,t=3,p=0$AAAAAAAAAAAAAAAAAAAAAA$AAAA",
		"$argon2id$v=19$m=4194304,t=3,p=2$AAAAAAAAAAAAAAAAAAAAAA$AAAA"} {
		_, err := p.Verify(ctx, "x", bad)
		require.ErrorIs(t, err, ErrMalformed, bad)
	}
}

// TestDefaultCostIsRFC9106 guards production's cost: the shared Pool and a
// Pool with the zero PoolConfig hash with RFC 9106 §4's second
// recommended option (64 MiB, 3 passes), two lanes, a 16-byte salt and a
// 32-byte key.
func TestDefaultCostIsRFC9106(t *testing.T) {
	for _, p := range []*Pool{Shared(), NewPool(PoolConfig{}), NewPool(PoolConfig{Concurrency: 1, Queue: 1, Wait: time.Second})} {
		require.Equal(t, uint32(64*1024), p.memory)
		require.Equal(t, uint32(3), p.passes)
		require.Equal(t, someHash, p.Decoy(), "the decoy costs what a real hash costs")
	}
	require.Same(t, Shared(), Shared())

	p := NewPool(PoolConfig{})
	var got struct {
		passes, memory uint32
		lanes          uint8
		salt, key      int
	}
	p.key = func(_, salt []byte, passes, memory uint32, lanes uint8, n uint32) []byte {
		got.passes, got.memory, got.lanes, got.salt, got.key = passes, memory, lanes, len(salt), int(n)
		return make([]byte, n)
	}
	h, err := p.Hash(context.Background(), "pw")
	require.NoError(t, err)
	require.Equal(t, uint32(3), got.passes)
	require.Equal(t, uint32(64*1024), got.memory)
	require.Equal(t, uint8(2), got.lanes)
	require.Equal(t, 16, got.salt)
	require.Equal(t, 32, got.key)
	require.Regexp(t, `^\$argon2id\$v=19\$m=65536,t=3,p=2\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`, h)
}

// A cheaper Pool hashes with its own cost, verifies hashes of that cost,
// and refuses hashes that cost more than its own (its bound on memory
// assumes them).
func TestPoolCost(t *testing.T) {
	ctx := context.Background()
	p := NewPool(PoolConfig{Memory: 64, Passes: 1})
	h, err := p.Hash(ctx, "correct horse")
	require.NoError(t, err)
	require.Regexp(t, `^\$argon2id\$v=19\$m=64,t=1,p=2\$`, h)
	ok, err := p.Verify(ctx, "correct horse", h)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = p.Verify(ctx, "wrong horse", h)
	require.NoError(t, err)
	require.False(t, ok)
	require.Regexp(t, `^\$argon2id\$v=19\$m=64,t=1,p=2\$`, p.Decoy())
	ok, err = p.Verify(ctx, "correct horse", p.Decoy())
	require.NoError(t, err)
	require.False(t, ok)

	// Up to four times the passes, and less memory, are accepted.
	ok, err = p.Verify(ctx, "pw", "$argon2id$v=19$m=32,t=4,p=2$AAAAAAAAAAAAAAAAAAAAAA$AAAA")
	require.NoError(t, err)
	require.False(t, ok)
	for _, bad := range []string{someHash, "$argon2id$v=19$m=64,t=5,p=2$AAAAAAAAAAAAAAAAAAAAAA$AAAA"} {
		_, err := p.Verify(ctx, "x", bad)
		require.ErrorIs(t, err, ErrMalformed, bad)
	}
	// The default Pool verifies the cheap hash: Verify reads the
	// parameters from the hash.
	ok, err = Shared().Verify(ctx, "correct horse", h)
	require.NoError(t, err)
	require.True(t, ok)

	// Below RFC 9106's minimum, the minimum.
	require.Equal(t, uint32(16), NewPool(PoolConfig{Memory: 1}).memory)
}

// gate replaces a Pool's hash function with one that blocks until
// released, counting the hashes running at once.
type gate struct {
	mu      sync.Mutex
	running int
	peak    int
	ran     []string // the passwords hashed, in order
	release chan struct{}
}

func newGate(p *Pool) *gate {
	g := &gate{release: make(chan struct{})}
	p.key = func(pw, _ []byte, _, _ uint32, _ uint8, n uint32) []byte {
		g.mu.Lock()
		g.running++
		g.peak = max(g.peak, g.running)
		g.ran = append(g.ran, string(pw))
		g.mu.Unlock()
		<-g.release
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
		return make([]byte, n)
	}
	return g
}

func (g *gate) started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.ran...)
}

func (p *Pool) waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(time.Millisecond)
	}
}

const someHash = "$argon2id$v=19$m=65536,t=3,p=2$AqHSPjAd0P5pokvZKMSSlQ$sJeOv3uPCMbLbahRyiWsfbpX6F8I/tm91A7hzw8NLr8"

type result struct {
	pw  string
	err error
}

// verify runs Verify in a goroutine and reports on results.
func verify(ctx context.Context, p *Pool, pw string, results chan<- result) {
	go func() {
		_, err := p.Verify(ctx, pw, someHash)
		results <- result{pw, err}
	}()
}

func TestPoolBoundsHashesAndWaiters(t *testing.T) {
	p := NewPool(PoolConfig{Concurrency: 2, Queue: 3, Wait: time.Hour})
	g := newGate(p)
	results := make(chan result, 20)
	for i := range 20 {
		verify(context.Background(), p, string(rune('a'+i)), results)
	}
	// Two run, three wait, fifteen are refused at once.
	for range 15 {
		r := <-results
		require.ErrorIs(t, r.err, ErrOverloaded)
	}
	eventually(t, func() bool { return len(g.started()) == 2 && p.waiting() == 3 }, "two hashes run and three wait")
	close(g.release)
	for range 5 {
		require.NoError(t, (<-results).err)
	}
	require.Equal(t, 2, g.peak, "never more than two at once")
	require.Zero(t, p.running, "every slot is free again")
}

func TestPoolServesLowerRanksFirst(t *testing.T) {
	p := NewPool(PoolConfig{Concurrency: 1, Queue: 2, Wait: time.Hour})
	g := newGate(p)
	results := make(chan result, 10)
	verify(context.Background(), p, "running", results)
	eventually(t, func() bool { return len(g.started()) == 1 }, "the first hash runs")

	flood := WithRank(context.Background(), 3)
	verify(flood, p, "flood-1", results)
	eventually(t, func() bool { return p.waiting() == 1 }, "flood-1 waits")
	verify(flood, p, "flood-2", results)
	eventually(t, func() bool { return p.waiting() == 2 }, "flood-2 waits")

	// The queue is full: a better-ranked caller takes the place of the
	// flood's longest waiter; a worse-ranked one is refused.
	verify(context.Background(), p, "fresh", results)
	r := <-results
	require.Equal(t, result{"flood-1", ErrOverloaded}, r)
	verify(WithRank(context.Background(), 4), p, "worse", results)
	r = <-results
	require.Equal(t, result{"worse", ErrOverloaded}, r)
	// An equal rank takes the place of the oldest of that rank.
	verify(WithRank(context.Background(), 3), p, "flood-3", results)
	r = <-results
	require.Equal(t, result{"flood-2", ErrOverloaded}, r)

	close(g.release)
	for range 3 {
		require.NoError(t, (<-results).err)
	}
	require.Equal(t, []string{"running", "fresh", "flood-3"}, g.started(), "the better rank first")
}

func TestPoolWaitEnds(t *testing.T) {
	p := NewPool(PoolConfig{Concurrency: 1, Queue: 4, Wait: 20 * time.Millisecond})
	g := newGate(p)
	defer close(g.release)
	results := make(chan result, 10)
	verify(context.Background(), p, "running", results)
	eventually(t, func() bool { return len(g.started()) == 1 }, "the first hash runs")

	verify(context.Background(), p, "times out", results)
	require.Equal(t, result{"times out", ErrOverloaded}, <-results)

	ctx, cancel := context.WithCancel(context.Background())
	p.wait = time.Hour
	verify(ctx, p, "gives up", results)
	eventually(t, func() bool { return p.waiting() == 1 }, "it waits")
	cancel()
	r := <-results
	require.ErrorIs(t, r.err, context.Canceled)
	require.False(t, errors.Is(r.err, ErrOverloaded))
	require.Zero(t, p.waiting(), "a waiter that left is out of the queue")
}
