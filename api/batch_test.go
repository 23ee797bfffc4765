package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func sandboxTo(i int) map[string]any {
	return map[string]any{
		"from":    "Acme <onboarding@posthaste.test>",
		"to":      fmt.Sprintf("delivered+%d@posthaste.test", i),
		"subject": fmt.Sprintf("Hello %d", i),
		"text":    "Hi",
	}
}

func countEmails(t *testing.T, e *env, key string) int {
	t.Helper()
	r := e.do("GET", "/emails?limit=100", key, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	return len(r.body["data"].([]any))
}

func TestIdempotentSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := map[string]string{"Idempotency-Key": "welcome-user/123456789"}
	first := e.doH("POST", "/emails", e.keyA, sandboxSend, key)
	require.Equal(t, 200, first.status, string(first.raw))
	// The same request again, serialized differently.
	again := e.doH("POST", "/emails", e.keyA, `{"subject":"Hello","from":"Acme <onboarding@posthaste.test>",
		"html":"<p>Hi</p>","to":["delivered@posthaste.test"],"tags":[{"name":"category","value":"welcome"}]}`, key)
	require.Equal(t, 200, again.status, string(again.raw))
	require.Equal(t, first.body["id"], again.body["id"])
	require.Equal(t, 1, countEmails(t, e, e.keyA))
	require.Equal(t, int64(1), e.notify.n.Load(), "a replay has no side effects")

	other := map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test", "subject": "Other", "text": "x"}
	requireError(t, e.doH("POST", "/emails", e.keyA, other, key), 409, "invalid_idempotent_request")
	requireError(t, e.doH("POST", "/emails/batch", e.keyA, []any{sandboxSend}, key), 409, "invalid_idempotent_request")
	// Keys are per team.
	b := e.doH("POST", "/emails", e.keyB, sandboxSend, key)
	require.Equal(t, 200, b.status, string(b.raw))
	require.NotEqual(t, first.body["id"], b.body["id"])

	requireError(t, e.doH("POST", "/emails", e.keyA, sandboxSend, map[string]string{"Idempotency-Key": ""}), 400, "invalid_idempotency_key")
	requireError(t, e.doH("POST", "/emails", e.keyA, sandboxSend,
		map[string]string{"Idempotency-Key": strings.Repeat("k", 257)}), 400, "invalid_idempotency_key")
	ok := e.doH("POST", "/emails", e.keyA, sandboxSend, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)})
	require.Equal(t, 200, ok.status, string(ok.raw))

	// A request that failed validation is not remembered.
	fix := map[string]string{"Idempotency-Key": "fix-me"}
	bad := map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test", "text": "x"}
	requireError(t, e.doH("POST", "/emails", e.keyA, bad, fix), 422, "missing_required_field")
	bad["subject"] = "Fixed"
	r := e.doH("POST", "/emails", e.keyA, bad, fix)
	require.Equal(t, 200, r.status, string(r.raw))
}

// TestIdempotentConcurrentSends fires identical requests with one key at
// once: one email is accepted, and every answer is its id or a 409
// concurrent_idempotent_requests.
func TestIdempotentConcurrentSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := map[string]string{"Idempotency-Key": "burst"}
	const n = 100
	results := make([]resp, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.try("POST", "/emails", e.keyA, sandboxSend, key)
		}()
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	ids := map[any]int{}
	concurrent := 0
	for _, r := range results {
		switch r.status {
		case 200:
			ids[r.body["id"]]++
		case 409:
			require.Equal(t, "concurrent_idempotent_requests", r.body["name"], string(r.raw))
			concurrent++
		default:
			t.Fatalf("unexpected answer %d: %s", r.status, r.raw)
		}
	}
	require.Len(t, ids, 1, "one id for every success")
	t.Logf("%d answers with the id, %d concurrent", n-concurrent, concurrent)
	require.Equal(t, 1, countEmails(t, e, e.keyA))
	require.Equal(t, int64(1), e.notify.n.Load())
}

func TestBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	batch := []any{sandboxTo(0), sandboxTo(1), sandboxTo(2)}
	r := e.do("POST", "/emails/batch", e.keyA, batch)
	require.Equal(t, 200, r.status, string(r.raw))
	data := r.body["data"].([]any)
	require.Len(t, data, 3)
	require.NotContains(t, r.body, "errors", "strict mode has no errors list")
	for i, d := range data {
		g := e.do("GET", "/emails/"+d.(map[string]any)["id"].(string), e.keyA, nil)
		require.Equal(t, 200, g.status)
		require.Equal(t, fmt.Sprintf("Hello %d", i), g.body["subject"], "ids in request order")
		require.Equal(t, "queued", g.body["last_event"])
	}
	require.Equal(t, int64(1), e.notify.n.Load())

	// Strict: one invalid email rejects the batch and names its index.
	bad := []any{sandboxTo(0), sandboxTo(1), map[string]any{"from": "onboarding@posthaste.test", "to": "x", "subject": "s", "text": "t"}}
	res := e.do("POST", "/emails/batch", e.keyA, bad)
	requireError(t, res, 422, "validation_error")
	require.Contains(t, res.body["message"], "index 2")
	res = e.doH("POST", "/emails/batch", e.keyA, bad, map[string]string{"x-batch-validation": "strict"})
	requireError(t, res, 422, "validation_error")
	require.Equal(t, 3, countEmails(t, e, e.keyA), "nothing of a refused batch is written")

	// Permissive: the valid ones are accepted.
	bad = append(bad, "not an object", map[string]any{"from": "someone@unverified.example", "to": "a@b.test", "subject": "s", "text": "t"})
	res = e.doH("POST", "/emails/batch", e.keyA, bad, map[string]string{"x-batch-validation": "permissive"})
	require.Equal(t, 200, res.status, string(res.raw))
	require.Len(t, res.body["data"], 2)
	errs := res.body["errors"].([]any)
	require.Len(t, errs, 3)
	for i, want := range []int{2, 3, 4} {
		require.Equal(t, float64(want), errs[i].(map[string]any)["index"])
		require.NotEmpty(t, errs[i].(map[string]any)["message"])
	}
	require.Equal(t, 5, countEmails(t, e, e.keyA))
	res = e.doH("POST", "/emails/batch", e.keyA, []any{sandboxTo(0)}, map[string]string{"x-batch-validation": "permissive"})
	require.Equal(t, []any{}, res.body["errors"], "permissive mode always lists errors")
	res = e.doH("POST", "/emails/batch", e.keyA, []any{"not an object"}, map[string]string{"x-batch-validation": "permissive"})
	require.Equal(t, 200, res.status, string(res.raw))
	require.Equal(t, []any{}, res.body["data"], "a batch without a valid email accepts none")
	require.Len(t, res.body["errors"], 1)
	require.Equal(t, 6, countEmails(t, e, e.keyA))

	withAttachment := sandboxTo(1)
	withAttachment["attachments"] = []any{map[string]any{"filename": "a.txt", "content": "aGk="}}
	res = e.doH("POST", "/emails/batch", e.keyA, []any{sandboxTo(0), withAttachment}, map[string]string{"x-batch-validation": "permissive"})
	requireError(t, res, 422, "validation_error")
	require.Contains(t, res.body["message"], "Attachments are not supported")
	requireError(t, e.do("POST", "/emails/batch", e.keyA, []any{}), 422, "validation_error")
	big := make([]any, 101)
	for i := range big {
		big[i] = sandboxTo(i)
	}
	requireError(t, e.do("POST", "/emails/batch", e.keyA, big), 422, "validation_error")
	requireError(t, e.do("POST", "/emails/batch", e.keyA, sandboxTo(0)), 422, "validation_error")
	requireError(t, e.do("POST", "/emails/batch", e.keyA, "[{"), 422, "validation_error")
	requireError(t, e.doH("POST", "/emails/batch", e.keyA, []any{sandboxTo(0)}, map[string]string{"x-batch-validation": "lenient"}),
		422, "validation_error")

	// Idempotent batches: the same ids again, one set of emails.
	key := map[string]string{"Idempotency-Key": "batch-1"}
	first := e.doH("POST", "/emails/batch", e.keyA, []any{sandboxTo(7), sandboxTo(8)}, key)
	require.Equal(t, 200, first.status, string(first.raw))
	again := e.doH("POST", "/emails/batch", e.keyA, []any{sandboxTo(7), sandboxTo(8)}, key)
	require.Equal(t, first.raw, again.raw)
	require.Equal(t, 8, countEmails(t, e, e.keyA))
	requireError(t, e.doH("POST", "/emails/batch", e.keyA, []any{sandboxTo(8), sandboxTo(7)}, key), 409, "invalid_idempotent_request")

	// Per-email schedules in a batch.
	sched := sandboxTo(9)
	sched["scheduled_at"] = "in 1 hour"
	res = e.do("POST", "/emails/batch", e.keyA, []any{sandboxTo(0), sched})
	require.Equal(t, 200, res.status, string(res.raw))
	g := e.do("GET", "/emails/"+res.body["data"].([]any)[1].(map[string]any)["id"].(string), e.keyA, nil)
	require.Equal(t, "scheduled", g.body["last_event"])
	require.NotNil(t, g.body["scheduled_at"])
}

