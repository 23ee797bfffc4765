package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// waker records the endpoints whose delivery the API wakes; the real one
// (package worker) is exercised by the end-to-end tests.
type waker struct {
	mu    sync.Mutex
	woken []string
}

func (w *waker) Wake(_ context.Context, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.woken = append(w.woken, id)
	return nil
}

func (w *waker) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.woken...)
}

func TestWebhookValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok := []string{"email.sent"}
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"events": ok}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://x.example"}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "ftp://x.example/", "events": ok}), 422, "validation_error")
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "/relative", "events": ok}), 422, "validation_error")
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://x.example", "events": []string{}}), 422, "validation_error")
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://x.example", "events": []string{"email.nope"}}), 422, "validation_error")
	requireError(t, e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://x.example", "events": "email.sent"}), 422, "validation_error")

	r := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://x.example/hook", "events": ok})
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)
	requireError(t, e.do("PATCH", "/webhooks/"+id, e.keyA, map[string]any{"status": "paused"}), 422, "validation_error")
	requireError(t, e.do("PATCH", "/webhooks/"+id, e.keyA, map[string]any{"events": []string{}}), 422, "validation_error")
	requireError(t, e.do("GET", "/webhooks/"+id+"/events/msg_nope", e.keyA, nil), 422, "invalid_parameter")
	requireError(t, e.do("POST", "/webhooks/"+id+"/test", e.keyA, map[string]any{"type": "nope"}), 422, "validation_error")
}

func TestWebhookLifecycleAndIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var got []http.Header
	var bodies [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Clone())
		bodies = append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	r := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": recv.URL + "/hook",
		"events": []string{"email.sent", "domain.created", "email.sent"}})
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "webhook", r.body["object"])
	id, secret := r.body["id"].(string), r.body["signing_secret"].(string)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/=]{32}$`, secret)

	g := e.do("GET", "/webhooks/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status)
	require.Equal(t, secret, g.body["signing_secret"])
	require.Equal(t, []any{"email.sent", "domain.created"}, g.body["events"], "duplicates dropped")
	require.Equal(t, "enabled", g.body["status"])
	l := e.do("GET", "/webhooks", e.keyA, nil)
	require.Len(t, l.body["data"], 1)
	require.Empty(t, e.do("GET", "/webhooks", e.keyB, nil).body["data"])

	// Another team's ids are 404 everywhere.
	for _, c := range []struct{ method, path string }{
		{"GET", "/webhooks/" + id}, {"PATCH", "/webhooks/" + id}, {"DELETE", "/webhooks/" + id},
		{"POST", "/webhooks/" + id + "/signing-secret/rotate"}, {"POST", "/webhooks/" + id + "/test"},
		{"GET", "/webhooks/" + id + "/events"},
	} {
		requireError(t, e.do(c.method, c.path, e.keyB, map[string]any{}), 404, "not_found")
	}

	// A domain event reaches the log of a subscribed endpoint.
	require.Equal(t, 201, e.do("POST", "/domains", e.keyA, map[string]any{"name": "hooks.example"}).status)
	ev := e.do("GET", "/webhooks/"+id+"/events", e.keyA, nil)
	require.Equal(t, 200, ev.status, string(ev.raw))
	require.Len(t, ev.body["data"], 1)
	msg := ev.body["data"].([]any)[0].(map[string]any)
	require.Equal(t, "domain.created", msg["type"])
	require.Equal(t, "pending", msg["status"])
	one := e.do("GET", "/webhooks/"+id+"/events/"+msg["id"].(string), e.keyA, nil)
	require.Equal(t, 200, one.status, string(one.raw))
	require.Equal(t, "webhook_event", one.body["object"])
	require.NotNil(t, one.body["next_attempt_at"])
	require.Equal(t, "hooks.example", one.body["payload"].(map[string]any)["data"].(map[string]any)["name"])
	requireError(t, e.do("GET", "/webhooks/"+id+"/events/msg_"+uuid.NewString(), e.keyA, nil), 404, "not_found")

	// A test event is sent now, signed, and answered with its attempt.
	tr := e.do("POST", "/webhooks/"+id+"/test", e.keyA, nil)
	require.Equal(t, 200, tr.status, string(tr.raw))
	require.EqualValues(t, 204, tr.body["response_status"])
	require.Nil(t, tr.body["error"])
	mu.Lock()
	require.Len(t, got, 1)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.Equal(t, tr.body["event_id"], got[0].Get("webhook-id"))
	require.NoError(t, wh.Verify(bodies[0], got[0]))
	mu.Unlock()
	at := e.do("GET", "/webhooks/"+id+"/events/"+tr.body["event_id"].(string)+"/attempts", e.keyA, nil)
	require.Equal(t, 200, at.status, string(at.raw))
	require.Len(t, at.body["data"], 1)
	// Resend's fields, with Posthaste's own kept beside them.
	att := at.body["data"].([]any)[0].(map[string]any)
	require.NotEmpty(t, att["id"])
	require.EqualValues(t, 204, att["http_status_code"])
	require.Equal(t, "", att["response"])
	require.Equal(t, tr.body["attempted_at"], att["sent_at"])
	require.EqualValues(t, 204, att["response_status"])
	require.Contains(t, att, "response_body")
	require.Contains(t, att, "duration_ms")

	// Rotation: a new secret is shown from now on.
	rot := e.do("POST", "/webhooks/"+id+"/signing-secret/rotate", e.keyA, nil)
	require.Equal(t, 200, rot.status)
	require.NotEqual(t, secret, rot.body["signing_secret"])
	require.Equal(t, rot.body["signing_secret"], e.do("GET", "/webhooks/"+id, e.keyA, nil).body["signing_secret"])

	// Disabling refuses replays and wakes the delivery (which then ends).
	require.Equal(t, 200, e.do("PATCH", "/webhooks/"+id, e.keyA, map[string]any{"status": "disabled"}).status)
	require.Equal(t, []string{id}, e.waker.list())
	requireError(t, e.do("POST", "/webhooks/"+id+"/events/"+msg["id"].(string)+"/replay", e.keyA, nil), 422, "validation_error")
	require.Equal(t, 200, e.do("PATCH", "/webhooks/"+id, e.keyA, map[string]any{"status": "enabled",
		"endpoint": recv.URL + "/other"}).status)
	rp := e.do("POST", "/webhooks/"+id+"/events/"+msg["id"].(string)+"/replay", e.keyA, nil)
	require.Equal(t, 200, rp.status, string(rp.raw))
	require.Equal(t, msg["id"], rp.body["id"])

	d := e.do("DELETE", "/webhooks/"+id, e.keyA, nil)
	require.Equal(t, 200, d.status)
	require.Equal(t, true, d.body["deleted"])
	requireError(t, e.do("GET", "/webhooks/"+id, e.keyA, nil), 404, "not_found")
}
