package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
)

// TestOwnersRemovingEachOtherKeepOne: two owners remove each other at
// once. The second removal waits on the first one's lock on the owner
// rows and, once the first commits, finds the other owner gone and
// refuses: the team keeps exactly one owner.
func TestOwnersRemovingEachOtherKeepOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	team, a, b := uuid.New(), uuid.New(), uuid.New()
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: team, Name: "t"}))
	for _, u := range []uuid.UUID{a, b} {
		require.NoError(t, st.Accounts.CreateUser(ctx, User{ID: u, Email: u.String() + "@example.com"}))
		require.NoError(t, st.Accounts.AddMember(ctx, team, u, "owner"))
	}

	// A removes B, and holds the transaction open.
	tx, err := st.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // rollback after commit is a no-op
	_, err = removeMember(ctx, tx, team, b)
	require.NoError(t, err)

	// B removes A meanwhile.
	done := make(chan error, 1)
	go func() {
		_, err := st.Accounts.RemoveMember(ctx, team, a, audit.Entry{ActorType: audit.ActorSystem})
		done <- err
	}()
	// It waits on a lock, not on anything else.
	require.Eventually(t, func() bool {
		var waiting int
		err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the second removal waits for the first")
	select {
	case err := <-done:
		t.Fatalf("the second removal finished while the first was open: %v", err)
	default:
	}

	require.NoError(t, tx.Commit(ctx))
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrConflict, "A is now the last owner")
	case <-time.After(10 * time.Second):
		t.Fatal("the second removal did not finish after the first committed")
	}
	members, err := st.Accounts.Members(ctx, team)
	require.NoError(t, err)
	require.Len(t, members, 1)
	require.Equal(t, a, members[0].UserID)
	require.Equal(t, "owner", members[0].Role)
}

