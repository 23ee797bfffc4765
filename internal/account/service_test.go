package account_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// team creates a team whose owner made its first key, and returns the
// service, the store, the team and the owner.
func team(t *testing.T) (*account.Service, *store.Store, uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	creds, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "Acme", "owner@example.com")
	require.NoError(t, err)
	u, err := st.Accounts.UserByEmail(ctx, creds.Email)
	require.NoError(t, err)
	return account.New(account.Config{Store: st}), st, uuid.MustParse(creds.TeamID), u.ID
}

func actor(teamID, userID uuid.UUID) audit.Entry {
	return audit.Entry{TeamID: &teamID, ActorType: audit.ActorUser, ActorID: &userID, ClientAddr: "192.0.2.1", UserAgent: "test"}
}

// lastAudit is the team's newest audit entry.
func lastAudit(t *testing.T, st *store.Store, teamID uuid.UUID) audit.Entry {
	t.Helper()
	list, _, err := st.Privacy.ListAudit(context.Background(), teamID, audit.Filter{}, store.Page{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, list)
	return list[0]
}

// TestKeyValidation: the key checks the API and the dashboard's form made
// each on their own, in the wording each showed.
func TestKeyValidation(t *testing.T) {
	svc, _, teamID, owner := team(t)
	ctx := context.Background()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		in      account.KeyInput
		missing bool
		message string
	}{
		{"no name", account.KeyInput{Name: "  "}, true, "Missing `name` field."},
		{"long name", account.KeyInput{Name: strings.Repeat("n", 51)}, false, "The `name` field must be at most 50 characters."},
		{"form name", account.KeyInput{Name: "", Form: true}, false, "Give the key a name of 1 to 50 characters."},
		{"form long name", account.KeyInput{Name: strings.Repeat("é", 51), Form: true}, false,
			"Give the key a name of 1 to 50 characters."},
		{"permission", account.KeyInput{Name: "x", Permission: "root"}, false,
			"The `permission` field must be full_access or sending_access."},
		{"domain of full access", account.KeyInput{Name: "x", DomainID: str(uuid.NewString())}, false,
			"The `domain_id` field can only be used with sending_access permission."},
		{"domain id", account.KeyInput{Name: "x", Permission: store.PermissionSendingAccess, DomainID: str("nope")}, false,
			"The `domain_id` field must be a valid UUID."},
		{"allowed ips", account.KeyInput{Name: "x", AllowedIPs: []string{"nope"}}, false, "The `allowed_ips` field: "},
		{"form allowed ips", account.KeyInput{Name: "x", AllowedIPs: []string{"nope"}, Form: true}, false, "Allowed addresses: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.TeamID, tc.in.CreatedBy = teamID, &owner
			_, err := svc.Keys.Create(ctx, tc.in, actor(teamID, owner))
			var ie *invalid.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.missing, ie.Missing)
			require.True(t, strings.HasPrefix(ie.Message, tc.message), ie.Message)
		})
	}
	_, err := svc.Keys.Create(ctx, account.KeyInput{TeamID: teamID, CreatedBy: &owner, Name: "x",
		Permission: store.PermissionSendingAccess, DomainID: str(uuid.NewString())}, actor(teamID, owner))
	require.ErrorIs(t, err, store.ErrNotFound, "another team's or no domain")
	require.ErrorIs(t, func() error {
		_, err := svc.Keys.Create(ctx, account.KeyInput{TeamID: teamID, Name: "x", Permission: store.PermissionSendingAccess,
			DomainID: str("nope")}, actor(teamID, owner))
		return err
	}(), account.ErrInvalidDomainID)
}

