package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResendNodeSDKSuppressions runs testdata/resend-node/suppressions.cjs,
// which drives the suppression list (add, get by id and by address, list
// with the origin filter, batch add and remove, remove), reads the
// suppression.added and suppression.removed events from a webhook's log,
// and lists an event's attempts in Resend's shape, with Resend's official
// Node SDK.
func TestResendNodeSDKSuppressions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	r := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": recv.URL + "/hook",
		"events": []string{"suppression.added", "suppression.removed"}})
	require.Equal(t, 201, r.status, string(r.raw))
	hook := r.body["id"].(string)
	// Another team's endpoint for the same events sees nothing of team A's.
	rb := e.do("POST", "/webhooks", e.keyB, map[string]any{"endpoint": recv.URL + "/other",
		"events": []string{"suppression.added", "suppression.removed"}})
	require.Equal(t, 201, rb.status, string(rb.raw))
	tr := e.do("POST", "/webhooks/"+hook+"/test", e.keyA, map[string]any{"type": "suppression.added"})
	require.Equal(t, 200, tr.status, string(tr.raw))

	out := runResendNode(t, "suppressions.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA,
		"WEBHOOK_ID="+hook, "TEST_EVENT_ID="+tr.body["event_id"].(string))
	require.Contains(t, string(out), "ok")

	evB := e.do("GET", "/webhooks/"+rb.body["id"].(string)+"/events", e.keyB, nil)
	require.Equal(t, 200, evB.status, string(evB.raw))
	require.Empty(t, evB.body["data"], "team A's changes reach no endpoint of team B")
	lb := e.do("GET", "/suppressions", e.keyB, nil)
	require.Equal(t, 200, lb.status, string(lb.raw))
	require.Empty(t, lb.body["data"])
}

// TestSuppressionsHTTP covers what the SDK does not send: the error
// answers of the new endpoints, another team's entries, and the fields
// kept beside Resend's.
func TestSuppressionsHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	requireError(t, e.do("POST", "/suppressions/batch/add", e.keyA, map[string]any{}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/suppressions/batch/add", e.keyA, map[string]any{"emails": "a@example.com"}), 422,
		"validation_error")
	requireError(t, e.do("POST", "/suppressions/batch/add", e.keyA, map[string]any{"emails": []string{}}), 422,
		"validation_error")
	requireError(t, e.do("POST", "/suppressions/batch/remove", e.keyA, map[string]any{}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/suppressions/batch/remove", e.keyA, map[string]any{"ids": []string{"x"}}), 422,
		"invalid_parameter")
	requireError(t, e.do("POST", "/suppressions/batch/remove", e.keyA, map[string]any{"ids": []string{},
		"emails": []string{"a@example.com"}}), 422, "validation_error")
	requireError(t, e.do("GET", "/suppressions/nothing", e.keyA, nil), 422, "invalid_parameter")
	requireError(t, e.do("GET", "/suppressions?origin=spam", e.keyA, nil), 422, "validation_error")

	add := e.do("POST", "/suppressions/batch/add", e.keyA, map[string]any{"emails": []string{"Ann@example.com"}})
	require.Equal(t, 201, add.status, string(add.raw))
	row := add.body["data"].([]any)[0].(map[string]any)
	id := row["id"].(string)
	require.Equal(t, "suppression", row["object"])
	require.Equal(t, "manual", row["origin"])
	require.Equal(t, "manual", row["reason"], "Posthaste's name of the origin stays")
	require.Contains(t, row, "source_id")
	require.Contains(t, row, "email_id")

	for _, ref := range []string{id, "ann@example.com"} {
		requireError(t, e.do("GET", "/suppressions/"+ref, e.keyB, nil), 404, "not_found")
	}
	rm := e.do("POST", "/suppressions/batch/remove", e.keyB, map[string]any{"ids": []string{id}})
	require.Equal(t, 200, rm.status, string(rm.raw))
	require.Equal(t, []any{map[string]any{"object": "suppression", "id": id, "deleted": false}}, rm.body["data"])
	rm = e.do("POST", "/suppressions/batch/remove", e.keyB, map[string]any{"emails": []string{"ann@example.com"}})
	require.Equal(t, 200, rm.status, string(rm.raw))
	require.Equal(t, []any{map[string]any{"object": "suppression", "id": nil, "email": "ann@example.com",
		"deleted": false}}, rm.body["data"])
	require.Equal(t, 200, e.do("GET", "/suppressions/"+id, e.keyA, nil).status, "still listed for team A")
}
