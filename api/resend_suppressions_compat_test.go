package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"
)

// TestResendGoSDKSuppressions drives the suppression list with Resend's
// official Go SDK, unchanged.
func TestResendGoSDKSuppressions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.goSDK(t, e.keyA)

	added, err := c.Suppressions.AddWithContext(ctx, &resend.AddSuppressionRequest{Email: "ann@example.com"})
	require.NoError(t, err)
	require.Equal(t, "suppression", added.Object)
	got, err := c.Suppressions.GetWithContext(ctx, "ann@example.com")
	require.NoError(t, err)
	require.Equal(t, added.Id, got.Id)
	require.Equal(t, resend.SuppressionOriginManual, got.Origin)
	require.Nil(t, got.SourceId)

	batch, err := c.Suppressions.Batch.AddWithContext(ctx, &resend.BatchAddSuppressionsRequest{
		Emails: []string{"bob@example.com", "cy@example.com"}})
	require.NoError(t, err)
	require.Len(t, batch.Data, 2)
	list, err := c.Suppressions.ListWithContext(ctx, &resend.ListSuppressionsOptions{Origin: resend.SuppressionOriginManual})
	require.NoError(t, err)
	require.Len(t, list.Data, 3)
	list, err = c.Suppressions.ListWithContext(ctx, &resend.ListSuppressionsOptions{Origin: resend.SuppressionOriginBounce})
	require.NoError(t, err)
	require.Empty(t, list.Data)

	removed, err := c.Suppressions.Batch.RemoveWithContext(ctx, &resend.BatchRemoveSuppressionsRequest{
		Ids: []string{batch.Data[0].Id}})
	require.NoError(t, err)
	require.Equal(t, []resend.RemoveSuppressionResponse{{Object: "suppression", Id: batch.Data[0].Id, Deleted: true}},
		removed.Data)
	removed, err = c.Suppressions.Batch.RemoveWithContext(ctx, &resend.BatchRemoveSuppressionsRequest{
		Emails: []string{"cy@example.com"}})
	require.NoError(t, err)
	require.True(t, removed.Data[0].Deleted)
	one, err := c.Suppressions.RemoveWithContext(ctx, added.Id)
	require.NoError(t, err)
	require.True(t, one.Deleted)
	_, err = c.Suppressions.GetWithContext(ctx, added.Id)
	require.Error(t, err)
}

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
