package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestMetricsPageShowsAccountHealth: the Metrics page shows the team's
// bounce and complaint rates against their thresholds, a warning above
// one, the volume a rate waits for, and a pause (issue 19, point 5).
func TestMetricsPageShowsAccountHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	team := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	_, page := get(t, c, f.srv.URL+"/dashboard/metrics")
	require.Contains(t, page, `id="health-title">Account health<`)
	require.Contains(t, page, `data-health-pending="bounce"`, "no volume yet")
	require.NotContains(t, page, `data-health-warning`)
	require.NotContains(t, page, `id="health-paused"`)

	storetest.SeedOutcomes(t, f.store, team, map[string]int{"delivered": 90, "bounced": 10})
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics")
	require.Contains(t, page, `data-health-warning="bounce"`)
	require.Contains(t, page, "Your bounce rate (10.00 %) is above the 4.00 % threshold.")
	require.Contains(t, page, "10 of 100 delivered or bounced; threshold 4.00 %")
	require.Contains(t, page, `data-health-pending="complaint"`, "complaints wait for 1250 delivered recipients")
	require.NotContains(t, page, `id="health-paused"`)

	_, err := f.store.Insights.EvaluateHealth(ctx, time.Now(), health.DefaultWindow, true)
	require.NoError(t, err)
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics")
	require.Contains(t, page, `id="health-paused">Sending is paused for this team: its bounce rate over the last 30 days was 10.00 %`)

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/metrics")
	require.NotContains(t, page, `data-health-warning`, "another team's health is its own")
	require.NotContains(t, page, `id="health-paused"`)
}
