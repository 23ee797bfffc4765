package smtpgw_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/smtpgw"
)

// TestThrottleForgetsOldFailures: failures count until Forget has passed
// since the last one, by the throttle's clock.
func TestThrottleForgetsOldFailures(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	th := smtpgw.NewThrottle(smtpgw.ThrottleConfig{Forget: time.Minute, Now: clock.Now})
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