// TestBatchScheduledEmailsQueueTheirWebhooks: every scheduled email of a
// batch gets its email.scheduled webhook in the accepting transaction,
// the others none.
func TestBatchScheduledEmailsQueueTheirWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "https://hooks.example/",
		"events": []string{"email.scheduled", "email.sent"}})
	require.Equal(t, 201, hook.status, string(hook.raw))
	batch := []any{sandboxTo(0), sandboxTo(1), sandboxTo(2), sandboxTo(3)}
	for _, i := range []int{0, 2, 3} {
		batch[i].(map[string]any)["scheduled_at"] = "in 1 hour"
	}
	res := e.do("POST", "/emails/batch", e.keyA, batch)
	require.Equal(t, 200, res.status, string(res.raw))
	var want []string
	for _, i := range []int{0, 2, 3} {
		want = append(want, res.body["data"].([]any)[i].(map[string]any)["id"].(string))
	}
	events := e.do("GET", "/webhooks/"+hook.body["id"].(string)+"/events", e.keyA, nil)
	require.Equal(t, 200, events.status, string(events.raw))
	var got []string
	for _, m := range events.body["data"].([]any) {
		one := e.do("GET", "/webhooks/"+hook.body["id"].(string)+"/events/"+m.(map[string]any)["id"].(string), e.keyA, nil)
		require.Equal(t, "email.scheduled", one.body["type"])
		got = append(got, one.body["payload"].(map[string]any)["data"].(map[string]any)["email_id"].(string))
	}
	require.ElementsMatch(t, want, got)
}

func TestRescheduleAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	send := sandboxTo(0)
	send["scheduled_at"] = "in 1 hour"
	r := e.do("POST", "/emails", e.keyA, send)
	require.Equal(t, 200, r.status, string(r.raw))
	id := r.body["id"].(string)
	g := e.do("GET", "/emails/"+id, e.keyA, nil)
	require.Equal(t, "scheduled", g.body["last_event"])
	first, err := time.Parse(time.RFC3339Nano, g.body["scheduled_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), first, 10*time.Second)

	// The Resend SDKs send the id in the body too.
	u := e.do("PATCH", "/emails/"+id, e.keyA, map[string]any{"id": id, "scheduled_at": "2099-01-01T00:00:00Z"})
	requireError(t, u, 422, "validation_error")
	require.Contains(t, u.body["message"], "30 days")
	u = e.do("PATCH", "/emails/"+id, e.keyA, map[string]any{"id": id, "scheduled_at": "in 2 hours"})
	require.Equal(t, 200, u.status, string(u.raw))
	require.Equal(t, map[string]any{"object": "email", "id": id}, u.body)
	g = e.do("GET", "/emails/"+id, e.keyA, nil)
	moved, err := time.Parse(time.RFC3339Nano, g.body["scheduled_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), moved, 10*time.Second)
	require.Equal(t, "scheduled", g.body["last_event"])

	requireError(t, e.do("PATCH", "/emails/"+id, e.keyA, map[string]any{}), 422, "missing_required_field")
	requireError(t, e.do("PATCH", "/emails/"+id, e.keyA, "nope"), 422, "validation_error")
	requireError(t, e.do("PATCH", "/emails/"+id, e.keyA, map[string]any{"scheduled_at": "in a while, crocodile"}), 422, "validation_error")
	requireError(t, e.do("PATCH", "/emails/"+id, e.keyB, map[string]any{"scheduled_at": "in 3 hours"}), 404, "not_found")
	requireError(t, e.do("POST", "/emails/"+id+"/cancel", e.keyB, nil), 404, "not_found")
	requireError(t, e.do("POST", "/emails/"+uuid.NewString()+"/cancel", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("POST", "/emails/nope/cancel", e.keyA, nil), 422, "invalid_parameter")

	c := e.do("POST", "/emails/"+id+"/cancel", e.keyA, nil)
	require.Equal(t, 200, c.status, string(c.raw))
	require.Equal(t, map[string]any{"object": "email", "id": id}, c.body)
	g = e.do("GET", "/emails/"+id, e.keyA, nil)
	require.Equal(t, "canceled", g.body["last_event"])
	require.Equal(t, "canceled", g.body["recipients"].([]any)[0].(map[string]any)["status"])
	u = e.do("PATCH", "/emails/"+id, e.keyA, map[string]any{"scheduled_at": "in 3 hours"})
	requireError(t, u, 422, "validation_error")
	require.Contains(t, u.body["message"], "canceled")
	requireError(t, e.do("POST", "/emails/"+id+"/cancel", e.keyA, nil), 422, "validation_error")

	// An email that is not scheduled (or has left) cannot be changed.
	now := e.do("POST", "/emails", e.keyA, sandboxSend).body["id"].(string)
	requireError(t, e.do("PATCH", "/emails/"+now, e.keyA, map[string]any{"scheduled_at": "in 1 hour"}), 422, "validation_error")
	requireError(t, e.do("POST", "/emails/"+now+"/cancel", e.keyA, nil), 422, "validation_error")
	require.NoError(t, e.store.Emails.RecordEvents(context.Background(), uuid.MustParse(now), []store.Event{{Type: store.EventSent}}))
	u = e.do("POST", "/emails/"+now+"/cancel", e.keyA, nil)
	requireError(t, u, 422, "validation_error")
	require.Contains(t, u.body["message"], "already been sent")
}
