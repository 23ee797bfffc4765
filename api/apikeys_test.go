package api_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// TestRenameAPIKey: PATCH /api-keys/{id} checks the name as create does,
// answers 404 for another team's or a revoked key (changing nothing) and
// writes an api_key.rename audit entry.
func TestRenameAPIKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "ci"})
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)
	long := ""
	for range 51 {
		long += "n"
	}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		error  string
	}{
		{"no name", map[string]any{}, 422, "missing_required_field"},
		{"blank name", map[string]any{"name": "  "}, 422, "missing_required_field"},
		{"long name", map[string]any{"name": long}, 422, "validation_error"},
		{"not an object", `[1]`, 422, "validation_error"},
		{"name not a string", map[string]any{"name": 5}, 422, "validation_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, e.do("PATCH", "/api-keys/"+id, e.keyA, tc.body), tc.status, tc.error)
		})
	}
	requireError(t, e.do("PATCH", "/api-keys/nope", e.keyA, map[string]any{"name": "x"}), 422, "invalid_parameter")
	requireError(t, e.do("PATCH", "/api-keys/"+id, e.keyB, map[string]any{"name": "B's now"}), 404, "not_found")

	r = e.do("PATCH", "/api-keys/"+id, e.keyA, map[string]any{"name": "deploy"})
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, map[string]any{"object": "api_key", "id": id}, r.body)
	keys, _, err := e.store.Accounts.ListAPIKeys(context.Background(), e.teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	names := map[string]string{}
	for _, k := range keys {
		names[k.ID.String()] = k.Name
	}
	require.Equal(t, "deploy", names[id])
	entries, _, err := e.store.Privacy.ListAudit(context.Background(), e.teamA, audit.Filter{}, store.Page{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, audit.APIKeyRename, entries[0].Action)
	require.Equal(t, id, entries[0].TargetID)
	entries, _, err = e.store.Privacy.ListAudit(context.Background(), e.teamB, audit.Filter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	for _, en := range entries {
		require.NotEqual(t, audit.APIKeyRename, en.Action, "B's refused rename wrote nothing")
	}

	require.Equal(t, 200, e.do("DELETE", "/api-keys/"+id, e.keyA, nil).status)
	requireError(t, e.do("PATCH", "/api-keys/"+id, e.keyA, map[string]any{"name": "x"}), 404, "not_found")
	requireError(t, e.do("PATCH", "/api-keys/"+uuid.NewString(), e.keyA, map[string]any{"name": "x"}), 404, "not_found")
}
