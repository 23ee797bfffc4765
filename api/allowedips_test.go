package api_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
)

// TestAPIKeyAllowedIPs checks the allowed_ips extension: a key limited to
// address ranges works from inside them (IPv4 and IPv6), is refused with
// 403 invalid_api_key from outside, cached or not, and invalid ranges are a
// 422. Client addresses come from X-Forwarded-For of a trusted proxy.
func TestAPIKeyAllowedIPs(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, func(c *api.Config) { c.TrustedProxies = []string{"127.0.0.1"} })
	from := func(key, addr string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key, "X-Forwarded-For": addr}
	}
	create := func(body string) (int, map[string]any) {
		res, raw := e.must(t, "POST", "/api-keys", body, bearer(e.key))
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m), string(raw))
		return res.StatusCode, m
	}
	status, body := create(`{"name":"office","allowed_ips":["203.0.113.0/24","2001:db8::/32","198.51.100.7"]}`)
	require.Equal(t, 201, status, body)
	key := body["token"].(string)

	for _, tc := range []struct {
		addr string
		want int
	}{
		{"203.0.113.9", 200},
		{"198.51.100.7", 200},
		{"2001:db8:1::5", 200},
		{"203.0.114.1", 403},
		{"198.51.100.8", 403},
		{"2001:db9::1", 403},
		{"203.0.113.10", 200}, // cached by now: still checked per request
		{"192.0.2.1", 403},
	} {
		res, raw := e.must(t, "GET", "/emails", "", from(key, tc.addr))
		require.Equal(t, tc.want, res.StatusCode, "%s: %s", tc.addr, raw)
		if tc.want == 403 {
			var m map[string]any
			require.NoError(t, json.Unmarshal(raw, &m))
			require.Equal(t, "invalid_api_key", m["name"])
			require.Contains(t, m["message"], "allowed_ips")
			require.Contains(t, m["message"], tc.addr)
		}
	}
	res, _ := e.must(t, "GET", "/emails", "", from(e.key, "192.0.2.1"))
	require.Equal(t, 200, res.StatusCode, "a key without ranges works from anywhere")

	res, raw := e.must(t, "GET", "/api-keys", "", bearer(e.key))
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, string(raw), `"allowed_ips":["203.0.113.0/24","2001:db8::/32","198.51.100.7/32"]`)

	for _, bad := range []string{`["203.0.113.0/33"]`, `["office"]`, `["fe80::1%eth0"]`, `[""]`, `"203.0.113.0/24"`} {
		status, body := create(`{"name":"x","allowed_ips":` + bad + `}`)
		require.Equal(t, 422, status, "%s: %v", bad, body)
		require.Equal(t, "validation_error", body["name"], bad)
	}
	status, body = create(`{"name":"host bits","allowed_ips":["203.0.113.77/24"]}`)
	require.Equal(t, 201, status, "host bits are masked: %v", body)
}
