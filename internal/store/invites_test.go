package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func hashOf(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

func newUser(t *testing.T, st *store.Store, email string) uuid.UUID {
	t.Helper()
	u := store.User{ID: uuid.New(), Email: email, PasswordHash: "hash"}
	require.NoError(t, st.Accounts.CreateUser(context.Background(), u))
	return u.ID
}

func TestInvitations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	owner := newUser(t, st, "owner@example.com")
	week := time.Now().Add(7 * 24 * time.Hour)

	inv, err := st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: teamA, Email: "New@Example.com", Role: "member",
		InvitedBy: &owner, ExpiresAt: week}, hashOf("first"), nil)
	require.NoError(t, err)
	require.Equal(t, "new@example.com", inv.Email)

	// Inviting the address again replaces the token and the role: one
	// invitation per team and address, and the first link stops working.
	again, err := st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: teamA, Email: "new@example.com", Role: "owner",
		ExpiresAt: week}, hashOf("second"), nil)
	require.NoError(t, err)
	require.Equal(t, inv.ID, again.ID)
	_, err = st.Accounts.InvitationByToken(ctx, hashOf("first"))
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := st.Accounts.InvitationByToken(ctx, hashOf("second"))
	require.NoError(t, err)
	require.Equal(t, "owner", got.Role)
	require.Equal(t, "t", got.TeamName)
	list, err := st.Accounts.Invitations(ctx, teamA)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Nil(t, list[0].InvitedBy)

	// Team B has its own invitation for the same address, and cannot
	// revoke team A's.
	_, err = st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: teamB, Email: "new@example.com", Role: "member",
		ExpiresAt: week}, hashOf("b"), nil)
	require.NoError(t, err)
	require.ErrorIs(t, st.Accounts.RevokeInvitation(ctx, teamB, inv.ID, audit.Entry{}), store.ErrNotFound)
	list, err = st.Accounts.Invitations(ctx, teamB)
	require.NoError(t, err)
	require.Len(t, list, 1)

	// A new user accepts: created with the invited address, a member with
	// the invited role; the invitation is spent.
	u := store.User{ID: uuid.New(), Name: "New Person", PasswordHash: "pw"}
	accepted, err := st.Accounts.AcceptInvitationAsNewUser(ctx, hashOf("second"), u, nil)
	require.NoError(t, err)
	require.Equal(t, teamA, accepted.TeamID)
	role, err := st.Sessions.MemberRole(ctx, teamA, u.ID)
	require.NoError(t, err)
	require.Equal(t, "owner", role)
	members, err := st.Accounts.Members(ctx, teamA)
	require.NoError(t, err)
	require.Equal(t, "New Person", members[0].Name)
	_, err = st.Accounts.AcceptInvitationAsNewUser(ctx, hashOf("second"), store.User{ID: uuid.New(), PasswordHash: "pw"}, nil)
	require.ErrorIs(t, err, store.ErrNotFound, "single use")

	// Team B's invitation is for an address that now has a user: a new
	// user cannot take it, another user cannot accept it, the user can.
	_, err = st.Accounts.AcceptInvitationAsNewUser(ctx, hashOf("b"), store.User{ID: uuid.New(), PasswordHash: "pw"}, nil)
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = st.Accounts.AcceptInvitation(ctx, hashOf("b"), owner, nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Accounts.AcceptInvitation(ctx, hashOf("b"), u.ID, nil)
	require.NoError(t, err)
	role, err = st.Sessions.MemberRole(ctx, teamB, u.ID)
	require.NoError(t, err)
	require.Equal(t, "member", role)
	list, err = st.Accounts.Invitations(ctx, teamB)
	require.NoError(t, err)
	require.Empty(t, list)

	// Expired invitations are listed but cannot be used; revoking deletes.
	old, err := st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: teamA, Email: "late@example.com", Role: "member",
		ExpiresAt: time.Now().Add(-time.Minute)}, hashOf("late"), nil)
	require.NoError(t, err)
	_, err = st.Accounts.InvitationByToken(ctx, hashOf("late"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Accounts.AcceptInvitationAsNewUser(ctx, hashOf("late"), store.User{ID: uuid.New(), PasswordHash: "pw"}, nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, st.Accounts.RevokeInvitation(ctx, teamA, old.ID, audit.Entry{}))
	require.ErrorIs(t, st.Accounts.RevokeInvitation(ctx, teamA, old.ID, audit.Entry{}), store.ErrNotFound)
}

func TestSetSessionTeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	u := newUser(t, st, "u@example.com")
	require.NoError(t, st.Accounts.AddMember(ctx, teamA, u, "member"))
	hash := hashOf("session")
	require.NoError(t, st.Sessions.CreateSession(ctx, store.Session{IDHash: hash, UserID: u, TeamID: teamA, CSRFToken: "c",
		ExpiresAt: time.Now().Add(time.Hour)}))
	require.ErrorIs(t, st.Accounts.SetSessionTeam(ctx, hash, teamB), store.ErrNotFound, "not a member of team B")
	require.NoError(t, st.Accounts.AddMember(ctx, teamB, u, "member"))
	require.NoError(t, st.Accounts.SetSessionTeam(ctx, hash, teamB))
	se, err := storetest.SessionByHash(ctx, st, hash)
	require.NoError(t, err)
	require.Equal(t, teamB, se.TeamID)
}

func TestPasswordReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	u := newUser(t, st, "u@example.com")
	other := newUser(t, st, "other@example.com")
	for _, id := range []uuid.UUID{u, other} {
		require.NoError(t, st.Accounts.AddMember(ctx, team, id, "member"))
		require.NoError(t, st.Sessions.CreateSession(ctx, store.Session{IDHash: hashOf(id.String()), UserID: id, TeamID: team,
			CSRFToken: "c", ExpiresAt: time.Now().Add(time.Hour)}))
	}
	hour := time.Now().Add(time.Hour)

	require.NoError(t, st.Accounts.RequestPasswordReset(ctx, u, hashOf("one"), hour))
	require.NoError(t, st.Accounts.RequestPasswordReset(ctx, u, hashOf("two"), hour))
	_, err := st.Accounts.PasswordResetUser(ctx, hashOf("one"))
	require.ErrorIs(t, err, store.ErrNotFound, "a new request replaces the old token")
	_, err = st.Accounts.ResetPassword(ctx, hashOf("one"), "new", nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	id, err := st.Accounts.PasswordResetUser(ctx, hashOf("two"))
	require.NoError(t, err)
	require.Equal(t, u, id)

	pr, err := st.Accounts.ResetPassword(ctx, hashOf("two"), "new-hash", nil)
	require.NoError(t, err)
	require.Equal(t, u, pr.UserID)
	h, err := st.Accounts.UserPasswordHash(ctx, u)
	require.NoError(t, err)
	require.Equal(t, "new-hash", h)
	_, err = storetest.SessionByHash(ctx, st, hashOf(u.String()))
	require.ErrorIs(t, err, store.ErrNotFound, "the user's sessions ended")
	_, err = storetest.SessionByHash(ctx, st, hashOf(other.String()))
	require.NoError(t, err, "other users stay signed in")
	_, err = st.Accounts.ResetPassword(ctx, hashOf("two"), "again", nil)
	require.ErrorIs(t, err, store.ErrNotFound, "single use")

	require.NoError(t, st.Accounts.RequestPasswordReset(ctx, other, hashOf("late"), time.Now().Add(-time.Second)))
	_, err = st.Accounts.PasswordResetUser(ctx, hashOf("late"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Accounts.ResetPassword(ctx, hashOf("late"), "x", nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	h, err = st.Accounts.UserPasswordHash(ctx, other)
	require.NoError(t, err)
	require.Equal(t, "hash", h)
}

func TestSystemTeamExists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := storetest.InsertEmail(ctx, st, newEmail(store.SystemTeamID, "delivered@posthaste.test"))
	require.NoError(t, err, "the system team exists")
	members, err := st.Accounts.Members(ctx, store.SystemTeamID)
	require.NoError(t, err)
	require.Empty(t, members, "nobody reads the system team's emails")
}

// TestPurgeExpiredSweepsSessionsAndLinks checks that the retention sweep
// deletes dashboard sessions and password-reset links that expired, and
// invitations 30 days after they expired, and nothing that still works.
func TestPurgeExpiredSweepsSessionsAndLinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	ann, bob := newUser(t, st, "ann@example.com"), newUser(t, st, "bob@example.com")
	now := time.Now()
	for _, s := range []store.Session{
		{IDHash: hashOf("old session"), UserID: ann, TeamID: team, CSRFToken: "c", ExpiresAt: now.Add(-time.Minute)},
		{IDHash: hashOf("live session"), UserID: ann, TeamID: team, CSRFToken: "c", ExpiresAt: now.Add(time.Hour)},
	} {
		require.NoError(t, st.Sessions.CreateSession(ctx, s))
	}
	require.NoError(t, st.Accounts.RequestPasswordReset(ctx, ann, hashOf("old reset"), now.Add(-time.Minute)))
	require.NoError(t, st.Accounts.RequestPasswordReset(ctx, bob, hashOf("live reset"), now.Add(time.Hour)))
	for i, expires := range []time.Time{now.Add(-31 * 24 * time.Hour), now.Add(-24 * time.Hour), now.Add(time.Hour)} {
		_, err := st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: team, Email: fmt.Sprintf("i%d@example.com", i),
			Role: "member", ExpiresAt: expires}, hashOf(fmt.Sprintf("invite %d", i)), nil)
		require.NoError(t, err)
	}

	n, err := st.Privacy.PurgeExpired(ctx, now, 100)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the old session, the old reset link and the month-old invitation")
	n, err = st.Privacy.PurgeExpired(ctx, now, 100)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = storetest.SessionByHash(ctx, st, hashOf("live session"))
	require.NoError(t, err)
	user, err := st.Accounts.PasswordResetUser(ctx, hashOf("live reset"))
	require.NoError(t, err)
	require.Equal(t, bob, user)
	list, err := st.Accounts.Invitations(ctx, team)
	require.NoError(t, err)
	var emails []string
	for _, inv := range list {
		emails = append(emails, inv.Email)
	}
	require.ElementsMatch(t, []string{"i1@example.com", "i2@example.com"}, emails,
		"an invitation that expired yesterday is still listed")
}

