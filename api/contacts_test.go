package api_test

import (
	"context"
	"net/url"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// created posts a create and returns the new resource's id.
func (e *env) created(path, key string, body any) string {
	e.t.Helper()
	r := e.do("POST", path, key, body)
	require.Equal(e.t, 201, r.status, string(r.raw))
	id, _ := r.body["id"].(string)
	require.NotEmpty(e.t, id, string(r.raw))
	return id
}

func listIDs(t *testing.T, r resp) []string {
	t.Helper()
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "list", r.body["object"])
	var ids []string
	for _, d := range r.body["data"].([]any) {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	return ids
}

func TestContactLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.created("/contact-properties", e.keyA, map[string]any{"key": "company", "type": "string", "fallback_value": "Acme"})
	e.created("/contact-properties", e.keyA, map[string]any{"key": "age", "type": "number"})
	seg := e.created("/segments", e.keyA, map[string]any{"name": "VIP"})
	news := e.created("/topics", e.keyA, map[string]any{"name": "News", "default_subscription": "opt_in"})
	promo := e.created("/topics", e.keyA, map[string]any{"name": "Promotions", "default_subscription": "opt_out",
		"description": "Deals", "visibility": "public"})

	id := e.created("/contacts", e.keyA, map[string]any{"email": "Steve@Example.com", "first_name": "Steve",
		"last_name": "Wozniak", "properties": map[string]any{"company": "Apple", "age": 75},
		"segments": []any{seg}, "topics": []map[string]string{{"id": promo, "subscription": "opt_in"}}})

	for _, ref := range []string{id, "steve@example.com", "STEVE@example.COM"} {
		g := e.do("GET", "/contacts/"+ref, e.keyA, nil)
		require.Equal(t, 200, g.status, string(g.raw))
		require.Equal(t, id, g.body["id"])
		require.Equal(t, "contact", g.body["object"])
		require.Equal(t, "steve@example.com", g.body["email"])
		require.Equal(t, "Steve", g.body["first_name"])
		require.Equal(t, false, g.body["unsubscribed"])
		require.Equal(t, map[string]any{"company": "Apple", "age": float64(75)}, g.body["properties"])
	}
	r := e.do("POST", "/contacts", e.keyA, map[string]any{"email": "steve@EXAMPLE.com"})
	requireError(t, r, 409, "conflict")

	// Memberships and subscriptions given at creation.
	require.Equal(t, []string{seg}, listIDs(t, e.do("GET", "/contacts/"+id+"/segments", e.keyA, nil)))
	require.Equal(t, []string{id}, listIDs(t, e.do("GET", "/segments/"+seg+"/contacts", e.keyA, nil)))
	require.Equal(t, []string{id}, listIDs(t, e.do("GET", "/contacts?segment_id="+seg, e.keyA, nil)))
	topics := e.do("GET", "/contacts/steve@example.com/topics", e.keyA, nil)
	require.Equal(t, 200, topics.status, string(topics.raw))
	subs := map[string]string{}
	for _, d := range topics.body["data"].([]any) {
		m := d.(map[string]any)
		subs[m["id"].(string)] = m["subscription"].(string)
	}
	require.Equal(t, map[string]string{news: "opt_in", promo: "opt_in"}, subs)

	// Update by address: names, properties (null removes), unsubscribed.
	u := e.do("PATCH", "/contacts/steve@example.com", e.keyA, map[string]any{"first_name": "Woz",
		"unsubscribed": true, "properties": map[string]any{"age": nil, "company": "Wheels"}})
	require.Equal(t, 200, u.status, string(u.raw))
	require.Equal(t, id, u.body["id"])
	g := e.do("GET", "/contacts/"+id, e.keyA, nil)
	require.Equal(t, "Woz", g.body["first_name"])
	require.Equal(t, "Wozniak", g.body["last_name"], "absent fields stay")
	require.Equal(t, true, g.body["unsubscribed"])
	require.Equal(t, map[string]any{"company": "Wheels"}, g.body["properties"])

	// Topics later, in the SDKs' bare-array form and the reference's object form.
	r = e.do("PATCH", "/contacts/"+id+"/topics", e.keyA, []map[string]string{{"id": news, "subscription": "opt_out"}})
	require.Equal(t, 200, r.status, string(r.raw))
	r = e.do("PATCH", "/contacts/"+id+"/topics", e.keyA, map[string]any{"topics": []map[string]string{{"id": promo, "subscription": "opt_out"}}})
	require.Equal(t, 200, r.status, string(r.raw))
	topics = e.do("GET", "/contacts/"+id+"/topics", e.keyA, nil)
	for _, d := range topics.body["data"].([]any) {
		require.Equal(t, "opt_out", d.(map[string]any)["subscription"])
	}

	// Segments later.
	seg2 := e.created("/segments", e.keyA, map[string]any{"name": "Beta"})
	r = e.do("POST", "/contacts/"+id+"/segments/"+seg2, e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.ElementsMatch(t, []string{seg, seg2}, listIDs(t, e.do("GET", "/contacts/"+id+"/segments", e.keyA, nil)))
	r = e.do("DELETE", "/contacts/"+id+"/segments/"+seg, e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, true, r.body["deleted"])
	requireError(t, e.do("DELETE", "/contacts/"+id+"/segments/"+seg, e.keyA, nil), 404, "not_found")
	require.Empty(t, listIDs(t, e.do("GET", "/segments/"+seg+"/contacts", e.keyA, nil)))

	other := e.created("/contacts", e.keyA, map[string]any{"email": "bill@example.com"})
	requireError(t, e.do("PATCH", "/contacts/"+other, e.keyA, map[string]any{"email": "STEVE@example.com"}), 409, "conflict")
	r = e.do("PATCH", "/contacts/"+other, e.keyA, map[string]any{"email": "William@Example.com"})
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "william@example.com", e.do("GET", "/contacts/"+other, e.keyA, nil).body["email"])

	d := e.do("DELETE", "/contacts/steve@example.com", e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	require.Equal(t, id, d.body["id"])
	require.Equal(t, true, d.body["deleted"])
	requireError(t, e.do("GET", "/contacts/"+id, e.keyA, nil), 404, "not_found")
}

func TestContactListPaginationAndSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for _, c := range []map[string]any{
		{"email": "ada@example.com", "first_name": "Ada", "last_name": "Lovelace"},
		{"email": "grace@example.com", "first_name": "Grace", "last_name": "Hopper"},
		{"email": "alan@example.org", "first_name": "Alan", "last_name": "Turing"},
		{"email": "x_y@example.net"},
		{"email": "xzy@example.net"},
	} {
		ids = append(ids, e.created("/contacts", e.keyA, c))
	}
	slices.Reverse(ids) // newest first
	page1 := e.do("GET", "/contacts?limit=2", e.keyA, nil)
	require.Equal(t, ids[:2], listIDs(t, page1))
	require.Equal(t, true, page1.body["has_more"])
	page2 := e.do("GET", "/contacts?limit=2&after="+ids[1], e.keyA, nil)
	require.Equal(t, ids[2:4], listIDs(t, page2))
	require.Equal(t, true, page2.body["has_more"])
	page3 := e.do("GET", "/contacts?limit=2&after="+ids[3], e.keyA, nil)
	require.Equal(t, ids[4:], listIDs(t, page3))
	require.Equal(t, false, page3.body["has_more"])
	back := e.do("GET", "/contacts?limit=2&before="+ids[4], e.keyA, nil)
	require.Equal(t, ids[2:4], listIDs(t, back))

	for q, want := range map[string][]string{
		"hopper":      {ids[3]},         // last name, any case
		"ALAN":        {ids[2]},         // first name
		"example.com": {ids[3], ids[4]}, // address
		"x_y":         {ids[1]},         // _ is literal
		"%":           nil,
	} {
		got := listIDs(t, e.do("GET", "/contacts?search="+url.QueryEscape(q), e.keyA, nil))
		require.Equal(t, want, got, q)
	}
	requireError(t, e.do("GET", "/contacts?limit=0", e.keyA, nil), 422, "validation_error")
	requireError(t, e.do("GET", "/contacts?segment_id=nope", e.keyA, nil), 422, "validation_error")
}

func TestContactValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.created("/contact-properties", e.keyA, map[string]any{"key": "plan", "type": "string"})
	e.created("/contact-properties", e.keyA, map[string]any{"key": "seats", "type": "number", "fallback_value": 1})
	contact := e.created("/contacts", e.keyA, map[string]any{"email": "a@example.com"})
	topic := e.created("/topics", e.keyA, map[string]any{"name": "News", "default_subscription": "opt_in"})
	missing := "0190c1d2-0000-7000-8000-000000000000"
	cases := []struct {
		name, method, path string
		body               any
		status             int
		errName, contains  string
	}{
		{"no email", "POST", "/contacts", map[string]any{"first_name": "x"}, 422, "missing_required_field", "email"},
		{"bad email", "POST", "/contacts", map[string]any{"email": "not an address"}, 422, "validation_error", "email"},
		{"display name", "POST", "/contacts", map[string]any{"email": "Ann <ann@example.com>"}, 422, "validation_error", "email"},
		{"unknown property", "POST", "/contacts", map[string]any{"email": "b@example.com", "properties": map[string]any{"colour": "red"}}, 422, "validation_error", "colour"},
		{"string for number", "POST", "/contacts", map[string]any{"email": "b@example.com", "properties": map[string]any{"seats": "3"}}, 422, "validation_error", "seats"},
		{"number for string", "PATCH", "/contacts/" + contact, map[string]any{"properties": map[string]any{"plan": 3}}, 422, "validation_error", "plan"},
		{"bool for string", "PATCH", "/contacts/" + contact, map[string]any{"properties": map[string]any{"plan": true}}, 422, "validation_error", "plan"},
		{"unsubscribed type", "POST", "/contacts", map[string]any{"email": "b@example.com", "unsubscribed": "yes"}, 422, "validation_error", "unsubscribed"},
		{"bad segment id", "POST", "/contacts", map[string]any{"email": "b@example.com", "segments": []string{"x"}}, 422, "validation_error", "segments"},
		{"unknown segment", "POST", "/contacts", map[string]any{"email": "b@example.com", "segments": []map[string]string{{"id": missing}}}, 404, "not_found", missing},
		{"unknown topic", "POST", "/contacts", map[string]any{"email": "b@example.com", "topics": []map[string]string{{"id": missing, "subscription": "opt_in"}}}, 404, "not_found", missing},
		{"bad subscription", "PATCH", "/contacts/" + contact + "/topics", []map[string]string{{"id": topic, "subscription": "maybe"}}, 422, "validation_error", "subscription"},
		{"topics missing", "PATCH", "/contacts/" + contact + "/topics", map[string]any{}, 422, "missing_required_field", "topics"},
		{"bad contact ref", "GET", "/contacts/nobody", nil, 422, "invalid_parameter", "contact"},
		{"unknown contact", "GET", "/contacts/nobody@example.com", nil, 404, "not_found", "Contact"},
		{"property no key", "POST", "/contact-properties", map[string]any{"type": "string"}, 422, "missing_required_field", "key"},
		{"property bad key", "POST", "/contact-properties", map[string]any{"key": "a-b", "type": "string"}, 422, "validation_error", "key"},
		{"property bad type", "POST", "/contact-properties", map[string]any{"key": "ab", "type": "date"}, 422, "validation_error", "type"},
		{"property fallback type", "POST", "/contact-properties", map[string]any{"key": "ab", "type": "number", "fallback_value": "x"}, 422, "validation_error", "fallback_value"},
		{"property duplicate", "POST", "/contact-properties", map[string]any{"key": "plan", "type": "string"}, 409, "conflict", "plan"},
		{"segment no name", "POST", "/segments", map[string]any{}, 422, "missing_required_field", "name"},
		{"topic no default", "POST", "/topics", map[string]any{"name": "x"}, 422, "missing_required_field", "default_subscription"},
		{"topic bad default", "POST", "/topics", map[string]any{"name": "x", "default_subscription": "yes"}, 422, "validation_error", "default_subscription"},
		{"topic long name", "POST", "/topics", map[string]any{"name": string(make([]byte, 51)), "default_subscription": "opt_in"}, 422, "validation_error", "name"},
		{"topic bad visibility", "POST", "/topics", map[string]any{"name": "x", "default_subscription": "opt_in", "visibility": "secret"}, 422, "validation_error", "visibility"},
		{"topic default change", "PATCH", "/topics/" + topic, map[string]any{"default_subscription": "opt_out"}, 422, "validation_error", "default_subscription"},
		{"topic bad id", "GET", "/topics/x", nil, 422, "invalid_parameter", "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, e.keyA, tc.body)
			requireError(t, r, tc.status, tc.errName)
			require.Contains(t, r.body["message"], tc.contains)
		})
	}
}

