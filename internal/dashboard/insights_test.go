package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestEmailPageShowsInsights checks that an email's page lists the
// deliverability insights stored with it, escaped, and says so when there
// are none.
func TestEmailPageShowsInsights(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	email := func(subject string, insights []store.Insight) uuid.UUID {
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, From: "onboarding@posthaste.test",
			FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: subject,
			LastEvent: store.EventQueued, CreatedAt: time.Now(), Insights: insights,
			Recipients: []store.Recipient{{Address: "delivered@posthaste.test", Kind: "to", Domain: "posthaste.test",
				Status: "queued"}}}
		_, err := storetest.InsertEmail(ctx, f.store, e)
		require.NoError(t, err)
		return e.ID
	}
	flagged := email("SHOUTING", []store.Insight{
		{Code: "all_caps_subject", Severity: "warning", Message: "The subject is <all> capitals.", Fix: "Write it in sentence case."},
		{Code: "risky_attachment", Severity: "error", Message: "Attachments of a risky type.", Fix: "Link to the file."},
	})
	clean := email("Hello", nil)

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	res, page := get(t, c, f.srv.URL+"/dashboard/emails/"+flagged.String())
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, page, "<h2>Insights</h2>")
	require.Contains(t, page, `<span class="badge wait">warning</span>`)
	require.Contains(t, page, "The subject is &lt;all&gt; capitals.")
	require.Contains(t, page, "<code>all_caps_subject</code>")
	require.Contains(t, page, "Fix: Write it in sentence case.")
	require.Contains(t, page, `<span class="badge bad">error</span>`)
	require.NotContains(t, page, "No deliverability findings.")

	_, page = get(t, c, f.srv.URL+"/dashboard/emails/"+clean.String())
	require.Contains(t, page, "No deliverability findings.")
}
