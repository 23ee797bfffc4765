package delivery

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/workflows/contract"
)

func TestThrottleWait(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		last    time.Time
		now     time.Time
		timeout time.Duration
		want    time.Duration
	}{
		{"no heartbeat timeout", t0, t0, 0, 0},
		{"first heartbeat of the attempt", time.Time{}, t0, time.Minute, 0},
		{"right after a liveness heartbeat", t0, t0, time.Minute, 51 * time.Second},
		{"inside the interval", t0, t0.Add(30 * time.Second), time.Minute, 21 * time.Second},
		{"interval surely over", t0, t0.Add(51 * time.Second), time.Minute, 0},
		{"long after", t0, t0.Add(time.Hour), time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, throttleWait(tc.last, tc.now, tc.timeout))
		})
	}
}

// fakeBeats records what heartbeats sends and how long it waits.
type fakeBeats struct {
	mu     sync.Mutex
	sent   []contract.DeliverProgress
	waits  []time.Duration
	beaten chan struct{} // receives after each send
}

func newFakeBeats(h *heartbeats, clock *time.Time) *fakeBeats {
	f := &fakeBeats{beaten: make(chan struct{}, 100)}
	h.send = func(p contract.DeliverProgress) {
		f.mu.Lock()
		f.sent = append(f.sent, p)
		f.mu.Unlock()
		f.beaten <- struct{}{}
	}
	h.now = func() time.Time { return *clock }
	h.sleep = func(d time.Duration) error {
		f.mu.Lock()
		f.waits = append(f.waits, d)
		f.mu.Unlock()
		return nil
	}
	return f
}

func TestHeartbeatsWithoutTimeoutSendTheOutcomeAtOnce(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := newHeartbeats(t.Context(), 0, contract.DeliverProgress{})
	f := newFakeBeats(h, &clock)
	stop := h.keepAlive()
	stop()
	out := contract.DeliverProgress{Outcomes: []contract.DeliverOutcome{{Rcpt: "a@x.test", Status: "delivered"}}}
	require.NoError(t, h.record(out))
	require.Equal(t, []contract.DeliverProgress{out}, f.sent, "no liveness heartbeats, the outcome first")
	require.Empty(t, f.waits, "the first heartbeat of an attempt goes out at once")
}

func TestHeartbeatsWaitOutTheThrottleAfterLiveness(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	carried := contract.DeliverProgress{Outcomes: []contract.DeliverOutcome{{Rcpt: "early@x.test", Status: "bounced", Code: 550}}}
	h := newHeartbeats(t.Context(), 20*time.Millisecond, carried)
	f := newFakeBeats(h, &clock)
	stop := h.keepAlive()
	<-f.beaten
	<-f.beaten
	stop()
	f.mu.Lock()
	n := len(f.sent)
	for _, p := range f.sent {
		require.Equal(t, carried, p, "liveness heartbeats carry the outcomes known so far")
	}
	f.mu.Unlock()

	clock = clock.Add(5 * time.Millisecond) // 5 ms after the last liveness heartbeat
	out := contract.DeliverProgress{Outcomes: append(carried.Outcomes, contract.DeliverOutcome{Rcpt: "a@x.test", Status: "delivered"})}
	require.NoError(t, h.record(out))
	require.Len(t, f.sent, n+1, "no liveness heartbeat after stop")
	require.Equal(t, out, f.sent[n])
	// The SDK holds a heartbeat for up to 0.8 × the timeout after the last
	// one it sent; record returns only after that (plus a margin).
	require.Equal(t, []time.Duration{17*time.Millisecond - 5*time.Millisecond}, f.waits)
}
