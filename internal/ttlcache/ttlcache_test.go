package ttlcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestExpiry(t *testing.T) {
	type step struct {
		advance time.Duration
		set     string        // key to set, with val and ttl
		ttl     time.Duration // for set
		del     string        // key to delete
		get     string        // key to get
		want    int           // expected value of get; 0 means a miss
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"hit before expiry", []step{
			{set: "a", ttl: time.Minute},
			{advance: 59 * time.Second, get: "a", want: 1},
		}},
		{"miss at expiry", []step{
			{set: "a", ttl: time.Minute},
			{advance: time.Minute, get: "a"},
		}},
		{"zero ttl keeps nothing", []step{
			{set: "a", ttl: 0},
			{get: "a"},
		}},
		{"zero ttl removes", []step{
			{set: "a", ttl: time.Minute},
			{set: "a", ttl: 0},
			{get: "a"},
		}},
		{"set again renews", []step{
			{set: "a", ttl: time.Minute},
			{advance: 50 * time.Second, set: "a", ttl: time.Minute},
			{advance: 50 * time.Second, get: "a", want: 1},
		}},
		{"unknown key", []step{{get: "b"}}},
		{"delete removes", []step{
			{set: "a", ttl: time.Minute},
			{del: "a", get: "a"},
		}},
		{"delete keeps other keys", []step{
			{set: "a", ttl: time.Minute},
			{del: "b", get: "a", want: 1},
		}},
		{"no expiry outlives any clock", []step{
			{set: "a", ttl: NoExpiry},
			{advance: 200 * 365 * 24 * time.Hour, get: "a", want: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(start)
			c := New[string, int](Config{Now: clock.Now})
			for i, s := range tt.steps {
				clock.Advance(s.advance)
				if s.set != "" {
					c.Set(s.set, 1, s.ttl)
				}
				if s.del != "" {
					c.Delete(s.del)
				}
				if s.get != "" {
					v, ok := c.Get(s.get)
					require.Equal(t, s.want != 0, ok, "step %d", i)
					require.Equal(t, s.want, v, "step %d", i)
				}
			}
		})
	}
}

// A full cache drops expired entries first, and only then the oldest
// stored.
func TestEviction(t *testing.T) {
	tests := []struct {
		name    string
		ttls    []time.Duration // of keys 0, 1, 2 (a full cache of 3), set in order
		advance time.Duration   // before key 3 is set
		kept    []int
	}{
		{"oldest goes", []time.Duration{time.Hour, time.Minute, time.Hour}, 0, []int{1, 2, 3}},
		{"expired go first", []time.Duration{time.Hour, time.Minute, time.Hour}, time.Minute, []int{0, 2, 3}},
		{"all expired", []time.Duration{time.Minute, time.Minute, time.Minute}, time.Hour, []int{3}},
		{"without expiry, oldest goes", []time.Duration{NoExpiry, NoExpiry, NoExpiry}, time.Hour, []int{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(start)
			c := New[int, int](Config{MaxEntries: 3, Now: clock.Now})
			for k, ttl := range tt.ttls {
				c.Set(k, k, ttl)
			}
			clock.Advance(tt.advance)
			c.Set(3, 3, time.Hour)
			require.Equal(t, len(tt.kept), c.Len())
			for _, k := range tt.kept {
				_, ok := c.Get(k)
				require.True(t, ok, "key %d kept", k)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	clock := clocktest.New(start)
	c := New[string, string](Config{Now: clock.Now})
	var calls atomic.Int32
	fn := func(ttl time.Duration, err error) func(context.Context) (string, time.Duration, error) {
		return func(context.Context) (string, time.Duration, error) {
			n := calls.Add(1)
			return string(rune('0' + n)), ttl, err
		}
	}
	ctx := t.Context()

	v, err := c.Load(ctx, "k", fn(time.Minute, nil))
	require.NoError(t, err)
	require.Equal(t, "1", v)
	v, err = c.Load(ctx, "k", fn(time.Minute, nil))
	require.NoError(t, err)
	require.Equal(t, "1", v, "cached")
	clock.Advance(time.Minute)
	v, _ = c.Load(ctx, "k", fn(0, nil))
	require.Equal(t, "2", v, "loaded again after expiry")
	v, _ = c.Load(ctx, "k", fn(time.Minute, nil))
	require.Equal(t, "3", v, "a ttl of 0 kept nothing")

	boom := errors.New("boom")
	_, err = c.Load(ctx, "e", fn(time.Minute, boom))
	require.ErrorIs(t, err, boom)
	v, err = c.Load(ctx, "e", fn(time.Minute, nil))
	require.NoError(t, err, "errors are not kept")
	require.Equal(t, "5", v)
}

// Concurrent misses of one key share one load; a caller that gives up
// does not cancel it for the others.
func TestLoadSingleflight(t *testing.T) {
	c := New[string, int](Config{})
	release := make(chan struct{})
	started := make(chan struct{})
	var calls atomic.Int32
	fn := func(ctx context.Context) (int, time.Duration, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-release
		return 42, time.Minute, ctx.Err()
	}

	canceled, cancel := context.WithCancel(t.Context())
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Load(canceled, "k", fn)
		firstErr <- err
	}()
	<-started

	const n = 10
	var wg sync.WaitGroup
	results := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Load(t.Context(), "k", fn)
		}()
	}
	cancel()
	require.ErrorIs(t, <-firstErr, context.Canceled)
	// Every caller joined the one load; let it finish.
	waitFor(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.loads["k"].callers == n+1
	})
	close(release)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, 42, results[i])
	}
	require.Equal(t, int32(1), calls.Load())
	v, ok := c.Get("k")
	require.True(t, ok)
	require.Equal(t, 42, v)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

// A deleted key is loaded again; Delete frees its room in a full cache.
func TestDelete(t *testing.T) {
	c := New[int, int](Config{MaxEntries: 2})
	c.Set(1, 1, time.Minute)
	c.Set(2, 2, time.Minute)
	c.Delete(1)
	require.Equal(t, 1, c.Len())
	c.Set(3, 3, time.Minute)
	_, ok := c.Get(2)
	require.True(t, ok, "room was made by the delete, not by evicting 2")
	v, err := c.Load(t.Context(), 2, func(context.Context) (int, time.Duration, error) { return 20, time.Minute, nil })
	require.NoError(t, err)
	require.Equal(t, 2, v)
	c.Delete(2)
	v, err = c.Load(t.Context(), 2, func(context.Context) (int, time.Duration, error) { return 20, time.Minute, nil })
	require.NoError(t, err)
	require.Equal(t, 20, v, "loaded again after the delete")
}