// TestInvitationsProveAddresses: a user who joins through an emailed
// invitation has a proven address; one who joins through a link shown to
// the inviting owner does not (issue 14, account pre-hijacking). Inviting
// again makes the new link count as not emailed until it is.
func TestInvitationsProveAddresses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	week := time.Now().Add(7 * 24 * time.Hour)
	invite := func(email, tok string) {
		t.Helper()
		_, err := st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: team, Email: email, Role: "member", ExpiresAt: week},
			hashOf(tok), nil)
		require.NoError(t, err)
	}

	invite("shown@example.com", "shown")
	invite("mailed@example.com", "mailed")
	require.NoError(t, st.Accounts.MarkInvitationEmailed(ctx, hashOf("mailed")))
	got, err := st.Accounts.InvitationByToken(ctx, hashOf("mailed"))
	require.NoError(t, err)
	require.NotNil(t, got.EmailedAt)
	got, err = st.Accounts.InvitationByToken(ctx, hashOf("shown"))
	require.NoError(t, err)
	require.Nil(t, got.EmailedAt)

	// Inviting again replaces the emailed link by one not emailed yet.
	invite("again@example.com", "again-1")
	require.NoError(t, st.Accounts.MarkInvitationEmailed(ctx, hashOf("again-1")))
	invite("again@example.com", "again-2")
	require.NoError(t, st.Accounts.MarkInvitationEmailed(ctx, hashOf("again-1")), "a replaced token marks nothing")
	got, err = st.Accounts.InvitationByToken(ctx, hashOf("again-2"))
	require.NoError(t, err)
	require.Nil(t, got.EmailedAt)

	for tok, proven := range map[string]bool{"shown": false, "mailed": true, "again-2": false} {
		inv, err := st.Accounts.AcceptInvitationAsNewUser(ctx, hashOf(tok), store.User{ID: uuid.New(), PasswordHash: "pw"}, nil)
		require.NoError(t, err)
		u, err := st.Accounts.UserByEmail(ctx, inv.Email)
		require.NoError(t, err)
		require.Equal(t, proven, u.EmailVerifiedAt != nil, tok)
	}

	// An existing user who accepts an emailed invitation proves the
	// address; accepting a shown one proves nothing.
	other := newTeam(t, st)
	for _, emailed := range []bool{false, true} {
		_, err := st.Accounts.Invite(ctx, store.Invitation{ID: uuid.New(), TeamID: other, Email: "shown@example.com", Role: "member",
			ExpiresAt: week}, hashOf("existing"), nil)
		require.NoError(t, err)
		if emailed {
			require.NoError(t, st.Accounts.MarkInvitationEmailed(ctx, hashOf("existing")))
		}
		u, err := st.Accounts.UserByEmail(ctx, "shown@example.com")
		require.NoError(t, err)
		_, err = st.Accounts.AcceptInvitation(ctx, hashOf("existing"), u.ID, nil)
		require.NoError(t, err)
		u, err = st.Accounts.UserByID(ctx, u.ID)
		require.NoError(t, err)
		require.Equal(t, emailed, u.EmailVerifiedAt != nil, "emailed %v", emailed)
	}
}

