package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDomainTrackingSubdomain checks tracking_subdomain (Resend's): set on
// create and PATCH, one DNS label, and the Tracking record that follows it
// while open or click tracking is on.
func TestDomainTrackingSubdomain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tracking := func(d map[string]any) map[string]any {
		for _, r := range d["records"].([]any) {
			if r := r.(map[string]any); r["record"] == "Tracking" {
				return r
			}
		}
		return nil
	}
	d := e.createDomain(e.keyA, map[string]any{"name": "plain.test"})
	require.Equal(t, "links", d["tracking_subdomain"])
	require.Nil(t, tracking(d), "no Tracking record while tracking is off")
	id := d["id"].(string)

	p := e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"open_tracking": true, "tracking_subdomain": " Click "})
	require.Equal(t, 200, p.status, string(p.raw))
	g := e.do("GET", "/domains/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "click", g.body["tracking_subdomain"])
	require.Equal(t, map[string]any{"record": "Tracking", "type": "CNAME", "name": "click", "ttl": "Auto",
		"status": "not_started", "value": "track.posthaste.example"}, tracking(g.body))

	d = e.createDomain(e.keyA, map[string]any{"name": "custom.test", "tracking_subdomain": "t1",
		"click_tracking": true})
	require.Equal(t, "t1", d["tracking_subdomain"])
	require.Equal(t, "t1", tracking(d)["name"])

	for _, bad := range []any{"two.labels", "-dash", "", "under_score", 7} {
		requireError(t, e.do("POST", "/domains", e.keyA, map[string]any{"name": "bad.test", "tracking_subdomain": bad}),
			422, "validation_error")
		requireError(t, e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"tracking_subdomain": bad}),
			422, "validation_error")
	}
	g = e.do("GET", "/domains/"+id, e.keyA, nil)
	require.Equal(t, "click", g.body["tracking_subdomain"], "a refused PATCH changes nothing")
}