// TestContactsTeamIsolation: team B can neither see nor change team A's
// contacts, segments, topics and contact properties; all answer 404.
func TestContactsTeamIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prop := e.created("/contact-properties", e.keyA, map[string]any{"key": "plan", "type": "string"})
	seg := e.created("/segments", e.keyA, map[string]any{"name": "A"})
	topic := e.created("/topics", e.keyA, map[string]any{"name": "A", "default_subscription": "opt_in"})
	contact := e.created("/contacts", e.keyA, map[string]any{"email": "a@example.com", "segments": []string{seg}})

	for _, path := range []string{"/contacts", "/segments", "/topics", "/contact-properties"} {
		require.Empty(t, listIDs(t, e.do("GET", path, e.keyB, nil)), path)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/contacts/" + contact}, {"GET", "/contacts/a@example.com"},
		{"PATCH", "/contacts/" + contact}, {"DELETE", "/contacts/a@example.com"},
		{"GET", "/contacts/" + contact + "/segments"}, {"GET", "/contacts/" + contact + "/topics"},
		{"PATCH", "/contacts/" + contact + "/topics"}, {"POST", "/contacts/" + contact + "/segments/" + seg},
		{"GET", "/segments/" + seg}, {"PATCH", "/segments/" + seg}, {"DELETE", "/segments/" + seg},
		{"GET", "/segments/" + seg + "/contacts"},
		{"GET", "/topics/" + topic}, {"PATCH", "/topics/" + topic}, {"DELETE", "/topics/" + topic},
		{"GET", "/contact-properties/" + prop}, {"PATCH", "/contact-properties/" + prop},
		{"DELETE", "/contact-properties/" + prop},
	} {
		var body any
		switch {
		case c.method == "PATCH" && c.path == "/contacts/"+contact+"/topics":
			body = []map[string]string{{"id": topic, "subscription": "opt_out"}}
		case c.method == "PATCH":
			body = map[string]any{"name": "B", "first_name": "B", "fallback_value": "x"}
		}
		requireError(t, e.do(c.method, c.path, e.keyB, body), 404, "not_found")
	}
	// B's own contact cannot join A's segment or topic, nor use A's property.
	mine := e.created("/contacts", e.keyB, map[string]any{"email": "a@example.com"})
	requireError(t, e.do("POST", "/contacts/"+mine+"/segments/"+seg, e.keyB, nil), 404, "not_found")
	requireError(t, e.do("PATCH", "/contacts/"+mine+"/topics", e.keyB, []map[string]string{{"id": topic, "subscription": "opt_in"}}), 404, "not_found")
	requireError(t, e.do("PATCH", "/contacts/"+mine, e.keyB, map[string]any{"properties": map[string]any{"plan": "x"}}), 422, "validation_error")
	requireError(t, e.do("POST", "/contacts", e.keyB, map[string]any{"email": "c@example.com", "segments": []string{seg}}), 404, "not_found")

	// A's resources are as they were.
	g := e.do("GET", "/contacts/"+contact, e.keyA, nil)
	require.Equal(t, 200, g.status)
	require.Equal(t, "", g.body["first_name"])
	require.Equal(t, []string{contact}, listIDs(t, e.do("GET", "/segments/"+seg+"/contacts", e.keyA, nil)))
	require.Equal(t, "A", e.do("GET", "/topics/"+topic, e.keyA, nil).body["name"])
}

func TestSegmentAndTopicCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seg := e.created("/segments", e.keyA, map[string]any{"name": "Early"})
	g := e.do("GET", "/segments/"+seg, e.keyA, nil)
	require.Equal(t, "segment", g.body["object"])
	require.Equal(t, "Early", g.body["name"])
	require.Equal(t, 200, e.do("PATCH", "/segments/"+seg, e.keyA, map[string]any{"name": "Earlier"}).status)
	require.Equal(t, "Earlier", e.do("GET", "/segments/"+seg, e.keyA, nil).body["name"])
	contact := e.created("/contacts", e.keyA, map[string]any{"email": "a@example.com", "segments": []string{seg}})
	d := e.do("DELETE", "/segments/"+seg, e.keyA, nil)
	require.Equal(t, 200, d.status)
	require.Equal(t, true, d.body["deleted"])
	require.Equal(t, 200, e.do("GET", "/contacts/"+contact, e.keyA, nil).status, "the contacts stay")
	require.Empty(t, listIDs(t, e.do("GET", "/contacts/"+contact+"/segments", e.keyA, nil)))

	topic := e.created("/topics", e.keyA, map[string]any{"name": "News", "default_subscription": "opt_out"})
	g = e.do("GET", "/topics/"+topic, e.keyA, nil)
	require.Equal(t, map[string]any{"object": "topic", "id": topic, "name": "News", "description": "",
		"default_subscription": "opt_out", "visibility": "private", "created_at": g.body["created_at"]}, g.body)
	u := e.do("PATCH", "/topics/"+topic, e.keyA, map[string]any{"description": "Weekly", "visibility": "public",
		"default_subscription": "opt_out"})
	require.Equal(t, 200, u.status, string(u.raw))
	g = e.do("GET", "/topics/"+topic, e.keyA, nil)
	require.Equal(t, "Weekly", g.body["description"])
	require.Equal(t, "public", g.body["visibility"])
	require.Equal(t, "News", g.body["name"])
	require.Equal(t, []string{topic}, listIDs(t, e.do("GET", "/topics", e.keyA, nil)))
	require.Equal(t, 200, e.do("DELETE", "/topics/"+topic, e.keyA, nil).status)
	requireError(t, e.do("GET", "/topics/"+topic, e.keyA, nil), 404, "not_found")

	prop := e.created("/contact-properties", e.keyA, map[string]any{"key": "plan", "type": "string", "fallback_value": "free"})
	g = e.do("GET", "/contact-properties/"+prop, e.keyA, nil)
	require.Equal(t, "contact_property", g.body["object"])
	require.Equal(t, "free", g.body["fallback_value"])
	require.Equal(t, 200, e.do("PATCH", "/contact-properties/"+prop, e.keyA, map[string]any{"fallback_value": "pro"}).status)
	require.Equal(t, "pro", e.do("GET", "/contact-properties/"+prop, e.keyA, nil).body["fallback_value"])
	requireError(t, e.do("PATCH", "/contact-properties/"+prop, e.keyA, map[string]any{"fallback_value": 3}), 422, "validation_error")
	requireError(t, e.do("PATCH", "/contact-properties/"+prop, e.keyA, map[string]any{"type": "number"}), 422, "validation_error")
	require.Equal(t, 200, e.do("PATCH", "/contact-properties/"+prop, e.keyA, map[string]any{"fallback_value": nil}).status)
	require.Nil(t, e.do("GET", "/contact-properties/"+prop, e.keyA, nil).body["fallback_value"])
	require.Equal(t, 200, e.do("DELETE", "/contact-properties/"+prop, e.keyA, nil).status)
	requireError(t, e.do("GET", "/contact-properties/"+prop, e.keyA, nil), 404, "not_found")
}