// TestKeysWriteTheirAudit: creating and revoking a key write their audit
// entries with the actor given, and a member cannot make a full_access key.
func TestKeysWriteTheirAudit(t *testing.T) {
	svc, st, teamID, owner := team(t)
	ctx := context.Background()
	key, err := svc.Keys.Create(ctx, account.KeyInput{TeamID: teamID, CreatedBy: &owner, Name: "  ci  "}, actor(teamID, owner))
	require.NoError(t, err)
	require.Equal(t, store.PermissionFullAccess, key.Permission)
	e := lastAudit(t, st, teamID)
	require.Equal(t, audit.APIKeyCreate, e.Action)
	require.Equal(t, key.ID.String(), e.TargetID)
	require.Equal(t, owner, *e.ActorID)
	require.Equal(t, "192.0.2.1", e.ClientAddr)
	require.JSONEq(t, `{"permission":"full_access"}`, e.Detail)
	keys, _, err := svc.Keys.List(ctx, teamID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Contains(t, []string{keys[0].Name, keys[1].Name}, "ci", "the name is stored trimmed")

	hash, err := svc.Keys.Revoke(ctx, teamID, key.ID, actor(teamID, owner))
	require.NoError(t, err)
	require.NotEmpty(t, hash)
	require.Equal(t, audit.APIKeyRevoke, lastAudit(t, st, teamID).Action)
	_, err = svc.Keys.Revoke(ctx, teamID, key.ID, actor(teamID, owner))
	require.ErrorIs(t, err, store.ErrNotFound)

	member := uuid.New()
	require.NoError(t, st.Accounts.CreateUser(ctx, store.User{ID: member, Email: "member@example.com"}))
	require.NoError(t, st.Accounts.AddMember(ctx, teamID, member, "member"))
	_, err = svc.Keys.Create(ctx, account.KeyInput{TeamID: teamID, CreatedBy: &member, Name: "m"}, actor(teamID, member))
	require.ErrorIs(t, err, store.ErrOwnersOnly)
}

// TestInvitations: an invitation's checks, its audit entry, and joining
// with its link as a new user.
func TestInvitations(t *testing.T) {
	svc, st, teamID, owner := team(t)
	ctx := context.Background()
	now := time.Now()
	in := account.InviteInput{TeamID: teamID, InvitedBy: owner, Now: now}
	for _, bad := range []string{"", "not an address", "Name <a@example.com>", strings.Repeat("a", 250) + "@example.com"} {
		in.Email = bad
		_, _, err := svc.Members.Invite(ctx, in, actor(teamID, owner))
		var ie *invalid.Error
		require.ErrorAs(t, err, &ie, bad)
		require.Equal(t, "Enter the email address to invite.", ie.Message)
	}
	in.Email = " Owner@Example.com "
	_, _, err := svc.Members.Invite(ctx, in, actor(teamID, owner))
	require.ErrorIs(t, err, account.ErrAlreadyMember)

	in.Email, in.Role = " New@Example.com", "admin"
	inv, tok, err := svc.Members.Invite(ctx, in, actor(teamID, owner))
	require.NoError(t, err)
	require.Equal(t, "new@example.com", inv.Email)
	require.Equal(t, "member", inv.Role, "an unknown role invites a member")
	e := lastAudit(t, st, teamID)
	require.Equal(t, audit.InviteCreate, e.Action)
	require.JSONEq(t, `{"role":"member"}`, e.Detail)

	var ie *invalid.Error
	_, _, err = svc.Members.JoinAsNewUser(ctx, tok, strings.Repeat("n", 101), "hash", audit.Entry{})
	require.ErrorAs(t, err, &ie)
	u, joined, err := svc.Members.JoinAsNewUser(ctx, tok, "New", "hash", audit.Entry{ClientAddr: "192.0.2.2"})
	require.NoError(t, err)
	require.Equal(t, inv.ID, joined.ID)
	require.Equal(t, "new@example.com", u.Email)
	e = lastAudit(t, st, teamID)
	require.Equal(t, audit.InviteAccept, e.Action)
	require.Equal(t, u.ID, *e.ActorID, "the new user accepted it")
	require.Equal(t, "192.0.2.2", e.ClientAddr)
	_, _, err = svc.Members.JoinAsNewUser(ctx, tok, "Again", "hash", audit.Entry{})
	require.True(t, errors.Is(err, store.ErrNotFound), "the link works once: %v", err)
}

// TestReserveResetMail: reset links count against the address's hourly
// share of system emails, whoever has the address (nobody here), and
// share it with invitations.
func TestReserveResetMail(t *testing.T) {
	svc, _, teamID, owner := team(t)
	ctx := context.Background()
	now := time.Now()
	lim := store.SystemMailLimits{Window: time.Hour, PerTeam: 10, PerAddress: 2}
	_, _, err := svc.Members.Invite(ctx, account.InviteInput{TeamID: teamID, InvitedBy: owner, Email: "x@example.com",
		Emailed: true, Limits: lim, Now: now}, actor(teamID, owner))
	require.NoError(t, err)
	require.NoError(t, svc.Members.ReserveResetMail(ctx, "x@example.com", lim, now))
	require.ErrorIs(t, svc.Members.ReserveResetMail(ctx, "X@example.com", lim, now), store.ErrAddressMailLimit)
	require.NoError(t, svc.Members.ReserveResetMail(ctx, "y@example.com", lim, now), "another address has its own share")
	require.NoError(t, svc.Members.ReserveResetMail(ctx, "x@example.com", lim, now.Add(time.Hour+time.Second)),
		"an hour later")
}

// TestSessions: a sign-in's session, and revoking it with its audit entry.
func TestSessions(t *testing.T) {
	svc, st, teamID, owner := team(t)
	ctx := context.Background()
	now := time.Now()
	se, err := svc.Sessions.Start(ctx, account.SignIn{UserID: owner, Token: "tok", CSRFToken: "csrf", Now: now})
	require.NoError(t, err)
	require.Equal(t, teamID, se.TeamID)
	require.False(t, se.MFAPending)
	require.WithinDuration(t, now.Add(account.SessionLifetime), se.ExpiresAt, time.Second)
	used, err := svc.Sessions.Use(ctx, account.TokenHash("tok"), now, 0)
	require.NoError(t, err)
	require.Equal(t, owner, used.UserID)

	require.NoError(t, svc.Sessions.Revoke(ctx, owner, se.IDHash, true, actor(teamID, owner)))
	e := lastAudit(t, st, teamID)
	require.Equal(t, audit.SessionRevoke, e.Action)
	require.JSONEq(t, `{"current":true}`, e.Detail)
	_, err = svc.Sessions.Use(ctx, account.TokenHash("tok"), now, 0)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, svc.Sessions.Revoke(ctx, owner, se.IDHash, true, actor(teamID, owner)), store.ErrNotFound)
}

