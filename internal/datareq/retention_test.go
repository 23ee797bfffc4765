package datareq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestRetentionActivities runs the sweeps as a worker would, on a real
// database: finished emails older than the cutoff go in bounded batches,
// the rest stay; old request log days are dropped and the coming week's
// are created.
func TestRetentionActivities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	acts := datareq.NewRetention(st)
	old := time.Now().AddDate(0, 0, -45)
	var finished []store.Email
	for range 5 {
		e := acttest.InsertEmailAt(t, st, old, "delivered@posthaste.test")
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventSent, CreatedAt: old},
			{Type: store.EventDelivered, Recipient: "delivered@posthaste.test", CreatedAt: old}}))
		finished = append(finished, e)
	}
	_, err := st.Webhooks.DrainOutbox(ctx, 100, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		var done []store.OutboxResult
		for _, it := range items {
			done = append(done, store.OutboxResult{ID: it.ID, Done: true})
		}
		return done
	})
	require.NoError(t, err)
	recent := acttest.InsertEmail(t, st, "delivered@posthaste.test")
	require.NoError(t, st.Emails.RecordEvents(ctx, recent.ID, []store.Event{{Type: store.EventSent},
		{Type: store.EventDelivered, Recipient: "delivered@posthaste.test"}}))

	cutoff := time.Now().AddDate(0, 0, -30)
	res, err := acttest.Run[contract.PurgeInput, contract.PurgeResult](t, acts.PurgeEmails,
		contract.PurgeInput{Before: cutoff, BatchSize: 2, Pause: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 5, res.Deleted)
	for _, e := range finished {
		_, err := st.Emails.GetEmail(ctx, e.TeamID, e.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	_, err = st.Emails.GetEmail(ctx, recent.TeamID, recent.ID)
	require.NoError(t, err)

	require.NoError(t, st.Insights.EnsureRequestLogPartitions(ctx, old, 2))
	res, err = acttest.Run[contract.PurgeRequestLogsInput, contract.PurgeResult](t, acts.PurgeRequestLogs,
		contract.PurgeRequestLogsInput{Before: cutoff, Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deleted)
	days, err := storetest.RequestLogPartitions(ctx, st)
	require.NoError(t, err)
	require.Len(t, days, 8, "today and the next seven days")

	_, err = acttest.Run[contract.PurgeInput, contract.PurgeResult](t, acts.PurgeExpired,
		contract.PurgeInput{Before: time.Now(), BatchSize: 0})
	require.ErrorContains(t, err, "batch size")
}

// TestPurgeAuditKeepsTheChainVerifiable sweeps the whole audit log in
// batches and checks that the chain still verifies, also after new entries.
func TestPurgeAuditKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	acts := datareq.NewRetention(st)
	entry := audit.Entry{ActorType: audit.ActorAdmin, Action: audit.PoolCreate, TargetType: "ip_pool",
		TargetID: "bulk", Outcome: audit.Success}
	for range 5 {
		_, err := st.Privacy.AppendAudit(ctx, entry)
		require.NoError(t, err)
	}
	res, err := acttest.Run[contract.PurgeInput, contract.PurgeResult](t, acts.PurgeAudit,
		contract.PurgeInput{Before: time.Now().Add(time.Hour), BatchSize: 2, Pause: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 5, res.Deleted)
	n, err := st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = st.Privacy.AppendAudit(ctx, entry)
	require.NoError(t, err)
	n, err = st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
