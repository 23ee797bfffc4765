package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
)

// TestMetricsPageShowsAccountHealth: the Metrics page shows the team's
// bounce and complaint rates against their thresholds, a warning above
// one, the volume a rate waits for, and a pause (issue 19, point 5).
func TestMetricsPageShowsAccountHealth(t *testing.T) {
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

	require.NoError(t, f.store.SetPlan(ctx, team, "50k"))
	for i, status := range []string{"delivered", "delivered", "delivered", "bounced"} {
		n := 30
		if status == "bounced" {
			n = 10
		}
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
			FromDomain: "posthaste.test", Subject: "hi", LastEvent: status, CreatedAt: time.Now().Add(-time.Hour)}
		for j := range n {
			addr := fmt.Sprintf("r%d-%d@dest.test", i, j)
			e.To = append(e.To, addr)
			e.Recipients = append(e.Recipients, store.Recipient{Address: addr, Kind: "to", Domain: "dest.test", Status: status})
		}
		text := "hi"
		e.Text = &text
		_, err := f.store.Accept(ctx, store.Acceptance{Emails: []store.Email{e}})
		require.NoError(t, err)
	}
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics")
	require.Contains(t, page, `data-health-warning="bounce"`)
	require.Contains(t, page, "Your bounce rate (10.00 %) is above the 4.00 % threshold.")
	require.Contains(t, page, "10 of 100 delivered or bounced; threshold 4.00 %")
	require.Contains(t, page, `data-health-pending="complaint"`, "complaints wait for 1250 delivered recipients")
	require.NotContains(t, page, `id="health-paused"`)

	_, err := f.store.EvaluateHealth(ctx, time.Now(), health.DefaultWindow, true)
	require.NoError(t, err)
	_, page = get(t, c, f.srv.URL+"/dashboard/metrics")
	require.Contains(t, page, `id="health-paused">Sending is paused for this team: its bounce rate over the last 30 days was 10.00 %`)

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/metrics")
	require.NotContains(t, page, `data-health-warning`, "another team's health is its own")
	require.NotContains(t, page, `id="health-paused"`)
}
