package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Schedule that cannot be updated at start (a Temporal server just back
// from a crash) is retried in the background instead of stopping the
// process; one that works is done before KeepSchedules returns.
func TestKeepSchedulesRetriesInTheBackground(t *testing.T) {
	var ok, flaky atomic.Int32
	done := make(chan struct{})
	stop := keepSchedules(slog.New(slog.DiscardHandler), time.Millisecond,
		func(context.Context) error { ok.Add(1); return nil },
		func(context.Context) error {
			if flaky.Add(1) < 3 {
				return errors.New("updating the retention schedule: context deadline exceeded")
			}
			close(done)
			return nil
		})
	require.EqualValues(t, 1, ok.Load(), "tried once, before returning")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the failing schedule was not retried until it worked")
	}
	stop()
	require.EqualValues(t, 3, flaky.Load(), "no try after success")
	require.EqualValues(t, 1, ok.Load())
}

// stop ends retries that never succeed.
func TestKeepSchedulesStops(t *testing.T) {
	var tries atomic.Int32
	stop := keepSchedules(slog.New(slog.DiscardHandler), time.Millisecond,
		func(context.Context) error { tries.Add(1); return errors.New("unavailable") })
	require.Eventually(t, func() bool { return tries.Load() >= 3 }, 30*time.Second, time.Millisecond)
	stop()
	n := tries.Load()
	require.Equal(t, n, tries.Load(), "no try after stop returned")
}
