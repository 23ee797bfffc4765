package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
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
