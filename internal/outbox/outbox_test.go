package outbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// memStore is an in-memory outbox with the claim semantics of the store.
type memStore struct {
	mu    sync.Mutex
	items []store.OutboxItem
}

func (m *memStore) DrainOutbox(ctx context.Context, limit int,
	start func(context.Context, []store.OutboxItem) []int64) (int, error) {
	m.mu.Lock()
	batch := append([]store.OutboxItem(nil), m.items[:min(limit, len(m.items))]...)
	m.mu.Unlock()
	if len(batch) == 0 {
		return 0, nil
	}
	done := start(ctx, batch)
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := m.items[:0]
	for _, it := range m.items {
		started := false
		for _, id := range done {
			started = started || id == it.ID
		}
		if !started {
			keep = append(keep, it)
		}
	}
	m.items = keep
	return len(batch), nil
}

func (m *memStore) len() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.items) }

type flakyStarter struct {
	mu      sync.Mutex
	fails   map[uuid.UUID]int // remaining failures per ref
	started map[uuid.UUID]int
}

func (f *flakyStarter) Start(_ context.Context, it store.OutboxItem) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails[it.Ref] > 0 {
		f.fails[it.Ref]--
		return errors.New("temporal unavailable")
	}
	f.started[it.Ref]++
	return nil
}

func TestDispatcherStartsEveryEntryAndRetriesFailures(t *testing.T) {
	st := &memStore{}
	starter := &flakyStarter{fails: map[uuid.UUID]int{}, started: map[uuid.UUID]int{}}
	for i := range 300 {
		ref := uuid.New()
		if i%7 == 0 {
			starter.fails[ref] = 2
		}
		st.items = append(st.items, store.OutboxItem{ID: int64(i + 1), Ref: ref, CreatedAt: time.Now()})
	}
	d := New(Config{Batch: 50, Concurrency: 8, Poll: 10 * time.Millisecond}, st, starter, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	require.Eventually(t, func() bool { return st.len() == 0 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-errc)
	starter.mu.Lock()
	defer starter.mu.Unlock()
	require.Len(t, starter.started, 300)
	for ref, n := range starter.started {
		require.Equal(t, 1, n, "entry %s started %d times", ref, n)
	}
}

func TestNotifyNeverBlocks(t *testing.T) {
	d := New(Config{}, &memStore{}, &flakyStarter{}, nil)
	for range 10 {
		d.Notify()
	}
}