// TestSendWithTopicID: `topic_id` must name one of the team's topics; the
// email keeps it for the send-time subscription check (delivery.Prepare)
// and GET /emails/{id} answers it (null for an email without one).
func TestSendWithTopicID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mine := e.created("/topics", e.keyA, map[string]any{"name": "News", "default_subscription": "opt_in"})
	theirs := e.created("/topics", e.keyB, map[string]any{"name": "News", "default_subscription": "opt_in"})
	with := func(topic string) map[string]any {
		m := map[string]any{}
		for k, v := range sandboxSend {
			m[k] = v
		}
		m["topic_id"] = topic
		return m
	}
	r := e.do("POST", "/emails", e.keyA, with(theirs))
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], "topic_id")
	requireError(t, e.do("POST", "/emails", e.keyA, with("nope")), 422, "validation_error")
	r = e.do("POST", "/emails/batch", e.keyA, []any{with(theirs)})
	requireError(t, r, 422, "validation_error")

	r = e.do("POST", "/emails", e.keyA, with(mine))
	require.Equal(t, 200, r.status, string(r.raw))
	got, err := e.store.Emails.GetEmail(context.Background(), e.teamA, uuid.MustParse(r.body["id"].(string)))
	require.NoError(t, err)
	require.NotNil(t, got.TopicID)
	require.Equal(t, mine, got.TopicID.String())
	g := e.do("GET", "/emails/"+r.body["id"].(string), e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, mine, g.body["topic_id"])

	r = e.do("POST", "/emails/batch", e.keyA, []any{with(mine), sandboxSend})
	require.Equal(t, 200, r.status, string(r.raw))
	ids := r.body["data"].([]any)
	got, err = e.store.Emails.GetEmail(context.Background(), e.teamA, uuid.MustParse(ids[0].(map[string]any)["id"].(string)))
	require.NoError(t, err)
	require.Equal(t, mine, got.TopicID.String())
	got, err = e.store.Emails.GetEmail(context.Background(), e.teamA, uuid.MustParse(ids[1].(map[string]any)["id"].(string)))
	require.NoError(t, err)
	require.Nil(t, got.TopicID)
	g = e.do("GET", "/emails/"+got.ID.String(), e.keyA, nil)
	require.Contains(t, g.body, "topic_id")
	require.Nil(t, g.body["topic_id"])
}

