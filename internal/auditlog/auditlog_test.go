package auditlog_test

import (
	"context"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// Entries are recorded with their detail, listed per team with the
// filters, and the chain they make verifies.
func TestRecordListVerify(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	l := auditlog.New(st)
	team, other := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, id := range []uuid.UUID{team, other} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: id, Name: id.String()}))
	}
	user := uuid.Must(uuid.NewV7())
	actor := audit.Entry{ActorType: audit.ActorUser, ActorID: &user, ClientAddr: "192.0.2.7", UserAgent: "ua"}
	require.NoError(t, l.Success(ctx, actor, team, audit.DomainCreate, "domain", "d1", map[string]any{"name": "example.com"}))
	require.NoError(t, l.Success(ctx, actor, team, audit.DomainDelete, "domain", "d1", nil))
	require.NoError(t, l.Success(ctx, actor, other, audit.DomainCreate, "domain", "d2", nil))
	require.NoError(t, l.Record(ctx, audit.Entry{ActorType: audit.ActorAdmin, Action: audit.MasterKeyRotate,
		Outcome: audit.Success}, nil))
	require.Error(t, l.Record(ctx, audit.Entry{ActorType: audit.ActorAdmin, Action: audit.MasterKeyRotate,
		Outcome: audit.Success}, map[string]any{"bad": func() {}}), "a detail that is not JSON")

	all, more, err := l.List(ctx, team, audit.Filter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, all, 2, "only the team's")
	require.Equal(t, audit.DomainDelete, all[0].Action, "newest first")
	require.Equal(t, team, *all[1].TeamID)
	require.Equal(t, "192.0.2.7", all[1].ClientAddr)
	require.JSONEq(t, `{"name":"example.com"}`, all[1].Detail)
	created, _, err := l.List(ctx, team, audit.Filter{Action: audit.DomainCreate}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, created, 1)

	n, err := l.Verify(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
}