// TestPasswordResetProvesTheAddress: a reset link was emailed, so using it
// proves the address. When the address was unproven, whoever set up the
// account may not own it: the second factor they may have set goes too.
func TestPasswordResetProvesTheAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	now := time.Now()
	unproven := newUser(t, st, "unproven@example.com")
	proven := store.User{ID: uuid.New(), Email: "proven@example.com", PasswordHash: "hash", EmailVerifiedAt: &now}
	require.NoError(t, st.Accounts.CreateUser(ctx, proven))
	for _, id := range []uuid.UUID{unproven, proven.ID} {
		require.NoError(t, st.Sessions.StartTOTP(ctx, id, []byte("sealed")))
		require.NoError(t, st.Sessions.EnableTOTP(ctx, id, [][]byte{hashOf("recovery")}, audit.Entry{}))
	}
	team := newTeam(t, st)

	for _, tt := range []struct {
		id     uuid.UUID
		proves bool
	}{{unproven, true}, {proven.ID, false}} {
		require.NoError(t, st.Accounts.RequestPasswordReset(ctx, tt.id, hashOf(tt.id.String()), now.Add(time.Hour)))
		pr, err := st.Accounts.ResetPassword(ctx, hashOf(tt.id.String()), "new-hash", nil)
		require.NoError(t, err)
		require.Equal(t, tt.id, pr.UserID)
		require.Equal(t, tt.proves, pr.ProvedAddress)
		u, err := st.Accounts.UserByID(ctx, tt.id)
		require.NoError(t, err)
		require.NotNil(t, u.EmailVerifiedAt, "the address is proven now")
		m, err := st.Sessions.UserMFA(ctx, tt.id, team)
		require.NoError(t, err)
		require.Equal(t, tt.proves, m.EnabledAt == nil, "the second factor goes only with an unproven address")
		ok, err := st.Sessions.UseRecoveryCode(ctx, tt.id, hashOf("recovery"))
		require.NoError(t, err)
		require.Equal(t, !tt.proves, ok, "recovery codes go with the second factor")
	}
	u, err := st.Accounts.UserByID(ctx, proven.ID)
	require.NoError(t, err)
	require.WithinDuration(t, now, *u.EmailVerifiedAt, time.Second, "the first proof's time is kept")

	require.NoError(t, st.Accounts.VerifyUserEmail(ctx, unproven))
	require.ErrorIs(t, st.Accounts.VerifyUserEmail(ctx, uuid.New()), store.ErrNotFound)
	_, err = st.Accounts.UserByID(ctx, uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
}