// TestLegacyAudiencesWire pins what the Node SDK test does not read: the
// shapes of /audiences, the 404s' messages and the 422s of malformed ids.
func TestLegacyAudiencesWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/audiences", e.keyA, map[string]any{"name": "Registered"})
	require.Equal(t, 201, r.status, string(r.raw))
	aud := r.body["id"].(string)
	require.Equal(t, map[string]any{"object": "audience", "id": aud, "name": "Registered"}, r.body)
	requireError(t, e.do("POST", "/audiences", e.keyA, map[string]any{}), 422, "missing_required_field")

	l := e.do("GET", "/audiences", e.keyA, nil)
	require.Equal(t, []string{aud}, listIDs(t, l))
	item := l.body["data"].([]any)[0].(map[string]any)
	require.Equal(t, "audience", item["object"])
	require.Equal(t, "Registered", item["name"])
	require.NotEmpty(t, item["created_at"])
	// The audience is the segment.
	g := e.do("GET", "/segments/"+aud, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "segment", g.body["object"])

	ct := e.created("/audiences/"+aud+"/contacts", e.keyA, map[string]any{"email": "ann@example.com",
		"first_name": "Ann"})
	other := e.created("/contacts", e.keyA, map[string]any{"email": "bob@example.com"})
	g = e.do("GET", "/audiences/"+aud+"/contacts/ann@example.com", e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, ct, g.body["id"])
	require.Equal(t, []string{ct}, listIDs(t, e.do("GET", "/audiences/"+aud+"/contacts", e.keyA, nil)))

	missing := uuid.NewString()
	for _, tc := range []struct {
		method, path, key string
		status            int
		name, message     string
	}{
		{"GET", "/audiences/" + missing, e.keyA, 404, "not_found", "Audience not found."},
		{"GET", "/audiences/" + aud, e.keyB, 404, "not_found", "Audience not found."},
		{"DELETE", "/audiences/" + aud, e.keyB, 404, "not_found", "Audience not found."},
		{"GET", "/audiences/" + aud + "/contacts", e.keyB, 404, "not_found", "Audience not found."},
		{"POST", "/audiences/" + aud + "/contacts", e.keyB, 404, "not_found", "Audience not found."},
		{"GET", "/audiences/" + aud + "/contacts/" + ct, e.keyB, 404, "not_found", "Audience not found."},
		{"PATCH", "/audiences/" + aud + "/contacts/" + ct, e.keyB, 404, "not_found", "Audience not found."},
		{"DELETE", "/audiences/" + aud + "/contacts/ann@example.com", e.keyB, 404, "not_found", "Audience not found."},
		{"GET", "/audiences/" + aud + "/contacts/" + other, e.keyA, 404, "not_found", "Contact not found."},
		{"DELETE", "/audiences/" + aud + "/contacts/bob@example.com", e.keyA, 404, "not_found", "Contact not found."},
		{"GET", "/audiences/x", e.keyA, 422, "invalid_parameter", "The id must be a valid UUID."},
		{"GET", "/audiences/x/contacts/" + ct, e.keyA, 422, "invalid_parameter", "The id must be a valid UUID."},
		{"GET", "/audiences/" + aud + "/contacts/bob", e.keyA, 422, "invalid_parameter",
			"The path must name a contact by its id or its email address."},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.key, map[string]any{"email": "eve@example.com"})
			requireError(t, r, tc.status, tc.name)
			require.Equal(t, tc.message, r.body["message"])
		})
	}
	// Nothing of team A changed.
	require.Equal(t, []string{ct}, listIDs(t, e.do("GET", "/audiences/"+aud+"/contacts", e.keyA, nil)))

	d := e.do("DELETE", "/audiences/"+aud, e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	require.Equal(t, map[string]any{"object": "audience", "id": aud, "deleted": true}, d.body)
}
