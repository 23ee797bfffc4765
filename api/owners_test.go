package api_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestOwnerOnlyRoutesRefuseMembersKeys: a full_access key a member made
// (before only owners could: migration 00041 records them so) reaches
// everything but what the dashboard keeps for owners; it cannot make a
// full_access key; keys it makes are the member's; removing the member
// revokes them all.
func TestOwnerOnlyRoutesRefuseMembersKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, dbURL := storetest.NewWithURL(t)
	e := newEnvWith(t, envOptions{store: st, keyCache: -1})
	member := store.User{ID: uuid.New(), Email: "member-" + uuid.NewString() + "@example.com"}
	require.NoError(t, st.Accounts.CreateUser(ctx, member))
	require.NoError(t, st.Accounts.AddMember(ctx, e.teamA, member.ID, "member"))
	token, prefix, hash, err := auth.NewToken()
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO api_key (id, team_id, name, prefix, hash, permission, created_by)
		VALUES ($1, $2, 'legacy', $3, $4, 'full_access', $5)`, uuid.New(), e.teamA, prefix, hash, member.ID)
	require.NoError(t, err)

	d := e.do("POST", "/domains", e.keyA, map[string]any{"name": "owned.example"})
	require.Equal(t, 201, d.status, string(d.raw))
	domainID := d.body["id"].(string)
	dr := e.do("POST", "/data-requests", e.keyA, map[string]any{"type": "export", "email": "someone@example.com"})
	require.Equal(t, 201, dr.status, string(dr.raw))
	requestID := dr.body["id"].(string)

	owner := []struct{ method, path string }{
		{"GET", "/audit-log"},
		{"GET", "/data-requests"},
		{"GET", "/data-requests/" + requestID},
		{"POST", "/data-requests"},
		{"DELETE", "/domains/" + domainID},
	}
	for _, r := range owner {
		requireError(t, e.do(r.method, r.path, token, map[string]any{"type": "export", "email": "someone@example.com"}),
			403, "validation_error")
	}
	require.Equal(t, 200, e.do("GET", "/domains/"+domainID, e.keyA, nil).status, "the domain is still there")
	require.Equal(t, 200, e.do("GET", "/emails", token, nil).status, "the rest of full access works")
	for _, r := range owner[:3] {
		require.Equal(t, 200, e.do(r.method, r.path, e.keyA, nil).status, "the owner's key: %s %s", r.method, r.path)
	}

	// Keys: a member's key makes sending keys only, and they are the member's.
	requireError(t, e.do("POST", "/api-keys", token, map[string]any{"name": "x"}), 403, "validation_error")
	requireError(t, e.do("POST", "/api-keys", token, map[string]any{"name": "x", "permission": "full_access"}),
		403, "validation_error")
	s := e.do("POST", "/api-keys", token, map[string]any{"name": "x", "permission": "sending_access"})
	require.Equal(t, 201, s.status, string(s.raw))
	sending := s.body["token"].(string)
	o := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "owner's second"})
	require.Equal(t, 201, o.status, string(o.raw))
	second := o.body["token"].(string)
	require.Equal(t, 200, e.do("GET", "/audit-log", second, nil).status, "an owner's key makes owners' keys")

	revoked, err := st.Accounts.RemoveMember(ctx, e.teamA, member.ID, audit.Entry{ActorType: audit.ActorSystem})
	require.NoError(t, err)
	require.Len(t, revoked, 2)
	requireError(t, e.do("GET", "/emails", token, nil), 403, "invalid_api_key")
	requireError(t, e.do("POST", "/emails", sending, sandboxSend), 403, "invalid_api_key")
	require.Equal(t, 200, e.do("GET", "/emails", second, nil).status)

	// Domain deletion: the owner's key may.
	require.Equal(t, 200, e.do("DELETE", "/domains/"+domainID, e.keyA, nil).status)
}
