package auththrottle

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pair is the dashboard's limit per account and client address.
var pair = Limit{Max: 5, Window: 15 * time.Minute}

func TestThrottleLimit(t *testing.T) {
	th := New()
	now := time.Unix(1_700_000_000, 0)
	k := Key{"k", Limit{Max: 5, Window: 15 * time.Minute}}
	for i := range 5 {
		require.Equal(t, i, th.Count(k, now))
		ok, _ := th.Take(now, k)
		require.True(t, ok, "attempt %d", i)
	}
	ok, wait := th.Take(now, k)
	require.False(t, ok, "five at once, then no more")
	require.Equal(t, 3*time.Minute, wait, "one more every window/max")
	ok, _ = th.Take(now.Add(3*time.Minute), k)
	require.True(t, ok)
	ok, _ = th.Take(now.Add(3*time.Minute), k)
	require.False(t, ok)

	th.Refund(now.Add(3*time.Minute), k)
	ok, _ = th.Take(now.Add(3*time.Minute), k)
	require.True(t, ok, "a refund gives the attempt back")
	require.Equal(t, 0, th.Count(k, now.Add(time.Hour)), "all clear after the window")

	// All or nothing: a key at its limit keeps the others from being charged.
	other := Key{"other", k.Limit}
	ok, _ = th.Take(now.Add(3*time.Minute), other, k)
	require.False(t, ok)
	require.Equal(t, 0, th.Count(other, now.Add(3*time.Minute)))

	th.Reset(k.Name)
	require.Equal(t, 0, th.Count(k, now))
}

// The throttle used to forget every key once it held 100,000: a flood of
// new keys (client addresses are plentiful, IPv6 ones especially)
// cleared the failures of the account under attack.
func TestThrottleSurvivesAFloodOfKeys(t *testing.T) {
	th := New()
	now := time.Now()
	victim := Key{"signin|victim@example.com|192.0.2.1", pair}
	for range 5 {
		th.Fail(victim, now)
	}
	require.False(t, th.Allow(victim, now))
	for i := range Capacity + 1 {
		th.Fail(Key{fmt.Sprintf("reset|flood-%d@example.com", i), pair}, now)
	}
	require.False(t, th.Allow(victim, now), "still throttled after the flood")
	require.LessOrEqual(t, len(th.keys), Capacity, "bounded")

	// A small throttle shows which keys it forgets: the least charged.
	small := newThrottle(3)
	heavy := Key{"heavy", pair}
	for range 4 {
		small.Take(now, heavy)
	}
	for i := range 1000 {
		ok, _ := small.Take(now.Add(time.Duration(i)*time.Millisecond), Key{fmt.Sprint("light-", i), pair})
		require.True(t, ok)
	}
	require.Len(t, small.keys, 3)
	require.Equal(t, 4, small.Count(heavy, now))
	require.Len(t, small.byDue, 3)
}
