package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// broadcastWaker records the broadcasts Cancel wakes.
type broadcastWaker struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

func (w *broadcastWaker) WakeBroadcast(_ context.Context, id uuid.UUID) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, id)
	return nil
}

func (w *broadcastWaker) woken() []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids)
}

// newBroadcastEnv is newEnv whose server also serves /broadcasts (the
// shared env leaves api.Config.Broadcasts nil): requests under
// /broadcasts go to a server with a broadcast service on the same
// database, every other request to the env's own server.
func newBroadcastEnv(t *testing.T) (*env, *broadcastWaker) {
	t.Helper()
	e := newEnv(t)
	sub := submit.New(submit.Config{Store: submit.StoreOf(e.store), Notifier: e.notify, PublicURL: "https://posthaste.example"})
	w := &broadcastWaker{}
	h, err := api.New(api.Config{Auth: auth.NewAuthenticator(e.store.Accounts, time.Second), Submit: sub,
		Broadcasts: broadcast.NewService(broadcast.Config{Store: e.store, Submit: sub, Waker: w})})
	require.NoError(t, err)
	rest, checked := e.srv.Config.Handler, specCheck(t, h)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broadcasts" || strings.HasPrefix(r.URL.Path, "/broadcasts/") {
			checked.ServeHTTP(rw, r)
			return
		}
		rest.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	e.srv = srv
	return e, w
}

const broadcastFrom = "Acme <onboarding@posthaste.test>"

// newSegment creates a segment of the key's team and returns its id.
func (e *env) newSegment(key, name string) string {
	e.t.Helper()
	r := e.do("POST", "/segments", key, map[string]any{"name": name})
	require.Equal(e.t, 201, r.status, string(r.raw))
	return r.body["id"].(string)
}

// newBroadcast creates a broadcast with body and returns its id.
func (e *env) newBroadcast(key string, body map[string]any) string {
	e.t.Helper()
	r := e.do("POST", "/broadcasts", key, body)
	require.Equal(e.t, 201, r.status, string(r.raw))
	require.Equal(e.t, "broadcast", r.body["object"])
	id := r.body["id"].(string)
	require.NoError(e.t, uuid.Validate(id))
	return id
}

func draftBody(segment string) map[string]any {
	return map[string]any{"name": "November news", "segment_id": segment, "from": broadcastFrom,
		"subject": "News for {{{FIRST_NAME|you}}}", "html": "<p>Hi {{{FIRST_NAME|there}}}</p>", "text": "Hi",
		"reply_to": "replies@example.com", "preview_text": "What is new"}
}

