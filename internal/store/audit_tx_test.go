package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// entryOf is a valid audit entry of action on a target of the team.
func entryOf(team uuid.UUID, action audit.Action, targetType, targetID string) audit.Entry {
	actor := uuid.Must(uuid.NewV7())
	return audit.Entry{TeamID: &team, ActorType: audit.ActorUser, ActorID: &actor, Action: action,
		TargetType: targetType, TargetID: targetID, ClientAddr: "192.0.2.1", UserAgent: "test", Outcome: audit.Success}
}

// auditCount counts the audit entries about a target.
func auditCount(t *testing.T, conn *pgx.Conn, targetID string) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_entry WHERE target_id = $1`, targetID).Scan(&n))
	return n
}

// TestAuditEntryCommitsWithTheChange: a change and its audit entry are
// written by one transaction: both rows carry the same xmin.
func TestAuditEntryCommitsWithTheChange(t *testing.T) {
	t.Parallel()
	st, conn := auditDB(t)
	ctx := context.Background()
	team := newTeam(t, st)
	sameTx := func(table string, id uuid.UUID) {
		t.Helper()
		var changed, entry string
		require.NoError(t, conn.QueryRow(ctx, `SELECT xmin::text FROM `+table+` WHERE id = $1`, id).Scan(&changed))
		require.NoError(t, conn.QueryRow(ctx, `SELECT xmin::text FROM audit_entry WHERE target_id = $1
			ORDER BY seq DESC LIMIT 1`, id.String()).Scan(&entry))
		require.Equal(t, changed, entry, "%s row and its audit entry in one transaction", table)
	}

	d := newDomain(team, "atomic.test")
	require.NoError(t, st.Domains.CreateDomainBy(ctx, d, entryOf(team, audit.DomainCreate, "domain", d.ID.String())))
	sameTx("domain", d.ID)
	require.NoError(t, st.Domains.DeleteDomain(ctx, team, d.ID, entryOf(team, audit.DomainDelete, "domain", d.ID.String())))
	sameTx("domain", d.ID)

	w := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
		Events: []string{"email.sent"}, Status: store.WebhookEnabled, Secret: []byte("sealed")}
	require.NoError(t, st.Webhooks.CreateWebhookBy(ctx, w, entryOf(team, audit.WebhookCreate, "webhook", w.ID.String())))
	sameTx("webhook", w.ID)
	off := store.WebhookDisabled
	require.NoError(t, st.Webhooks.UpdateWebhook(ctx, team, w.ID, store.WebhookUpdate{Status: &off},
		entryOf(team, audit.WebhookUpdate, "webhook", w.ID.String())))
	sameTx("webhook", w.ID)
	require.Equal(t, 2, auditCount(t, conn, w.ID.String()), "the creation's entry and the update's")
}

// TestAuditEntryFailureRollsBackTheChange: when the audit entry cannot be
// written (here an unknown action, which appendAudit rejects), the change
// it records is rolled back too, for a representative change of each
// area's kind: an insert, an update, a delete, and a change whose entry is
// made from what the transaction found.
func TestAuditEntryFailureRollsBackTheChange(t *testing.T) {
	t.Parallel()
	st, conn := auditDB(t)
	ctx := context.Background()
	team := newTeam(t, st)
	bad := func(targetType, targetID string) audit.Entry {
		e := entryOf(team, audit.DomainCreate, targetType, targetID)
		e.Action = "no.such_action"
		return e
	}

	d := newDomain(team, "rolled-back.test")
	require.Error(t, st.Domains.CreateDomainBy(ctx, d, bad("domain", d.ID.String())))
	_, err := st.Domains.GetDomain(ctx, team, d.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "the domain's insert was rolled back with its entry")

	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	yes := true
	require.Error(t, st.Domains.UpdateDomain(ctx, team, d.ID, store.DomainUpdate{ClickTracking: &yes},
		bad("domain", d.ID.String()), "domain.updated"))
	got, err := st.Domains.GetDomain(ctx, team, d.ID)
	require.NoError(t, err)
	require.Equal(t, d.ClickTracking, got.ClickTracking, "the update was rolled back")

	w := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
		Events: []string{"email.sent"}, Status: store.WebhookEnabled, Secret: []byte("sealed")}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, w))
	require.Error(t, st.Webhooks.DeleteWebhook(ctx, team, w.ID, bad("webhook", w.ID.String())))
	_, err = st.Webhooks.GetWebhook(ctx, team, w.ID)
	require.NoError(t, err, "the delete was rolled back")

	k := store.APIKey{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "ci", Prefix: "ph_atomic",
		Hash: []byte("hash-atomic"), Permission: store.PermissionSendingAccess}
	require.NoError(t, st.Accounts.CreateAPIKey(ctx, k))
	_, err = st.Accounts.RevokeAPIKeyBy(ctx, team, k.ID, bad("api_key", k.ID.String()))
	require.Error(t, err)
	_, err = st.Accounts.UseAPIKey(ctx, k.Hash)
	require.NoError(t, err, "the key is still live")

	// An entry made from what the transaction found: its error undoes the
	// change as well.
	inv := store.Invitation{ID: uuid.New(), TeamID: team, Email: "new@example.test", Role: "member"}
	failed := errors.New("no entry")
	_, err = st.Accounts.Invite(ctx, inv, []byte("token-hash"), func(store.Invitation) (audit.Entry, error) {
		return audit.Entry{}, failed
	})
	require.ErrorIs(t, err, failed)
	invs, err := st.Accounts.Invitations(ctx, team)
	require.NoError(t, err)
	require.Empty(t, invs, "the invitation was rolled back")

	for _, id := range []string{d.ID.String(), w.ID.String(), k.ID.String(), inv.ID.String()} {
		require.Zero(t, auditCount(t, conn, id), "no entry for %s", id)
	}
}
