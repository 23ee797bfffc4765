package auththrottle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/auththrottle"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

// TestDelaysForgetOldFailures: failures count until Forget has passed
// since the last one, by the throttle's clock.
func TestDelaysForgetOldFailures(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	th := auththrottle.NewDelays(auththrottle.DelaysConfig{Forget: time.Minute, Now: clock.Now})
	for range 3 {
		th.Fail("192.0.2.1")
	}
	require.Equal(t, time.Second, th.Delay("192.0.2.1"), "two failures are free, the third costs a second")
	require.Zero(t, th.Delay("192.0.2.2"), "other addresses are not slowed")

	clock.Advance(time.Minute)
	th.Fail("192.0.2.1") // within a minute of the last one: still counting
	require.Equal(t, 2*time.Second, th.Delay("192.0.2.1"))

	clock.Advance(time.Minute + time.Second)
	require.Zero(t, th.Delay("192.0.2.1"), "forgotten a minute after the last failure")
	th.Fail("192.0.2.1")
	require.Zero(t, th.Delay("192.0.2.1"), "counting starts over")
}

// TestDelaysDouble: two failures are free, then the delay starts at Base
// and doubles with each failure up to Max; a success forgets them all.
func TestDelaysDouble(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var slept []time.Duration
	th := auththrottle.NewDelays(auththrottle.DelaysConfig{Now: clock.Now,
		Sleep: func(_ context.Context, d time.Duration) { slept = append(slept, d) }})
	for _, tt := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 0}, {1, 0}, {2, 0}, {3, time.Second}, {4, 2 * time.Second}, {5, 4 * time.Second},
		{6, 8 * time.Second}, {7, 16 * time.Second}, {8, 16 * time.Second}, {20, 16 * time.Second},
	} {
		th.Succeed("192.0.2.1")
		for range tt.failures {
			th.Fail("192.0.2.1")
		}
		require.Equal(t, tt.want, th.Delay("192.0.2.1"), "%d failures", tt.failures)
		slept = nil
		th.Wait(context.Background(), "192.0.2.1")
		if tt.want == 0 {
			require.Empty(t, slept, "no delay, no sleep")
		} else {
			require.Equal(t, []time.Duration{tt.want}, slept)
		}
	}
	th.Succeed("192.0.2.1")
	require.Zero(t, th.Delay("192.0.2.1"), "a success forgets the failures")
}
