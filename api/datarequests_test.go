package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestDataRequestsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const addr = "Dana.Subject@Example.org"

	// Validation.
	requireError(t, e.do("POST", "/data-requests", e.keyA, map[string]any{"type": "export"}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/data-requests", e.keyA, map[string]any{"email": addr}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/data-requests", e.keyA, map[string]any{"email": "nope", "type": "export"}),
		422, "validation_error")
	requireError(t, e.do("POST", "/data-requests", e.keyA, map[string]any{"email": "Dana <" + addr + ">", "type": "export"}),
		422, "validation_error")
	requireError(t, e.do("POST", "/data-requests", e.keyA, map[string]any{"email": addr, "type": "delete"}),
		422, "validation_error")
	// Only full-access keys.
	requireError(t, e.do("POST", "/data-requests", sendingKey(t, e), map[string]any{"email": addr, "type": "export"}),
		401, "restricted_api_key")
	requireError(t, e.do("GET", "/data-requests", "", nil), 401, "missing_api_key")

	r := e.do("POST", "/data-requests", e.keyA, map[string]any{"email": addr, "type": "erasure"})
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "data_request", r.body["object"])
	id := r.body["id"].(string)
	require.Positive(t, e.notify.n.Load(), "the outbox is woken")

	g := e.do("GET", "/data-requests/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "erasure", g.body["type"])
	require.Equal(t, "queued", g.body["status"])
	require.Nil(t, g.body["download_url"])
	require.Equal(t, map[string]any{}, g.body["found"])
	require.NotContains(t, strings.ToLower(string(g.raw)), "dana", "the request never shows the address")

	// Team isolation.
	requireError(t, e.do("GET", "/data-requests/"+id, e.keyB, nil), 404, "not_found")
	lb := e.do("GET", "/data-requests", e.keyB, nil)
	require.Equal(t, 200, lb.status)
	require.Empty(t, lb.body["data"])
	la := e.do("GET", "/data-requests?limit=1", e.keyA, nil)
	require.Len(t, la.body["data"], 1)
	requireError(t, e.do("GET", "/data-requests/not-a-uuid", e.keyA, nil), 422, "invalid_parameter")
	requireError(t, e.do("GET", "/data-requests/"+uuid.NewString(), e.keyA, nil), 404, "not_found")

	// The address is stored sealed, the outbox holds the request, the
	// audit log names its id only.
	dr, err := e.store.Privacy.DataRequest(ctx, e.teamA, uuid.MustParse(id))
	require.NoError(t, err)
	require.NotContains(t, strings.ToLower(string(dr.Address)), "dana")
	n, err := storetest.OutboxLen(ctx, e.store)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	audits := e.do("GET", "/audit-log?action=data_request.create", e.keyA, nil)
	require.Len(t, audits.body["data"], 1, string(audits.raw))
	entry := audits.body["data"].([]any)[0].(map[string]any)
	require.Equal(t, id, entry["target_id"])
	require.NotContains(t, strings.ToLower(string(audits.raw)), "dana")

	// The request log keeps no body of a data request.
	require.NoError(t, e.logs.Close(ctx))
	logs, _, err := e.store.Insights.ListRequestLogs(ctx, e.teamA, store.LogFilter{}, store.Page{Limit: 100})
	require.NoError(t, err)
	for _, l := range logs {
		full, err := e.store.Insights.GetRequestLog(ctx, e.teamA, l.ID)
		require.NoError(t, err)
		if full.RequestBody != nil {
			require.NotContains(t, strings.ToLower(*full.RequestBody), "dana", full.Path)
		}
	}

	// Downloads need a valid signature.
	requireError(t, e.do("GET", "/data-requests/"+id+"/download", "", nil), 404, "not_found")
	requireError(t, e.do("GET", "/data-requests/"+id+"/download?team="+e.teamA.String()+"&expires=9999999999&signature=x",
		"", nil), 404, "not_found")
}