// outboxBroadcasts returns the refs of the due outbox entries of kind
// broadcast, leaving every entry as it was.
func outboxBroadcasts(t *testing.T, st *store.Store) []uuid.UUID {
	t.Helper()
	var refs []uuid.UUID
	_, err := st.Webhooks.DrainOutbox(context.Background(), 1000, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		for _, it := range items {
			if it.Kind == store.OutboxBroadcast {
				refs = append(refs, it.Ref)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return refs
}

// TestBroadcastsLifecycle walks a draft through every route: create, get,
// list, update (absent fields kept, empty ids cleared), duplicate,
// delete, send scheduled (and the outbox entry it writes), the edits a
// sent broadcast refuses, and cancel.
func TestBroadcastsLifecycle(t *testing.T) {
	t.Parallel()
	e, w := newBroadcastEnv(t)
	seg := e.newSegment(e.keyA, "Newsletter")
	topic := e.do("POST", "/topics", e.keyA, map[string]any{"name": "News", "default_subscription": "opt_in"})
	require.Equal(t, 201, topic.status, string(topic.raw))
	topicID := topic.body["id"].(string)

	id := e.newBroadcast(e.keyA, draftBody(seg))
	g := e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "broadcast", g.body["object"])
	require.Equal(t, id, g.body["id"])
	require.Equal(t, "November news", g.body["name"])
	require.Equal(t, seg, g.body["segment_id"])
	require.Equal(t, seg, g.body["audience_id"])
	require.Nil(t, g.body["topic_id"])
	require.Equal(t, broadcastFrom, g.body["from"])
	require.Equal(t, "News for {{{FIRST_NAME|you}}}", g.body["subject"])
	require.Equal(t, []any{"replies@example.com"}, g.body["reply_to"])
	require.Equal(t, "What is new", g.body["preview_text"])
	require.Equal(t, "<p>Hi {{{FIRST_NAME|there}}}</p>", g.body["html"])
	require.Equal(t, "Hi", g.body["text"])
	require.Equal(t, "draft", g.body["status"])
	for _, k := range []string{"status_reason", "scheduled_at", "sent_at", "components"} {
		require.Contains(t, g.body, k)
		require.Nil(t, g.body[k], k)
	}
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, g.body["created_at"])
	require.Equal(t, map[string]any{"recipients": 0.0, "queued": 0.0, "sent": 0.0, "delivered": 0.0,
		"delivery_delayed": 0.0, "bounced": 0.0, "complained": 0.0, "suppressed": 0.0, "failed": 0.0,
		"canceled": 0.0, "opened": 0.0, "clicked": 0.0, "unsubscribed": 0.0}, g.body["counts"])

	l := e.do("GET", "/broadcasts", e.keyA, nil)
	require.Equal(t, 200, l.status, string(l.raw))
	require.Equal(t, "list", l.body["object"])
	require.Equal(t, false, l.body["has_more"])
	data := l.body["data"].([]any)
	require.Len(t, data, 1)
	item := data[0].(map[string]any)
	keys := make([]string, 0, len(item))
	for k := range item {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.Equal(t, []string{"audience_id", "created_at", "id", "name", "scheduled_at", "segment_id", "sent_at",
		"status", "topic_id"}, keys)
	require.Equal(t, "draft", item["status"])

	// Absent fields stay; an empty id clears.
	u := e.do("PATCH", "/broadcasts/"+id, e.keyA, map[string]any{"name": "December news", "topic_id": topicID})
	require.Equal(t, 200, u.status, string(u.raw))
	require.Equal(t, map[string]any{"id": id, "object": "broadcast"}, u.body)
	g = e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Equal(t, "December news", g.body["name"])
	require.Equal(t, topicID, g.body["topic_id"])
	require.Equal(t, seg, g.body["segment_id"])
	require.Equal(t, "<p>Hi {{{FIRST_NAME|there}}}</p>", g.body["html"])
	require.Equal(t, []any{"replies@example.com"}, g.body["reply_to"])
	require.Equal(t, 200, e.do("PATCH", "/broadcasts/"+id, e.keyA, map[string]any{"topic_id": "", "segment_id": ""}).status)
	g = e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Nil(t, g.body["topic_id"])
	require.Nil(t, g.body["segment_id"])
	require.Nil(t, g.body["audience_id"])
	// Without a segment it cannot be sent.
	requireError(t, e.do("POST", "/broadcasts/"+id+"/send", e.keyA, nil), 422, "validation_error")
	require.Equal(t, 200, e.do("PATCH", "/broadcasts/"+id, e.keyA, map[string]any{"audience_id": seg}).status)
	require.Equal(t, seg, e.do("GET", "/broadcasts/"+id, e.keyA, nil).body["segment_id"])

	// Duplicate, then delete the copy.
	d := e.do("POST", "/broadcasts/"+id+"/duplicate", e.keyA, nil)
	require.Equal(t, 201, d.status, string(d.raw))
	require.Equal(t, "broadcast", d.body["object"])
	dupID := d.body["id"].(string)
	require.NotEqual(t, id, dupID)
	dg := e.do("GET", "/broadcasts/"+dupID, e.keyA, nil)
	require.Equal(t, "Copy of December news", dg.body["name"])
	require.Equal(t, "draft", dg.body["status"])
	require.Equal(t, seg, dg.body["segment_id"])
	del := e.do("DELETE", "/broadcasts/"+dupID, e.keyA, nil)
	require.Equal(t, 200, del.status, string(del.raw))
	require.Equal(t, map[string]any{"id": dupID, "object": "broadcast", "deleted": true}, del.body)
	requireError(t, e.do("GET", "/broadcasts/"+dupID, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("DELETE", "/broadcasts/"+dupID, e.keyA, nil), 404, "not_found")

	// A draft cannot be canceled.
	requireError(t, e.do("POST", "/broadcasts/"+id+"/cancel", e.keyA, nil), 422, "validation_error")

	// Send, scheduled in natural language.
	require.Empty(t, outboxBroadcasts(t, e.store))
	before := time.Now()
	s := e.do("POST", "/broadcasts/"+id+"/send", e.keyA, map[string]any{"scheduled_at": "in 1 hour"})
	require.Equal(t, 200, s.status, string(s.raw))
	require.Equal(t, map[string]any{"id": id}, s.body)
	g = e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Equal(t, "scheduled", g.body["status"])
	at, err := time.Parse(time.RFC3339Nano, g.body["scheduled_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, before.Add(time.Hour), at, time.Minute)
	require.Equal(t, []uuid.UUID{uuid.MustParse(id)}, outboxBroadcasts(t, e.store), "send writes the outbox entry")

	// A sent broadcast is no longer edited, deleted or sent.
	for _, c := range []struct {
		method, path string
		body         any
		msg          string
	}{
		{"PATCH", "/broadcasts/" + id, map[string]any{"name": "x"}, "cannot be updated"},
		{"DELETE", "/broadcasts/" + id, nil, "cannot be deleted"},
		{"POST", "/broadcasts/" + id + "/send", nil, "cannot be sent"},
	} {
		r := e.do(c.method, c.path, e.keyA, c.body)
		requireError(t, r, 422, "validation_error")
		require.Contains(t, r.body["message"], c.msg)
		require.Contains(t, r.body["message"], "scheduled")
	}

	// Cancel, twice; the workflow is woken.
	for range 2 {
		cr := e.do("POST", "/broadcasts/"+id+"/cancel", e.keyA, nil)
		require.Equal(t, 200, cr.status, string(cr.raw))
		require.Equal(t, map[string]any{"id": id, "object": "broadcast"}, cr.body)
	}
	require.Equal(t, "canceled", e.do("GET", "/broadcasts/"+id, e.keyA, nil).body["status"])
	require.Contains(t, w.woken(), uuid.MustParse(id))
	// A canceled broadcast can still be duplicated into a new draft.
	d2 := e.do("POST", "/broadcasts/"+id+"/duplicate", e.keyA, nil)
	require.Equal(t, 201, d2.status, string(d2.raw))
	require.Equal(t, "draft", e.do("GET", "/broadcasts/"+d2.body["id"].(string), e.keyA, nil).body["status"])
}

// TestBroadcastsCreateAndSendValidation: what a create or a send refuses,
// and create with send.
func TestBroadcastsCreateAndSendValidation(t *testing.T) {
	t.Parallel()
	e, _ := newBroadcastEnv(t)
	seg := e.newSegment(e.keyA, "All")
	segB := e.newSegment(e.keyB, "B's")
	with := func(k string, v any) map[string]any {
		m := draftBody(seg)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	both := with("send", true)
	both["scheduled_at"] = "in 2 hours"
	onlySchedule := with("scheduled_at", "in 2 hours")
	cases := []struct {
		name, field string
		body        any
		status      int
		errName     string
	}{
		{"not json", "", "{nope", 422, "validation_error"},
		{"missing segment", "segment_id", with("segment_id", nil), 422, "missing_required_field"},
		{"missing from", "from", with("from", nil), 422, "missing_required_field"},
		{"missing subject", "subject", with("subject", nil), 422, "missing_required_field"},
		{"bad from", "from", with("from", "not an address"), 422, "validation_error"},
		{"bad segment id", "segment_id", with("segment_id", "nope"), 422, "validation_error"},
		{"another team's segment", "", with("segment_id", segB), 404, "not_found"},
		{"unknown topic", "", with("topic_id", uuid.NewString()), 404, "not_found"},
		{"bad reply_to", "reply_to", with("reply_to", "not an address"), 422, "validation_error"},
		{"reply_to of numbers", "reply_to", with("reply_to", []int{1}), 422, "validation_error"},
		{"send not a boolean", "send", with("send", "yes"), 422, "validation_error"},
		{"subject with CRLF", "subject", with("subject", "a\r\nBcc: x@y.z"), 422, "validation_error"},
		{"unterminated variable", "html", with("html", "{{{FIRST_NAME"), 422, "validation_error"},
		{"bad components", "components", func() map[string]any {
			m := with("components", map[string]any{"version": 9})
			delete(m, "html")
			delete(m, "text")
			return m
		}(), 422, "validation_error"},
		{"components and html", "components", with("components", map[string]any{"blocks": []any{}}), 422, "validation_error"},
		{"scheduled_at without send", "scheduled_at", onlySchedule, 422, "validation_error"},
		{"bad scheduled_at", "scheduled_at", func() map[string]any { m := with("send", true); m["scheduled_at"] = "whenever"; return m }(), 422, "validation_error"},
		{"send without content", "html", func() map[string]any { m := with("send", true); delete(m, "html"); delete(m, "text"); return m }(), 422, "validation_error"},
		{"send with unknown variable", "html", func() map[string]any { m := with("send", true); m["html"] = "{{{PLAN}}}"; return m }(), 422, "validation_error"},
		{"send from an unverified domain", "", with("from", "News <news@example.com>"), 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.status == 0 { // needs send
				m := c.body.(map[string]any)
				m["send"] = true
				r := e.do("POST", "/broadcasts", e.keyA, m)
				requireError(t, r, 403, "validation_error")
				require.Contains(t, r.body["message"], "not verified")
				return
			}
			r := e.do("POST", "/broadcasts", e.keyA, c.body)
			requireError(t, r, c.status, c.errName)
			if c.field != "" {
				require.Contains(t, r.body["message"], "`"+c.field+"`")
			}
		})
	}
	require.Empty(t, e.do("GET", "/broadcasts", e.keyA, nil).body["data"], "refused creates leave nothing")

	// A draft from an unverified domain is kept; sending it is refused
	// like POST /emails refuses the sender.
	id := e.newBroadcast(e.keyA, with("from", "news@example.com"))
	requireError(t, e.do("POST", "/broadcasts/"+id+"/send", e.keyA, nil), 403, "validation_error")
	require.Equal(t, "draft", e.do("GET", "/broadcasts/"+id, e.keyA, nil).body["status"])
	requireError(t, e.do("POST", "/broadcasts/"+id+"/send", e.keyA, map[string]any{"scheduled_at": "someday"}), 422, "validation_error")
	requireError(t, e.do("POST", "/broadcasts/"+id+"/send", e.keyA, "{nope"), 422, "validation_error")

	// send: true queues at once, or schedules.
	q := e.newBroadcast(e.keyA, with("send", true))
	require.Equal(t, "queued", e.do("GET", "/broadcasts/"+q, e.keyA, nil).body["status"])
	sc := e.newBroadcast(e.keyA, both)
	g := e.do("GET", "/broadcasts/"+sc, e.keyA, nil)
	require.Equal(t, "scheduled", g.body["status"])
	require.NotNil(t, g.body["scheduled_at"])
	iso := with("send", true)
	iso["scheduled_at"] = time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	isoID := e.newBroadcast(e.keyA, iso)
	require.Equal(t, "scheduled", e.do("GET", "/broadcasts/"+isoID, e.keyA, nil).body["status"])
	require.ElementsMatch(t, []uuid.UUID{uuid.MustParse(q), uuid.MustParse(sc), uuid.MustParse(isoID)},
		outboxBroadcasts(t, e.store))

	// Canceling a scheduled broadcast.
	require.Equal(t, 200, e.do("POST", "/broadcasts/"+sc+"/cancel", e.keyA, nil).status)
	require.Equal(t, "canceled", e.do("GET", "/broadcasts/"+sc, e.keyA, nil).body["status"])

	// A component document instead of html and text.
	doc := map[string]any{"blocks": []any{map[string]any{"type": "heading", "level": 1.0, "text": "Hi {{{FIRST_NAME|there}}}"}}}
	body := with("html", nil)
	delete(body, "text")
	body["components"] = doc
	cid := e.newBroadcast(e.keyA, body)
	cg := e.do("GET", "/broadcasts/"+cid, e.keyA, nil)
	require.Equal(t, doc["blocks"], cg.body["components"].(map[string]any)["blocks"])
	require.Contains(t, cg.body["html"], "Hi {{{FIRST_NAME|there}}}")
	require.NotNil(t, cg.body["text"])
	// html given later replaces the document.
	require.Equal(t, 200, e.do("PATCH", "/broadcasts/"+cid, e.keyA, map[string]any{"html": "<p>plain</p>"}).status)
	cg = e.do("GET", "/broadcasts/"+cid, e.keyA, nil)
	require.Nil(t, cg.body["components"])
	require.Equal(t, "<p>plain</p>", cg.body["html"])
}

// TestBroadcastsIsolationAndBadIDs: another team's broadcast is a 404 on
// every route, a malformed id a 422, and an unknown one a 404.
func TestBroadcastsIsolationAndBadIDs(t *testing.T) {
	t.Parallel()
	e, _ := newBroadcastEnv(t)
	id := e.newBroadcast(e.keyA, draftBody(e.newSegment(e.keyA, "All")))
	routes := []struct{ method, suffix string }{
		{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/duplicate"}, {"POST", "/send"}, {"POST", "/cancel"},
		{"GET", "/recipients"},
	}
	for _, r := range routes {
		requireError(t, e.do(r.method, "/broadcasts/"+id+r.suffix, e.keyB, map[string]any{"name": "x"}), 404, "not_found")
		requireError(t, e.do(r.method, "/broadcasts/"+uuid.NewString()+r.suffix, e.keyA, map[string]any{}), 404, "not_found")
		requireError(t, e.do(r.method, "/broadcasts/not-a-uuid"+r.suffix, e.keyA, map[string]any{}), 422, "invalid_parameter")
	}
	require.Empty(t, e.do("GET", "/broadcasts", e.keyB, nil).body["data"])
	g := e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Equal(t, "November news", g.body["name"], "team B changed nothing")
	require.Equal(t, "draft", g.body["status"])

	// Lists page like every list.
	for range 2 {
		e.newBroadcast(e.keyA, draftBody(g.body["segment_id"].(string)))
	}
	l := e.do("GET", "/broadcasts?limit=2", e.keyA, nil)
	require.Equal(t, true, l.body["has_more"])
	last := l.body["data"].([]any)[1].(map[string]any)["id"].(string)
	l2 := e.do("GET", "/broadcasts?limit=2&after="+last, e.keyA, nil)
	require.Equal(t, false, l2.body["has_more"])
	require.Equal(t, id, l2.body["data"].([]any)[0].(map[string]any)["id"])
	requireError(t, e.do("GET", "/broadcasts?limit=0", e.keyA, nil), 422, "validation_error")

	// A sending-only key cannot use broadcasts.
	requireError(t, e.do("GET", "/broadcasts", sendingKey(t, e), nil), 401, "restricted_api_key")
}

// sendingKey makes a sending-only key of team A.
func sendingKey(t *testing.T, e *env) string {
	t.Helper()
	r := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "send", "permission": "sending_access"})
	require.Equal(t, 201, r.status, string(r.raw))
	return r.body["token"].(string)
}

// A server without a broadcast service has no /broadcasts.
func TestBroadcastsAbsentWithoutService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	requireError(t, e.do("GET", "/broadcasts", e.keyA, nil), 404, "not_found")
	requireError(t, e.do("POST", "/broadcasts", e.keyA, map[string]any{}), 404, "not_found")
}

// TestBroadcastFromTemplate: template_id copies a published template's
// subject and body into the broadcast.
func TestBroadcastFromTemplate(t *testing.T) {
	t.Parallel()
	e, _ := newBroadcastEnv(t)
	seg := e.newSegment(e.keyA, "All")
	tr := e.do("POST", "/templates", e.keyA, map[string]any{"name": "Promo", "alias": "promo",
		"subject": "Sale for {{{FIRST_NAME|you}}}", "html": "<p>Sale!</p>", "text": "Sale!"})
	require.Equal(t, 201, tr.status, string(tr.raw))
	tid := tr.body["id"].(string)
	base := map[string]any{"name": "From a template", "segment_id": seg, "from": broadcastFrom, "template_id": "promo"}

	r := e.do("POST", "/broadcasts", e.keyA, base)
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], "`template_id`")
	require.Contains(t, r.body["message"], "not published")
	require.Equal(t, 200, e.do("POST", "/templates/"+tid+"/publish", e.keyA, nil).status)
	// Edits after publishing are not what a broadcast copies.
	require.Equal(t, 200, e.do("PATCH", "/templates/"+tid, e.keyA, map[string]any{"html": "<p>Unpublished</p>"}).status)

	id := e.newBroadcast(e.keyA, base)
	g := e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Equal(t, "Sale for {{{FIRST_NAME|you}}}", g.body["subject"])
	require.Equal(t, "<p>Sale!</p>", g.body["html"])
	require.Equal(t, "Sale!", g.body["text"])

	// A subject of the request wins; by id works too.
	own := map[string]any{"segment_id": seg, "from": broadcastFrom, "template_id": tid, "subject": "Mine"}
	g = e.do("GET", "/broadcasts/"+e.newBroadcast(e.keyA, own), e.keyA, nil)
	require.Equal(t, "Mine", g.body["subject"])
	require.Equal(t, "<p>Sale!</p>", g.body["html"])

	for name, ref := range map[string]string{"unknown": "nope", "another team's": "promo"} {
		key := e.keyA
		if name == "another team's" {
			key = e.keyB
		}
		m := map[string]any{"segment_id": seg, "from": broadcastFrom, "template_id": ref}
		if key == e.keyB {
			m["segment_id"] = e.newSegment(e.keyB, "B")
		}
		r := e.do("POST", "/broadcasts", key, m)
		requireError(t, r, 422, "validation_error")
		require.Contains(t, r.body["message"], "`template_id`", name)
	}
	withHTML := map[string]any{"segment_id": seg, "from": broadcastFrom, "template_id": "promo", "html": "<p>x</p>"}
	requireError(t, e.do("POST", "/broadcasts", e.keyA, withHTML), 422, "validation_error")

	// On a draft, template_id replaces the body, and the subject unless
	// the request gives one.
	draft := e.newBroadcast(e.keyA, draftBody(seg))
	require.Equal(t, 200, e.do("PATCH", "/broadcasts/"+draft, e.keyA, map[string]any{"template_id": "promo"}).status)
	g = e.do("GET", "/broadcasts/"+draft, e.keyA, nil)
	require.Equal(t, "<p>Sale!</p>", g.body["html"])
	require.Equal(t, "Sale!", g.body["text"])
	require.Equal(t, "Sale for {{{FIRST_NAME|you}}}", g.body["subject"])
	require.Equal(t, 200, e.do("PATCH", "/broadcasts/"+draft, e.keyA, map[string]any{"template_id": "promo",
		"subject": "Kept"}).status)
	require.Equal(t, "Kept", e.do("GET", "/broadcasts/"+draft, e.keyA, nil).body["subject"])
}

// TestBroadcastRecipientsCountsAndEmails hands a broadcast's contacts to
// the send path as the workflow does, then reads the recipients by kind,
// the counts, broadcast_id on its emails and in their webhook payloads.
func TestBroadcastRecipientsCountsAndEmails(t *testing.T) {
	t.Parallel()
	e, _ := newBroadcastEnv(t)
	ctx := context.Background()
	seg := e.newSegment(e.keyA, "All")
	addrs := []string{"delivered+1@posthaste.test", "delivered+2@posthaste.test", "delivered+3@posthaste.test",
		"delivered+4@posthaste.test"}
	contacts := map[string]string{}
	for i, a := range addrs {
		r := e.do("POST", "/contacts", e.keyA, map[string]any{"email": a, "first_name": []string{"Ann", "Bob", "Cy", "Di"}[i],
			"segments": []string{seg}})
		require.Equal(t, 201, r.status, string(r.raw))
		contacts[a] = r.body["id"].(string)
	}
	hook := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "http://127.0.0.1:9/hook",
		"events": []string{"email.delivered"}})
	require.Equal(t, 201, hook.status, string(hook.raw))
	hookID := hook.body["id"].(string)

	id := e.newBroadcast(e.keyA, func() map[string]any { m := draftBody(seg); m["send"] = true; return m }())
	bid := uuid.MustParse(id)

	// The workflow's step: one chunk, the fourth contact failing to render.
	res, err := e.store.Broadcasts.HandOffBroadcastChunk(ctx, store.BroadcastChunk{BroadcastID: bid, Seq: 0, Size: 100,
		FromDomain: "posthaste.test", Now: time.Now()},
		func(b store.Broadcast, c store.BroadcastContact) (store.RenderedBroadcast, error) {
			if c.Email == addrs[3] {
				return store.RenderedBroadcast{}, errors.New("no value for PLAN")
			}
			return broadcast.Render(b, c, nil)
		})
	require.NoError(t, err)
	require.Equal(t, 3, res.Emails)
	require.Equal(t, 1, res.Failed)

	all := e.do("GET", "/broadcasts/"+id+"/recipients", e.keyA, nil)
	require.Equal(t, 200, all.status, string(all.raw))
	require.Equal(t, "list", all.body["object"])
	rows := all.body["data"].([]any)
	require.Len(t, rows, 4)
	emailOf := map[string]string{}
	for _, row := range rows {
		m := row.(map[string]any)
		require.Equal(t, "broadcast_recipient", m["object"])
		addr := m["email"].(string)
		require.Equal(t, contacts[addr], m["contact_id"])
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, m["created_at"])
		emailOf[addr] = m["id"].(string)
	}
	require.Len(t, emailOf, 4)

	// Outcomes, as the send workflow records them.
	rec := func(addr, typ string) {
		require.NoError(t, e.store.Emails.RecordEvents(ctx, uuid.MustParse(emailOf[addr]),
			[]store.Event{{Type: typ, Recipient: addr}}))
	}
	rec(addrs[0], store.EventSent)
	rec(addrs[0], store.EventDelivered)
	rec(addrs[1], store.EventSent)
	require.NoError(t, e.store.Emails.RecordEvents(ctx, uuid.MustParse(emailOf[addrs[1]]), []store.Event{{
		Type: store.EventBounced, Recipient: addrs[1], Detail: map[string]any{"type": "Permanent", "subType": "General"}}}))
	require.NoError(t, e.store.Audience.RecordBroadcastUnsubscribe(ctx, e.teamA, bid, uuid.MustParse(emailOf[addrs[0]]), addrs[0]))

	kind := func(q string) []string {
		t.Helper()
		r := e.do("GET", "/broadcasts/"+id+"/recipients?"+q, e.keyA, nil)
		require.Equal(t, 200, r.status, string(r.raw))
		var out []string
		for _, row := range r.body["data"].([]any) {
			out = append(out, row.(map[string]any)["email"].(string))
		}
		return out
	}
	require.Equal(t, []string{addrs[0]}, kind("type=delivered"))
	require.ElementsMatch(t, []string{addrs[0], addrs[1]}, kind("type=sent"))
	require.Equal(t, []string{addrs[1]}, kind("type=bounced"))
	require.Equal(t, []string{addrs[2]}, kind("type=queued"))
	require.Equal(t, []string{addrs[3]}, kind("type=failed"))
	require.Equal(t, []string{addrs[0]}, kind("type=unsubscribed"))
	require.Empty(t, kind("type=clicked"))
	require.Equal(t, []string{addrs[2]}, kind("email=Delivered%2B3@posthaste.test"))
	require.Empty(t, kind("type=delivered&email="+addrs[2]))
	r := e.do("GET", "/broadcasts/"+id+"/recipients?type=nope", e.keyA, nil)
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], "`type`")
	requireError(t, e.do("GET", "/broadcasts/"+id+"/recipients?limit=500", e.keyA, nil), 422, "validation_error")
	p1 := e.do("GET", "/broadcasts/"+id+"/recipients?limit=3", e.keyA, nil)
	require.Equal(t, true, p1.body["has_more"])
	lastID := p1.body["data"].([]any)[2].(map[string]any)["id"].(string)
	p2 := e.do("GET", "/broadcasts/"+id+"/recipients?limit=3&after="+lastID, e.keyA, nil)
	require.Equal(t, false, p2.body["has_more"])
	require.Len(t, p2.body["data"], 1)

	g := e.do("GET", "/broadcasts/"+id, e.keyA, nil)
	require.Equal(t, "sending", g.body["status"])
	require.Equal(t, map[string]any{"recipients": 4.0, "queued": 1.0, "sent": 2.0, "delivered": 1.0,
		"delivery_delayed": 0.0, "bounced": 1.0, "complained": 0.0, "suppressed": 0.0, "failed": 1.0,
		"canceled": 0.0, "opened": 0.0, "clicked": 0.0, "unsubscribed": 1.0}, g.body["counts"])

	// broadcast_id on the broadcast's emails, null on others.
	em := e.do("GET", "/emails/"+emailOf[addrs[0]], e.keyA, nil)
	require.Equal(t, 200, em.status, string(em.raw))
	require.Equal(t, id, em.body["broadcast_id"])
	require.Equal(t, "News for Ann", em.body["subject"])
	plain := e.do("POST", "/emails", e.keyA, map[string]any{"from": broadcastFrom, "to": "delivered@posthaste.test",
		"subject": "s", "text": "t"})
	require.Equal(t, 200, plain.status, string(plain.raw))
	pg := e.do("GET", "/emails/"+plain.body["id"].(string), e.keyA, nil)
	require.Contains(t, pg.body, "broadcast_id")
	require.Nil(t, pg.body["broadcast_id"])

	// broadcast_id in the webhook payload of the broadcast's email only.
	require.NoError(t, e.store.Emails.RecordEvents(ctx, uuid.MustParse(plain.body["id"].(string)),
		[]store.Event{{Type: store.EventDelivered, Recipient: "delivered@posthaste.test"}}))
	ev := e.do("GET", "/webhooks/"+hookID+"/events", e.keyA, nil)
	require.Equal(t, 200, ev.status, string(ev.raw))
	require.Len(t, ev.body["data"], 2)
	seen := map[string]map[string]any{}
	for _, m := range ev.body["data"].([]any) {
		one := e.do("GET", "/webhooks/"+hookID+"/events/"+m.(map[string]any)["id"].(string), e.keyA, nil)
		require.Equal(t, 200, one.status, string(one.raw))
		data := one.body["payload"].(map[string]any)["data"].(map[string]any)
		seen[data["email_id"].(string)] = data
	}
	require.Equal(t, id, seen[emailOf[addrs[0]]]["broadcast_id"])
	require.Contains(t, seen, plain.body["id"].(string))
	require.NotContains(t, seen[plain.body["id"].(string)], "broadcast_id")

	requireError(t, e.do("GET", "/broadcasts/"+id+"/recipients", e.keyB, nil), 404, "not_found")
}