// TestAPIKeyCreatorMigration: migration 00041 gives every key the user
// who made it, from the audit log: a dashboard user's key is theirs, a
// key made with a key is that key's maker's, the bootstrap key and
// `posthaste admin` keys are the earliest owner's. A key of someone who
// already left is revoked. Down drops the column.
func TestAPIKeyCreatorMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openUnmigrated(t)
	migrateTo(t, st, 40, false)

	team, owner, later, member, gone := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := st.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO team (id, name) VALUES ($1, 't')`, team)
	for i, u := range []uuid.UUID{owner, later, member, gone} {
		exec(`INSERT INTO app_user (id, email) VALUES ($1, $2)`, u, u.String()+"@example.com")
		if u == gone {
			continue
		}
		role := map[bool]string{true: "owner", false: "member"}[u != member]
		exec(`INSERT INTO membership (team_id, user_id, role, created_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))`,
			team, u, role, i)
	}
	keys := map[string]uuid.UUID{}
	for _, name := range []string{"bootstrap", "admin", "by-member", "by-later", "by-member-key", "by-member-key-key",
		"by-owner-key", "by-gone"} {
		keys[name] = uuid.New()
		exec(`INSERT INTO api_key (id, team_id, name, prefix, hash, permission) VALUES ($1, $2, $3, 'ph_x', $4, 'sending_access')`,
			keys[name], team, name, []byte(name))
	}
	created := func(key uuid.UUID, actor audit.ActorType, by *uuid.UUID) {
		t.Helper()
		_, err := st.Privacy.AppendAudit(ctx, audit.Entry{TeamID: &team, ActorType: actor, ActorID: by, Action: audit.APIKeyCreate,
			TargetType: "api_key", TargetID: key.String(), Outcome: audit.Success, Detail: "{}"})
		require.NoError(t, err)
	}
	ref := func(id uuid.UUID) *uuid.UUID { return &id }
	created(keys["admin"], audit.ActorAdmin, nil)
	created(keys["by-member"], audit.ActorUser, ref(member))
	created(keys["by-later"], audit.ActorUser, ref(later))
	created(keys["by-member-key-key"], audit.ActorAPIKey, ref(keys["by-member-key"])) // before its parent's entry
	created(keys["by-member-key"], audit.ActorAPIKey, ref(keys["by-member"]))
	created(keys["by-owner-key"], audit.ActorAPIKey, ref(keys["bootstrap"]))
	created(keys["by-gone"], audit.ActorUser, ref(gone))

	migrateTo(t, st, 41, false)
	type row struct {
		by      *uuid.UUID
		revoked bool
	}
	got := map[string]row{}
	rows, err := st.pool.Query(ctx, `SELECT name, created_by, revoked_at IS NOT NULL FROM api_key`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var r row
		require.NoError(t, rows.Scan(&name, &r.by, &r.revoked))
		got[name] = r
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]row{
		"bootstrap":         {ref(owner), false},
		"admin":             {ref(owner), false},
		"by-member":         {ref(member), false},
		"by-later":          {ref(later), false},
		"by-member-key":     {ref(member), false},
		"by-member-key-key": {ref(member), false},
		"by-owner-key":      {ref(owner), false},
		"by-gone":           {ref(gone), true},
	}, got)

	migrateTo(t, st, 40, true)
	var n int
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'api_key' AND column_name = 'created_by'`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT count(*) FROM api_key`).Scan(&n))
	require.Equal(t, 8, n)
}

// TestAPIKeyCreatorRules: a full_access key needs an owner as its
// creator, any other key a member; removing a member revokes the live
// keys they created, and only theirs, in the same transaction.
func TestAPIKeyCreatorRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	team, other := uuid.New(), uuid.New()
	owner, member, stranger := uuid.New(), uuid.New(), uuid.New()
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: team, Name: "t"}))
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: other, Name: "o"}))
	for _, u := range []uuid.UUID{owner, member, stranger} {
		require.NoError(t, st.Accounts.CreateUser(ctx, User{ID: u, Email: u.String() + "@example.com"}))
	}
	require.NoError(t, st.Accounts.AddMember(ctx, team, owner, "owner"))
	require.NoError(t, st.Accounts.AddMember(ctx, team, member, "member"))
	require.NoError(t, st.Accounts.AddMember(ctx, other, stranger, "owner"))

	n := 0
	create := func(by *uuid.UUID, perm string) (uuid.UUID, error) {
		n++
		id := uuid.New()
		return id, st.Accounts.CreateAPIKey(ctx, APIKey{ID: id, TeamID: team, Name: "k", Prefix: "ph_x",
			Hash: []byte{byte(n)}, Permission: perm, CreatedBy: by})
	}
	for _, tc := range []struct {
		by   *uuid.UUID
		perm string
		err  error
	}{
		{&owner, PermissionFullAccess, nil},
		{&owner, PermissionSendingAccess, nil},
		{&member, PermissionFullAccess, ErrOwnersOnly},
		{&member, PermissionSendingAccess, nil},
		{&stranger, PermissionFullAccess, ErrOwnersOnly},
		{&stranger, PermissionSendingAccess, ErrOwnersOnly},
		{nil, PermissionFullAccess, ErrOwnersOnly},
		{nil, PermissionSendingAccess, nil},
	} {
		_, err := create(tc.by, tc.perm)
		if tc.err == nil {
			require.NoError(t, err, "%v %s", tc.by, tc.perm)
		} else {
			require.ErrorIs(t, err, tc.err, "%v %s", tc.by, tc.perm)
		}
	}

	ownerKey, err := create(&owner, PermissionFullAccess)
	require.NoError(t, err)
	k, err := st.Accounts.UseAPIKey(ctx, []byte{byte(n)})
	require.NoError(t, err)
	require.Equal(t, ownerKey, k.ID)
	require.True(t, k.ByOwner)
	require.Equal(t, &owner, k.CreatedBy)
	memberKey, err := create(&member, PermissionSendingAccess)
	require.NoError(t, err)
	memberHash := []byte{byte(n)}
	k, err = st.Accounts.UseAPIKey(ctx, memberHash)
	require.NoError(t, err)
	require.False(t, k.ByOwner)

	revoked, err := st.Accounts.RemoveMember(ctx, team, member, audit.Entry{ActorType: audit.ActorSystem})
	require.NoError(t, err)
	require.Len(t, revoked, 2, "the member's two sending keys")
	ids := []uuid.UUID{revoked[0].ID, revoked[1].ID}
	require.Contains(t, ids, memberKey)
	_, err = st.Accounts.UseAPIKey(ctx, memberHash)
	require.ErrorIs(t, err, ErrNotFound)
	live, _, err := st.Accounts.ListAPIKeys(ctx, team, Page{Limit: 100})
	require.NoError(t, err)
	for _, k := range live {
		require.NotEqual(t, &member, k.CreatedBy)
	}
	require.Len(t, live, 4, "the owner's three keys and the one no user made")

	// The removal and each revocation are audited in its transaction.
	removed, _, err := st.Privacy.ListAudit(ctx, team, audit.Filter{Action: audit.MemberRemove}, Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, removed, 1)
	require.Equal(t, member.String(), removed[0].TargetID)
	revokes, _, err := st.Privacy.ListAudit(ctx, team, audit.Filter{Action: audit.APIKeyRevoke}, Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, revokes, 2)
	for _, e := range revokes {
		require.Contains(t, ids, uuid.MustParse(e.TargetID))
		require.JSONEq(t, `{"reason":"member_removed","member":"`+member.String()+`"}`, e.Detail)
	}
}