// TestRenameKey: a rename checks the name as create does, stores it
// trimmed with its audit entry, and reaches only the team's own live keys:
// another team's key or a revoked one is store.ErrNotFound and unchanged.
func TestRenameKey(t *testing.T) {
	svc, st, teamID, owner := team(t)
	ctx := context.Background()
	credsB, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "Other", "b-owner@example.com")
	require.NoError(t, err)
	teamB := uuid.MustParse(credsB.TeamID)
	userB, err := st.Accounts.UserByEmail(ctx, credsB.Email)
	require.NoError(t, err)
	ownerB := userB.ID
	key, err := svc.Keys.Create(ctx, account.KeyInput{TeamID: teamID, CreatedBy: &owner, Name: "ci"}, actor(teamID, owner))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, in string
		missing  bool
		message  string
	}{
		{"empty", "", true, "Missing `name` field."},
		{"blank", "   ", true, "Missing `name` field."},
		{"long", strings.Repeat("é", 51), false, "The `name` field must be at most 50 characters."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := svc.Keys.Rename(ctx, teamID, key.ID, tc.in, actor(teamID, owner))
			var ie *invalid.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.missing, ie.Missing)
			require.Equal(t, tc.message, ie.Message)
		})
	}
	name := func() string {
		keys, _, err := svc.Keys.List(ctx, teamID, store.Page{Limit: 10})
		require.NoError(t, err)
		for _, k := range keys {
			if k.ID == key.ID {
				return k.Name
			}
		}
		return ""
	}
	require.Equal(t, "ci", name(), "refused renames change nothing")

	require.NoError(t, svc.Keys.Rename(ctx, teamID, key.ID, "  deploy  ", actor(teamID, owner)))
	require.Equal(t, "deploy", name())
	e := lastAudit(t, st, teamID)
	require.Equal(t, audit.APIKeyRename, e.Action)
	require.Equal(t, key.ID.String(), e.TargetID)
	require.Equal(t, owner, *e.ActorID)

	err = svc.Keys.Rename(ctx, teamB, key.ID, "B's", actor(teamB, ownerB))
	require.ErrorIs(t, err, store.ErrNotFound, "team B cannot rename team A's key")
	require.Equal(t, "deploy", name())
	entriesB, _, err := st.Privacy.ListAudit(ctx, teamB, audit.Filter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, entriesB, "nor audits anything for B")

	_, err = svc.Keys.Revoke(ctx, teamID, key.ID, actor(teamID, owner))
	require.NoError(t, err)
	require.ErrorIs(t, svc.Keys.Rename(ctx, teamID, key.ID, "late", actor(teamID, owner)), store.ErrNotFound)
}
