package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// auditDB is a migrated store with a raw connection to the same database,
// for tampering.
func auditDB(t *testing.T) (*store.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.NewWithURL(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return st, conn
}

func keyEntry(team uuid.UUID, n int) audit.Entry {
	actor := uuid.Must(uuid.NewV7())
	return audit.Entry{TeamID: &team, ActorType: audit.ActorUser, ActorID: &actor,
		Action: audit.APIKeyCreate, TargetType: "api_key", TargetID: uuid.Must(uuid.NewV7()).String(),
		ClientAddr: "192.0.2.1", UserAgent: "test", Outcome: audit.Success, Detail: fmt.Sprintf(`{"n":%d}`, n)}
}

func TestAuditConcurrentAppendsStayLinear(t *testing.T) {
	t.Parallel()
	st, _ := auditDB(t)
	ctx := context.Background()
	team := uuid.Must(uuid.NewV7())
	const per = 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*per)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if _, err := st.Privacy.AppendAudit(ctx, keyEntry(team, g*per+i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, err := st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2*per, n)
}

func TestAuditTamperIsDetected(t *testing.T) {
	t.Parallel()
	st, conn := auditDB(t)
	ctx := context.Background()
	team := uuid.Must(uuid.NewV7())
	var entries []audit.Entry
	for i := range 5 {
		e, err := st.Privacy.AppendAudit(ctx, keyEntry(team, i))
		require.NoError(t, err)
		entries = append(entries, e)
	}
	_, err := st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)

	_, err = conn.Exec(ctx, `UPDATE audit_entry SET detail = '{"n":99}' WHERE seq = 3`)
	require.NoError(t, err)
	_, err = st.Privacy.VerifyAudit(ctx)
	var broken *audit.BrokenError
	require.ErrorAs(t, err, &broken)
	require.EqualValues(t, 3, broken.Seq)
	require.Equal(t, entries[2].ID, broken.ID)

	// Restoring the row repairs it; deleting one from the middle or the
	// end breaks it again.
	_, err = conn.Exec(ctx, `UPDATE audit_entry SET detail = '{"n":2}' WHERE seq = 3`)
	require.NoError(t, err)
	_, err = st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DELETE FROM audit_entry WHERE seq = 5`)
	require.NoError(t, err)
	_, err = st.Privacy.VerifyAudit(ctx)
	require.ErrorAs(t, err, &broken)
	_, err = conn.Exec(ctx, `DELETE FROM audit_entry WHERE seq = 2`)
	require.NoError(t, err)
	_, err = st.Privacy.VerifyAudit(ctx)
	require.ErrorAs(t, err, &broken)
	require.EqualValues(t, 3, broken.Seq)
}

func TestAuditRetentionKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	st, conn := auditDB(t)
	ctx := context.Background()
	team := uuid.Must(uuid.NewV7())
	for i := range 6 {
		_, err := st.Privacy.AppendAudit(ctx, keyEntry(team, i))
		require.NoError(t, err)
	}
	// Entries cannot be aged without breaking their hashes: sweep with a
	// cutoff between the fourth and the fifth instead.
	var cut time.Time
	require.NoError(t, conn.QueryRow(ctx, `SELECT created_at FROM audit_entry WHERE seq = 5`).Scan(&cut))

	n, err := st.Privacy.PurgeAudit(ctx, cut, 3) // at most three per call
	require.NoError(t, err)
	require.Equal(t, 3, n)
	checked, err := st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, checked)

	n, err = st.Privacy.PurgeAudit(ctx, cut, 3) // only entry 4 is still old enough
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = st.Privacy.PurgeAudit(ctx, cut, 3)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = st.Privacy.AppendAudit(ctx, keyEntry(team, 7))
	require.NoError(t, err)
	checked, err = st.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, checked)

	// The anchor is checked too: the first kept entry no longer links.
	_, err = conn.Exec(ctx, `UPDATE audit_chain SET anchor_hash = '\x00'`)
	require.NoError(t, err)
	_, err = st.Privacy.VerifyAudit(ctx)
	var broken *audit.BrokenError
	require.True(t, errors.As(err, &broken), "%v", err)
	require.EqualValues(t, 5, broken.Seq)
}

func TestListAuditFiltersAndIsolatesTeams(t *testing.T) {
	t.Parallel()
	st, _ := auditDB(t)
	ctx := context.Background()
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	var first audit.Entry
	for i := range 3 {
		e, err := st.Privacy.AppendAudit(ctx, keyEntry(a, i))
		require.NoError(t, err)
		if i == 0 {
			first = e
		}
	}
	_, err := st.Privacy.AppendAudit(ctx, keyEntry(b, 9))
	require.NoError(t, err)
	rows, more, err := st.Privacy.ListAudit(ctx, a, audit.Filter{}, store.Page{Limit: 2})
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, rows, 2)
	rows, _, err = st.Privacy.ListAudit(ctx, a, audit.Filter{TargetID: first.TargetID}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, first.ID, rows[0].ID)
	rows, _, err = st.Privacy.ListAudit(ctx, b, audit.Filter{ActorID: first.ActorID}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, rows)
}
