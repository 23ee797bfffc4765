package store_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// Twenty takers in parallel, each on its own connection, race for an
// allowance of ten: exactly ten messages are granted, and the day's row
// says ten.
func TestTakeWarmupNeverOvershoots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	ip := netip.MustParseAddr("203.0.113.20")
	_, err := st.Domains.AddIPPool(ctx, store.IPPool{Name: "new", Addresses: []store.IPAddress{ipAddr(ip.String(), "mta20.example.com")}})
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, st.Domains.SetWarmup(ctx, ip, &now))

	const takers = 20
	granted := make([]int, takers)
	errs := make([]error, takers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			granted[i], errs[i] = st.Domains.TakeWarmup(ctx, ip, 1, []int64{10, 20}, now)
		}()
	}
	close(start)
	wg.Wait()
	total := 0
	for i := range takers {
		require.NoError(t, errs[i])
		total += granted[i]
	}
	require.Equal(t, 10, total)
	addrs, err := st.Domains.WarmupAddresses(ctx, now)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	require.EqualValues(t, 10, addrs[0].Sent)
}

// A take of several messages gets what is left of the allowance; the next
// UTC day (a fake clock) has the next day's allowance and a count of its
// own; past the schedule, and for an address whose warm-up is done, every
// take is granted and still counted.
func TestTakeWarmupByDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	ip := netip.MustParseAddr("2001:db8::21")
	_, err := st.Domains.AddIPPool(ctx, store.IPPool{Name: "new", Addresses: []store.IPAddress{ipAddr(ip.String(), "mta21.example.com")}})
	require.NoError(t, err)
	addrs, err := st.Domains.WarmupAddresses(ctx, time.Now())
	require.NoError(t, err)
	require.NotNil(t, addrs[0].StartedAt, "a new address starts warming up")

	day1 := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	require.NoError(t, st.Domains.SetWarmup(ctx, ip, &day1))
	sched := []int64{5, 8}
	take := func(n int, at time.Time) int {
		t.Helper()
		got, err := st.Domains.TakeWarmup(ctx, ip, n, sched, at)
		require.NoError(t, err)
		return got
	}
	require.Equal(t, 3, take(3, day1))
	require.Equal(t, 2, take(3, day1.Add(30*time.Minute)), "two left on day 1")
	require.Equal(t, 0, take(1, day1.Add(59*time.Minute)))

	day2 := day1.Add(2 * time.Hour) // 01:00 UTC the next day
	require.Equal(t, 8, take(10, day2))
	require.Equal(t, 0, take(1, day2))
	addrs, err = st.Domains.WarmupAddresses(ctx, day1)
	require.NoError(t, err)
	require.EqualValues(t, 5, addrs[0].Sent)
	addrs, err = st.Domains.WarmupAddresses(ctx, day2)
	require.NoError(t, err)
	require.EqualValues(t, 8, addrs[0].Sent)

	day3 := day2.Add(24 * time.Hour)
	require.Equal(t, 1000, take(1000, day3), "the schedule is over")
	require.Equal(t, 1000, take(1000, day3))

	// Restarted today, the address has day 1's allowance again; marked
	// done, none.
	day4 := day3.Add(24 * time.Hour)
	require.NoError(t, st.Domains.SetWarmup(ctx, ip, &day4))
	require.Equal(t, 5, take(7, day4))
	require.NoError(t, st.Domains.SetWarmup(ctx, ip, nil))
	require.Equal(t, 7, take(7, day4))
	addrs, err = st.Domains.WarmupAddresses(ctx, day4)
	require.NoError(t, err)
	require.EqualValues(t, 12, addrs[0].Sent)
	require.Nil(t, addrs[0].StartedAt)

	_, err = st.Domains.TakeWarmup(ctx, netip.MustParseAddr("192.0.2.99"), 1, sched, day4)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, st.Domains.SetWarmup(ctx, netip.MustParseAddr("192.0.2.99"), nil), store.ErrNotFound)
}
