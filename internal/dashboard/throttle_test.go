package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestThrottleLimit(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_700_000_000, 0)
	k := throttleKey{"k", limit{max: 5, window: 15 * time.Minute}}
	for i := range 5 {
		require.Equal(t, i, th.count(k, now))
		ok, _ := th.take(now, k)
		require.True(t, ok, "attempt %d", i)
	}
	ok, wait := th.take(now, k)
	require.False(t, ok, "five at once, then no more")
	require.Equal(t, 3*time.Minute, wait, "one more every window/max")
	ok, _ = th.take(now.Add(3*time.Minute), k)
	require.True(t, ok)
	ok, _ = th.take(now.Add(3*time.Minute), k)
	require.False(t, ok)

	th.refund(now.Add(3*time.Minute), k)
	ok, _ = th.take(now.Add(3*time.Minute), k)
	require.True(t, ok, "a refund gives the attempt back")
	require.Equal(t, 0, th.count(k, now.Add(time.Hour)), "all clear after the window")

	// All or nothing: a key at its limit keeps the others from being charged.
	other := throttleKey{"other", k.limit}
	ok, _ = th.take(now.Add(3*time.Minute), other, k)
	require.False(t, ok)
	require.Equal(t, 0, th.count(other, now.Add(3*time.Minute)))

	th.reset(k.name)
	require.Equal(t, 0, th.count(k, now))
}

// The throttle used to forget every key once it held 100,000: a flood of
// new keys (client addresses are plentiful, IPv6 ones especially)
// cleared the failures of the account under attack.
func TestThrottleSurvivesAFloodOfKeys(t *testing.T) {
	th := newThrottle()
	now := time.Now()
	for range 5 {
		th.fail("signin|victim@example.com|192.0.2.1", now)
	}
	require.False(t, th.allow("signin|victim@example.com|192.0.2.1", now))
	for i := range throttleKeys + 1 {
		th.fail(fmt.Sprintf("reset|flood-%d@example.com", i), now)
	}
	require.False(t, th.allow("signin|victim@example.com|192.0.2.1", now), "still throttled after the flood")
	require.LessOrEqual(t, len(th.keys), throttleKeys, "bounded")

	// A small throttle shows which keys it forgets: the least charged.
	small := &throttle{capacity: 3, keys: map[[16]byte]*charge{}}
	heavy := throttleKey{"heavy", pairLimit}
	for range 4 {
		small.take(now, heavy)
	}
	for i := range 1000 {
		ok, _ := small.take(now.Add(time.Duration(i)*time.Millisecond), throttleKey{fmt.Sprint("light-", i), pairLimit})
		require.True(t, ok)
	}
	require.Len(t, small.keys, 3)
	require.Equal(t, 4, small.count(heavy, now))
	require.Len(t, small.byDue, 3)
}

func TestClientAddr(t *testing.T) {
	for _, tt := range []struct {
		name    string
		proxies []string
		peer    string
		headers map[string][]string
		want    string
	}{
		{"no proxy", nil, "192.0.2.7:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "192.0.2.7"},
		{"untrusted peer", []string{"10.0.0.0/8"}, "192.0.2.7:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "192.0.2.7"},
		{"trusted peer", []string{"10.0.0.0/8"}, "10.1.2.3:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"a client's own entries do not count", []string{"10.0.0.0/8"}, "10.1.2.3:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9, 198.51.100.1"}}, "198.51.100.1"},
		{"nor do its own lines", []string{"10.0.0.0/8"}, "10.1.2.3:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9", "198.51.100.1"}}, "198.51.100.1"},
		{"chained proxies", []string{"10.0.0.0/8", "192.0.2.1"}, "10.1.2.3:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, 192.0.2.1, 10.9.9.9"}}, "198.51.100.1"},
		{"garbage stops the walk", []string{"10.0.0.0/8"}, "10.1.2.3:5000",
			map[string][]string{"X-Forwarded-For": {"nonsense"}}, "10.1.2.3"},
		{"X-Real-IP", []string{"10.0.0.1"}, "10.0.0.1:5000", map[string][]string{"X-Real-Ip": {"198.51.100.1"}}, "198.51.100.1"},
		{"IPv6 clients by /64", []string{"::1"}, "[::1]:5000",
			map[string][]string{"X-Forwarded-For": {"2001:db8:1:2:3:4:5:6"}}, "2001:db8:1:2::/64"},
		{"mapped IPv4", []string{"10.0.0.0/8"}, "[::ffff:10.0.0.1]:5000",
			map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, "198.51.100.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			proxies, err := parseProxies(tt.proxies)
			require.NoError(t, err)
			h := &Handler{proxies: proxies}
			r := httptest.NewRequest(http.MethodPost, "/dashboard/login", nil)
			r.RemoteAddr = tt.peer
			for k, vs := range tt.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			require.Equal(t, tt.want, clientIP(h.withClient(r)))
		})
	}
	_, err := parseProxies([]string{"10.0.0.0/8", "proxy.example"})
	require.Error(t, err)
}
