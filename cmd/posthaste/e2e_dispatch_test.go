package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows"
)

// TestDevDispatchAndReconcile checks dispatch and reconciliation through
// `posthaste dev`: 200 outbox entries that cannot start (their emails are gone) and 20
// whose keys of 256 emoji once made workflow IDs Temporal refused sit ahead
// of a normal send, which is still delivered; the keyed ones are delivered
// too. The reconciler restarts an email left queued without an outbox entry
// or a workflow, and ends one sent long ago that never got an outcome. It
// records the histories of a Reconcile and a Retention run for the replay
// tests.
func TestDevDispatchAndReconcile(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	st := storetest.Open(t, store.Config{URL: dbURL})
	require.NoError(t, st.Migrate(ctx))
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "earlier"}))
	accept := func(created time.Time) uuid.UUID {
		text := "t"
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
			FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "earlier", Text: &text,
			LastEvent: store.EventQueued, CreatedAt: created,
			Recipients: []store.Recipient{{Address: "delivered@posthaste.test", Kind: "to", Domain: "posthaste.test",
				Status: store.EventQueued}}}
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		return e.ID
	}

	// Written before the process starts, so no dispatcher sees them early.
	emoji := strings.Repeat("😀", 256)
	var keyed []uuid.UUID
	for range 20 {
		id := accept(time.Now())
		_, err := pool.Exec(ctx, `WITH e AS (UPDATE email SET idempotency_key = @key WHERE id = @id)
			UPDATE outbox SET idempotency_key = @key WHERE ref = @id`, pgx.NamedArgs{"id": id, "key": emoji})
		require.NoError(t, err)
		keyed = append(keyed, id)
	}
	b := &pgx.Batch{}
	for range 200 {
		b.Queue(`INSERT INTO outbox (kind, team_id, ref, created_at) VALUES ('send_email', @team, @ref, now() - interval '1 hour')`,
			pgx.NamedArgs{"team": team, "ref": uuid.New()})
	}
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	// Accepted an hour ago, its start lost: queued, no outbox entry, no workflow.
	stalled := accept(time.Now().Add(-time.Hour))
	// Sent 100 hours ago, its workflow gone without an outcome.
	lost := accept(time.Now().Add(-100 * time.Hour))
	require.NoError(t, st.Emails.RecordEvents(ctx, lost, []store.Event{{Type: store.EventSent}}))
	_, err = pool.Exec(ctx, `DELETE FROM outbox WHERE ref = ANY(@ids)`, pgx.NamedArgs{"ids": []uuid.UUID{stalled, lost}})
	require.NoError(t, err)

	env := dbDevEnv(t, dbURL)
	env["POSTHASTE_RECONCILE_INTERVAL"] = "2s"
	dev := startDev(t, env)
	defer dev.stop(t)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}

	id := c.send(map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test",
		"subject": "after the poison", "text": "t"})
	c.waitFor(id, map[string]string{"delivered@posthaste.test": "delivered"})

	state := func(id uuid.UUID) string {
		e, err := st.Emails.GetEmail(ctx, team, id)
		require.NoError(t, err)
		return e.LastEvent
	}
	for _, id := range keyed {
		eventually(t, 30*time.Second, func() error {
			if state(id) != store.EventDelivered {
				return errors.New("a key of 256 emoji starts a workflow")
			}
			return nil
		})
	}
	left, err := storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Zero(t, left, "the entries without emails were dropped")

	eventually(t, 30*time.Second, func() error {
		if state(stalled) != store.EventDelivered {
			return errors.New("the reconciler restarts the stalled email")
		}
		return nil
	})
	tc, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer tc.Close()
	d, err := tc.DescribeWorkflowExecution(ctx, workflows.RestartEmailWorkflowID(stalled.String(), 1), "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus())
	saveScheduledRun(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"], workflows.ReconcileScheduleID, false,
		"reconcile.json")

	eventually(t, 30*time.Second, func() error {
		if state(lost) != store.EventFailed {
			return fmt.Errorf("the lost email is %s, not failed", state(lost))
		}
		return nil
	})
	evs, err := st.Emails.Events(ctx, lost)
	require.NoError(t, err)
	require.Equal(t, delivery.ReasonNoOutcome, evs[len(evs)-1].Detail["reason"])

	metrics := func() string {
		res, err := http.Get(dev.base + "/metrics")
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return string(body)
	}
	counted := func() bool {
		m := metrics()
		return strings.Contains(m, `posthaste_reconciled_emails_total{action="restarted"} 1`) &&
			strings.Contains(m, `posthaste_reconciled_emails_total{action="failed"} 1`) &&
			strings.Contains(m, `posthaste_outbox_ended_total{kind="send_email",reason="missing"} 200`)
	}
	eventually(t, 10*time.Second, func() error {
		if !counted() {
			return errors.New("the reconciler and the outbox count what they did")
		}
		return nil
	})

	// A retention sweep started by its Schedule completes (the history of
	// a run is a replay fixture, as is the reconciler's above).
	saveScheduledRun(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"], workflows.RetentionScheduleID, true,
		"retention.json")
}
