package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRateTake walks one bucket of 4 per second through a burst, a
// refusal, a refill and an idle period, by a clock the test moves.
func TestRateTake(t *testing.T) {
	r := Rate{Limit: 4, Period: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tat time.Time
	for _, tt := range []struct {
		at        time.Duration // since t0
		wait      time.Duration // 0: allowed
		remaining int
		ahead     time.Duration
	}{
		{0, 0, 3, 250 * time.Millisecond},
		{0, 0, 2, 500 * time.Millisecond},
		{0, 0, 1, 750 * time.Millisecond},
		{0, 0, 0, time.Second},
		{0, 250 * time.Millisecond, 0, time.Second},                                 // the burst is spent
		{100 * time.Millisecond, 150 * time.Millisecond, 0, 900 * time.Millisecond}, // not yet
		{250 * time.Millisecond, 0, 0, time.Second},                                 // one back
		{5 * time.Second, 0, 3, 250 * time.Millisecond},                             // idle: full again
	} {
		now := t0.Add(tt.at)
		var wait time.Duration
		tat, wait = r.Take(tat, now)
		require.Equal(t, tt.wait, wait, "at %v", tt.at)
		require.Equal(t, tt.remaining, r.Remaining(tat, now), "at %v", tt.at)
		require.Equal(t, tt.ahead, Ahead(tat, now), "at %v", tt.at)
	}
	_, wait := Rate{Limit: 0, Period: time.Second}.Take(time.Time{}, t0)
	require.Equal(t, time.Second, wait, "a limit of nothing allows nothing")
}

// TestRateCharge: a charge counts even past the limit, and the bucket
// then allows nothing until the clock has caught up with it.
func TestRateCharge(t *testing.T) {
	r := Rate{Limit: 2, Period: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tat time.Time
	for range 3 {
		tat = r.Charge(tat, t0)
	}
	require.Equal(t, t0.Add(1500*time.Millisecond), tat)
	_, wait := r.Take(tat, t0)
	require.Equal(t, time.Second, wait, "half a second over, then one interval")
	require.Zero(t, r.Remaining(tat, t0))
	_, wait = r.Take(tat, t0.Add(time.Second))
	require.Zero(t, wait)
}
