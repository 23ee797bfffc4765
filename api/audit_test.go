package api_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func auditIDs(t *testing.T, r resp) []string {
	t.Helper()
	require.Equal(t, 200, r.status, string(r.raw))
	var ids []string
	for _, d := range r.body["data"].([]any) {
		ids = append(ids, d.(map[string]any)["target_id"].(string)+" "+d.(map[string]any)["action"].(string))
	}
	return ids
}

func TestAuditLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	created := e.doH("POST", "/api-keys", e.keyA, map[string]any{"name": "ci"}, map[string]string{"User-Agent": "audit-test/1"})
	require.Equal(t, 201, created.status, string(created.raw))
	ci := created.body["id"].(string)
	sending := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "s", "permission": "sending_access"})
	require.Equal(t, 201, sending.status)
	require.Equal(t, 200, e.do("DELETE", "/api-keys/"+ci, e.keyA, nil).status)
	other := e.do("POST", "/api-keys", e.keyB, map[string]any{"name": "b"})
	require.Equal(t, 201, other.status)
	sid := sending.body["id"].(string)

	// Newest first, team A's only.
	all := e.do("GET", "/audit-log", e.keyA, nil)
	require.Equal(t, []string{ci + " api_key.revoke", sid + " api_key.create", ci + " api_key.create"}, auditIDs(t, all))
	last := all.body["data"].([]any)[2].(map[string]any)
	require.Equal(t, "audit-test/1", last["user_agent"])
	require.Equal(t, "127.0.0.1", last["client_address"])
	require.Equal(t, "api_key", last["actor_type"])
	require.Equal(t, "success", last["outcome"])
	require.Equal(t, map[string]any{"permission": "full_access"}, last["detail"])
	require.Equal(t, []string{other.body["id"].(string) + " api_key.create"}, auditIDs(t, e.do("GET", "/audit-log", e.keyB, nil)))

	// Cursors.
	p1 := e.do("GET", "/audit-log?limit=2", e.keyA, nil)
	require.Len(t, auditIDs(t, p1), 2)
	require.Equal(t, true, p1.body["has_more"])
	second := p1.body["data"].([]any)[1].(map[string]any)["id"].(string)
	p2 := e.do("GET", "/audit-log?limit=2&after="+second, e.keyA, nil)
	require.Equal(t, []string{ci + " api_key.create"}, auditIDs(t, p2))
	require.Equal(t, false, p2.body["has_more"])
	require.Len(t, auditIDs(t, e.do("GET", "/audit-log?before="+second, e.keyA, nil)), 1)

	// Filters.
	require.Equal(t, []string{ci + " api_key.revoke"}, auditIDs(t, e.do("GET", "/audit-log?action=api_key.revoke", e.keyA, nil)))
	require.Len(t, auditIDs(t, e.do("GET", "/audit-log?target_id="+ci, e.keyA, nil)), 2)
	actor := last["actor_id"].(string)
	require.Len(t, auditIDs(t, e.do("GET", "/audit-log?actor_id="+actor, e.keyA, nil)), 3)
	require.Empty(t, auditIDs(t, e.do("GET", "/audit-log?actor_id="+actor, e.keyB, nil)))
	at := url.QueryEscape(last["created_at"].(string))
	require.Len(t, auditIDs(t, e.do("GET", "/audit-log?to="+at, e.keyA, nil)), 0)
	require.Len(t, auditIDs(t, e.do("GET", "/audit-log?from="+at, e.keyA, nil)), 3)

	requireError(t, e.do("GET", "/audit-log?action=nope", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/audit-log?from=yesterday", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/audit-log?actor_id=x", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/audit-log", sending.body["token"].(string), nil), 401, "restricted_api_key")
	requireError(t, e.do("GET", "/audit-log", "", nil), 401, "missing_api_key")
}

func TestAuditLogCoversAPIChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://hooks.example.com/x", "events": []string{"email.sent"}})
	require.Equal(t, 201, w.status, string(w.raw))
	wid := w.body["id"].(string)
	require.Equal(t, 200, e.do("POST", "/webhooks/"+wid+"/signing-secret/rotate", e.keyA, nil).status)
	require.Equal(t, 200, e.do("DELETE", "/webhooks/"+wid, e.keyA, nil).status)
	sp := e.do("POST", "/suppressions", e.keyA, map[string]any{"email": "gone@example.com"})
	require.Equal(t, 201, sp.status, string(sp.raw))
	spID := sp.body["id"].(string)
	require.Equal(t, 200, e.do("DELETE", "/suppressions/"+spID, e.keyA, nil).status)
	r := e.do("GET", "/audit-log", e.keyA, nil)
	require.Equal(t, []string{spID + " suppression.delete", spID + " suppression.create", wid + " webhook.delete",
		wid + " webhook.rotate_secret", wid + " webhook.create"}, auditIDs(t, r))
	require.NotContains(t, string(r.raw), "gone@example.com", "no addresses in the audit log")
}

// An action whose audit entry cannot be written is not answered as a
// success: the caller sees a 500 with an error id, and the failure is
// logged.
func TestAuditWriteFailureIsNotASilentSuccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, dbURL := storetest.NewWithURL(t)
	e := newEnvWith(t, envOptions{store: st})
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `ALTER TABLE audit_chain RENAME TO audit_chain_gone`)
	require.NoError(t, err)
	requireError(t, e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "ci"}), 500, "application_error")
}