// TestResendNodeSDKBroadcasts drives the broadcasts routes with Resend's
// Node SDK, unchanged (testdata/resend-node/broadcasts.cjs).
func TestResendNodeSDKBroadcasts(t *testing.T) {
	t.Parallel()
	e, _ := newBroadcastEnv(t)
	out := runResendNode(t, "broadcasts.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	type idObj struct{ ID, Object string }
	var res struct {
		Segment  idObj
		Created  idObj
		Got      map[string]any
		List     struct{ Data []map[string]any }
		Updated  idObj
		AfterUpd map[string]any `json:"afterUpdate"`
		Sent     struct{ ID string }
		Sched    map[string]any `json:"scheduled"`
		Canceled idObj
		AfterCan map[string]any `json:"afterCancel"`
		SentNow  idObj          `json:"sentNow"`
		Now      map[string]any `json:"now"`
		Removed  struct {
			ID      string
			Object  string
			Deleted bool
		}
		RemovedGet struct{ Name string } `json:"removedGetError"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Equal(t, "broadcast", res.Created.Object)
	require.Equal(t, res.Created.ID, res.Got["id"])
	require.Equal(t, "draft", res.Got["status"])
	require.Equal(t, res.Segment.ID, res.Got["segment_id"])
	require.Equal(t, "Hi {{{FIRST_NAME|there}}}", res.Got["subject"])
	require.NotEmpty(t, res.List.Data)
	require.Equal(t, res.Created.ID, res.List.Data[len(res.List.Data)-1]["id"])
	require.Equal(t, res.Created.ID, res.Updated.ID)
	require.Equal(t, "Renamed", res.AfterUpd["name"])
	require.Equal(t, res.Segment.ID, res.AfterUpd["segment_id"], "fields the SDK was not given stay")
	require.Equal(t, "Hi {{{FIRST_NAME|there}}}", res.AfterUpd["subject"])
	require.Equal(t, "<p>Hello {{{FIRST_NAME|there}}}</p>", res.AfterUpd["html"])
	require.Equal(t, res.Created.ID, res.Sent.ID)
	require.Equal(t, "scheduled", res.Sched["status"])
	require.NotNil(t, res.Sched["scheduled_at"])
	require.Equal(t, "broadcast", res.Canceled.Object)
	require.Equal(t, "canceled", res.AfterCan["status"])
	require.Equal(t, "queued", res.Now["status"])
	require.True(t, res.Removed.Deleted)
	require.Equal(t, "not_found", res.RemovedGet.Name)
}

// TestBroadcastRecipientFieldsAndClickedLinks records opens, clicks (one
// a machine's) and a bounce on a broadcast's emails and reads them back
// as Resend's recipient rows (count, clicked_links, bounce_type and its
// filter) and clicked links (clicks, unique_clicks, paged), through the
// API and Resend's Node SDK (testdata/resend-node/broadcast_stats.cjs).
func TestBroadcastRecipientFieldsAndClickedLinks(t *testing.T) {
	t.Parallel()
	e, _ := newBroadcastEnv(t)
	ctx := context.Background()
	seg := e.newSegment(e.keyA, "All")
	addrs := []string{"delivered+1@posthaste.test", "delivered+2@posthaste.test", "bounced@posthaste.test"}
	for _, a := range addrs {
		r := e.do("POST", "/contacts", e.keyA, map[string]any{"email": a, "segments": []string{seg}})
		require.Equal(t, 201, r.status, string(r.raw))
	}
	id := e.newBroadcast(e.keyA, func() map[string]any { m := draftBody(seg); m["send"] = true; return m }())
	res, err := e.store.Broadcasts.HandOffBroadcastChunk(ctx, store.BroadcastChunk{BroadcastID: uuid.MustParse(id),
		Size: 100, FromDomain: "posthaste.test", Now: time.Now()},
		func(b store.Broadcast, c store.BroadcastContact) (store.RenderedBroadcast, error) {
			return broadcast.Render(b, c, nil)
		})
	require.NoError(t, err)
	require.Equal(t, 3, res.Emails)
	emailOf := map[string]uuid.UUID{}
	for _, row := range e.do("GET", "/broadcasts/"+id+"/recipients", e.keyA, nil).body["data"].([]any) {
		m := row.(map[string]any)
		require.NotContains(t, m, "count")
		require.NotContains(t, m, "clicked_links")
		require.NotContains(t, m, "bounce_type")
		emailOf[m["email"].(string)] = uuid.MustParse(m["id"].(string))
	}
	const linkA, linkB = "https://acme.example/pricing", "https://acme.example/blog"
	rec := func(addr string, evs ...store.Event) {
		t.Helper()
		for i := range evs {
			evs[i].Recipient = addr
		}
		require.NoError(t, e.store.Emails.RecordEvents(ctx, emailOf[addr], evs))
	}
	click := func(link string, machine bool) store.Event {
		return store.Event{Type: store.EventClicked, Detail: map[string]any{"link": link, "machine": machine}}
	}
	open := store.Event{Type: store.EventOpened, Detail: map[string]any{"machine": false}}
	rec(addrs[0], store.Event{Type: store.EventSent}, store.Event{Type: store.EventDelivered}, open, open,
		click(linkA, false), click(linkB, false), click(linkA, false), click(linkA, true))
	rec(addrs[1], store.Event{Type: store.EventSent}, store.Event{Type: store.EventDelivered}, click(linkA, false))
	rec(addrs[2], store.Event{Type: store.EventSent}, store.Event{Type: store.EventBounced,
		Detail: map[string]any{"type": "Transient", "subType": "MailboxFull"}})

	rows := func(q string) map[string]map[string]any {
		t.Helper()
		r := e.do("GET", "/broadcasts/"+id+"/recipients?"+q, e.keyA, nil)
		require.Equal(t, 200, r.status, string(r.raw))
		out := map[string]map[string]any{}
		for _, row := range r.body["data"].([]any) {
			out[row.(map[string]any)["email"].(string)] = row.(map[string]any)
		}
		return out
	}
	opened := rows("type=opened")
	require.Len(t, opened, 2)
	require.Equal(t, 2.0, opened[addrs[0]]["count"])
	require.Equal(t, 0.0, opened[addrs[1]]["count"])
	require.NotContains(t, opened[addrs[0]], "clicked_links")
	clicked := rows("type=clicked")
	require.Equal(t, 3.0, clicked[addrs[0]]["count"], "the machine's click is not counted")
	require.Equal(t, []any{map[string]any{"url": linkA, "clicks": 2.0}, map[string]any{"url": linkB, "clicks": 1.0}},
		clicked[addrs[0]]["clicked_links"])
	require.Equal(t, []any{map[string]any{"url": linkA, "clicks": 1.0}}, clicked[addrs[1]]["clicked_links"])
	bounced := rows("type=bounced")
	require.Equal(t, "transient", bounced[addrs[2]]["bounce_type"])
	require.NotContains(t, bounced[addrs[2]], "count")
	require.Len(t, rows("type=bounced&bounce_type=transient"), 1)
	require.Empty(t, rows("type=bounced&bounce_type=permanent"))
	for _, q := range []string{"type=bounced&bounce_type=soft", "bounce_type=permanent", "type=sent&bounce_type=permanent"} {
		r := e.do("GET", "/broadcasts/"+id+"/recipients?"+q, e.keyA, nil)
		requireError(t, r, 422, "validation_error")
		require.Contains(t, r.body["message"], "`bounce_type`", q)
	}

	links := e.do("GET", "/broadcasts/"+id+"/clicked-links", e.keyA, nil)
	require.Equal(t, 200, links.status, string(links.raw))
	require.Equal(t, "list", links.body["object"])
	require.Equal(t, false, links.body["has_more"])
	data := links.body["data"].([]any)
	require.Len(t, data, 2)
	a, b := data[0].(map[string]any), data[1].(map[string]any)
	require.Equal(t, []any{linkA, 3.0, 2.0}, []any{a["url"], a["clicks"], a["unique_clicks"]})
	require.Equal(t, []any{linkB, 1.0, 1.0}, []any{b["url"], b["clicks"], b["unique_clicks"]})
	p1 := e.do("GET", "/broadcasts/"+id+"/clicked-links?limit=1", e.keyA, nil)
	require.Equal(t, true, p1.body["has_more"])
	require.Equal(t, a["id"], p1.body["data"].([]any)[0].(map[string]any)["id"])
	p2 := e.do("GET", "/broadcasts/"+id+"/clicked-links?limit=1&after="+a["id"].(string), e.keyA, nil)
	require.Equal(t, false, p2.body["has_more"])
	require.Equal(t, linkB, p2.body["data"].([]any)[0].(map[string]any)["url"])
	back := e.do("GET", "/broadcasts/"+id+"/clicked-links?limit=1&before="+b["id"].(string), e.keyA, nil)
	require.Equal(t, linkA, back.body["data"].([]any)[0].(map[string]any)["url"])
	require.Equal(t, false, back.body["has_more"])
	requireError(t, e.do("GET", "/broadcasts/"+id+"/clicked-links", e.keyB, nil), 404, "not_found")

	out := runResendNode(t, "broadcast_stats.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA,
		"BROADCAST_ID="+id)
	type linkRow struct {
		ID           string
		URL          string
		Clicks       int
		UniqueClicks int `json:"unique_clicks"`
	}
	type page struct {
		Data []struct {
			Email        string
			Count        int
			BounceType   string `json:"bounce_type"`
			ClickedLinks []struct {
				URL    string
				Clicks int
			} `json:"clicked_links"`
		}
	}
	var sdk struct {
		Clicked, Bounced, Permanent page
		Links, First, Second        struct {
			Data    []linkRow
			HasMore bool `json:"has_more"`
		}
	}
	require.NoError(t, json.Unmarshal(out, &sdk), string(out))
	require.Len(t, sdk.Clicked.Data, 2)
	for _, r := range sdk.Clicked.Data {
		if r.Email == addrs[0] {
			require.Equal(t, 3, r.Count)
			require.Len(t, r.ClickedLinks, 2)
		}
	}
	require.Len(t, sdk.Bounced.Data, 1)
	require.Equal(t, "transient", sdk.Bounced.Data[0].BounceType)
	require.Empty(t, sdk.Permanent.Data)
	require.Equal(t, []linkRow{{ID: a["id"].(string), URL: linkA, Clicks: 3, UniqueClicks: 2},
		{ID: b["id"].(string), URL: linkB, Clicks: 1, UniqueClicks: 1}}, sdk.Links.Data)
	require.True(t, sdk.First.HasMore)
	require.Equal(t, linkB, sdk.Second.Data[0].URL)
}
