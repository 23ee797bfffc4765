package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// memStore is an in-memory outbox with the claim semantics of the store
// (without backoff: an entry that failed is due again at once).
type memStore struct {
	mu     sync.Mutex
	items  []store.OutboxItem
	failed []store.OutboxItem // entries whose work FailOutboxWork failed
}

func (m *memStore) DrainOutbox(ctx context.Context, limit int,
	start func(context.Context, []store.OutboxItem) []store.OutboxResult) (int, error) {
	m.mu.Lock()
	batch := append([]store.OutboxItem(nil), m.items[:min(limit, len(m.items))]...)
	m.mu.Unlock()
	if len(batch) == 0 {
		return 0, nil
	}
	res := start(ctx, batch)
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := m.items[:0]
	for _, it := range m.items {
		started := false
		for _, r := range res {
			if r.ID == it.ID && r.Done {
				started = true
			} else if r.ID == it.ID {
				it.Attempts++
			}
		}
		if !started {
			keep = append(keep, it)
		}
	}
	m.items = keep
	return len(batch), nil
}

func (m *memStore) FailOutboxWork(_ context.Context, it store.OutboxItem, _ string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = append(m.failed, it)
	return 1, nil
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

func TestWebhookEntriesNeverFailEmails(t *testing.T) {
	email, hook := uuid.New(), uuid.New()
	st := &memStore{items: []store.OutboxItem{
		{ID: 1, Kind: store.OutboxWebhook, Ref: hook},
		{ID: 2, Kind: store.OutboxWebhook, Ref: hook}, // a second wake-up of the same endpoint
		{ID: 3, Kind: store.OutboxSendEmail, Ref: email},
	}}
	starter := &refusingStarter{}
	d := New(Config{}, st, starter, nil)
	n, err := d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Zero(t, st.len(), "every entry ended")
	require.Len(t, st.failed, 1)
	require.Equal(t, email, st.failed[0].Ref, "only the email entry fails its email")
	require.Equal(t, 2, starter.calls, "one start per endpoint")
}

type refusingStarter struct {
	mu    sync.Mutex
	calls int
}

func (r *refusingStarter) Start(context.Context, store.OutboxItem) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return fmt.Errorf("starting workflow: %w: %w", ErrUnstartable, errors.New("InvalidArgument"))
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	d := New(Config{}, &memStore{}, &refusingStarter{}, nil)
	for _, tc := range []struct {
		attempts int
		want     time.Duration
	}{
		{0, time.Second}, {1, 2 * time.Second}, {2, 4 * time.Second}, {8, 256 * time.Second},
		{9, 5 * time.Minute}, {10, 5 * time.Minute}, {1000, 5 * time.Minute},
	} {
		require.Equal(t, tc.want, d.backoff(tc.attempts), "after %d failures", tc.attempts)
	}
	d = New(Config{RetryInitial: 3 * time.Second, RetryMax: 10 * time.Second}, &memStore{}, &refusingStarter{}, nil)
	require.Equal(t, []time.Duration{3 * time.Second, 6 * time.Second, 10 * time.Second, 10 * time.Second},
		[]time.Duration{d.backoff(0), d.backoff(1), d.backoff(2), d.backoff(3)})
}
