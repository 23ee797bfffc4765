package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// broadcastWaker records the broadcasts woken by a cancel.
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
	return append([]uuid.UUID(nil), w.ids...)
}

// broadcastFixture is the dashboard with a broadcast service, and a
// segment of team A with two subscribed contacts and one that
// unsubscribed.
type broadcastFixture struct {
	*fixture
	waker   *broadcastWaker
	segment store.Segment
	c       *http.Client
}

func newBroadcastFixture(t *testing.T) *broadcastFixture {
	t.Helper()
	wk := &broadcastWaker{}
	st := storetest.New(t)
	f := newFixtureOn(t, st, func(cfg *dashboard.Config) {
		cfg.Broadcasts = broadcast.NewService(broadcast.Config{Store: st, Submit: submit.New(submit.Config{Store: submit.StoreOf(st)}), Waker: wk})
	})
	bf := &broadcastFixture{fixture: f, waker: wk, c: f.browser()}
	res, _ := f.login(bf.c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	return bf
}

// addAudience adds the segment and its contacts.
func (f *broadcastFixture) addAudience() {
	t := f.t
	ctx := context.Background()
	team := uuid.MustParse(f.a.TeamID)
	var err error
	f.segment, err = f.store.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "Newsletter"})
	require.NoError(t, err)
	for i, addr := range []string{"delivered+1@posthaste.test", "delivered+2@posthaste.test", "gone@posthaste.test"} {
		_, err := f.store.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: addr,
			FirstName: []string{"Ada", "Bob", "Cy"}[i], Unsubscribed: i == 2}, []uuid.UUID{f.segment.ID}, nil)
		require.NoError(t, err)
	}
}

// create makes a draft with the New broadcast button and returns its id.
func (f *broadcastFixture) create() uuid.UUID {
	t := f.t
	_, page := get(t, f.c, f.srv.URL+"/dashboard/broadcasts")
	res, _ := post(t, f.c, f.srv.URL+"/dashboard/broadcasts", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	return idAfter(t, res, "/dashboard/broadcasts/")
}

// form is the editor's form as the page shows it for b.
func (f *broadcastFixture) form(id uuid.UUID) url.Values {
	t := f.t
	res, page := get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String())
	require.Equal(t, http.StatusOK, res.StatusCode)
	b, err := f.store.Broadcasts.Broadcast(context.Background(), uuid.MustParse(f.a.TeamID), id)
	require.NoError(t, err)
	v := url.Values{"csrf": {csrf(t, page)}, "name": {b.Name}, "segment_id": {b.SegmentID.String()}, "topic_id": {""},
		"from": {b.From}, "reply_to": {""}, "subject": {b.Subject}, "preview_text": {b.PreviewText},
		"format": {"components"}, "components": {string(b.Components)}}
	return v
}

func (f *broadcastFixture) load(id uuid.UUID) store.Broadcast {
	b, err := f.store.Broadcasts.Broadcast(context.Background(), uuid.MustParse(f.a.TeamID), id)
	require.NoError(f.t, err)
	return b
}

// autosave posts form as the editor's script does and decodes the answer.
func (f *broadcastFixture) autosave(id uuid.UUID, form url.Values) (int, map[string]string) {
	t := f.t
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/dashboard/broadcasts/"+id.String(), strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, err := f.c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	var out map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	return res.StatusCode, out
}

func TestBroadcastListAndCreate(t *testing.T) {
	t.Parallel()
	f := newBroadcastFixture(t)
	res, page := get(t, f.c, f.srv.URL+"/dashboard/broadcasts")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `href="/dashboard/broadcasts" aria-current="page"`, "in the navigation")
	require.Contains(t, page, "No broadcasts yet.")
	require.Contains(t, page, "Add a segment")
	res, page = post(t, f.c, f.srv.URL+"/dashboard/broadcasts", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "add a segment first")

	f.addAudience()
	id := f.create()
	b := f.load(id)
	require.Equal(t, store.BroadcastDraft, b.Status)
	require.Equal(t, f.segment.ID, *b.SegmentID)
	require.Equal(t, "onboarding@posthaste.test", b.From, "the sandbox sender without a verified domain")
	require.Contains(t, string(b.Components), "{{{FIRST_NAME|there}}}")
	require.Contains(t, string(b.Components), `"footer"`)
	require.Contains(t, *b.HTML, "{{{RESEND_UNSUBSCRIBE_URL}}}", "the footer links to the unsubscribe URL")

	res, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `data-blocks-editor`)
	require.Contains(t, page, `data-variables="[&#34;FIRST_NAME&#34;,&#34;LAST_NAME&#34;,&#34;EMAIL&#34;]"`)
	require.Contains(t, page, "Newsletter (2 subscribed contacts)")
	require.Contains(t, page, `/dashboard/assets/blocks-editor.js`)
	require.Contains(t, page, `/dashboard/assets/broadcast-editor.js`)

	// The preview: sandboxed, as the sample contact gets it.
	res, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/preview")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "sandbox")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, page, "Hi Jane, here is what is new", "sample names: the member has no contact")
	require.NotContains(t, page, "RESEND_UNSUBSCRIBE_URL")

	// The member's own contact is the sample when there is one.
	_, err := f.store.Audience.CreateContact(context.Background(), store.Contact{ID: uuid.Must(uuid.NewV7()),
		TeamID: uuid.MustParse(f.a.TeamID), Email: f.a.Email, FirstName: "Alice"}, nil, nil)
	require.NoError(t, err)
	_, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/preview")
	require.Contains(t, page, "Hi Alice, here is what is new")

	_, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts")
	require.Contains(t, page, "Untitled broadcast")
	require.Contains(t, page, "Newsletter")
	require.Contains(t, page, ">draft<")
}

func TestBroadcastAutosave(t *testing.T) {
	t.Parallel()
	f := newBroadcastFixture(t)
	f.addAudience()
	id := f.create()
	form := f.form(id)
	form.Set("name", "November news")
	form.Set("subject", "News for {{{FIRST_NAME|you}}}")
	form.Set("preview_text", "Three things we shipped")
	form.Set("reply_to", "team@example.com, help@example.com")
	form.Set("components", `{"blocks": [{"type": "heading", "level": 2, "text": "Shipped"}]}`)
	status, out := f.autosave(id, form)
	require.Equal(t, http.StatusOK, status, out)
	require.NotEmpty(t, out["saved_at"])
	require.Equal(t, "News for Jane", out["subject"], "rendered for the sample contact")
	b := f.load(id)
	require.Equal(t, "November news", b.Name)
	require.Equal(t, "News for {{{FIRST_NAME|you}}}", b.Subject)
	require.Equal(t, []string{"team@example.com", "help@example.com"}, b.ReplyTo)
	require.Equal(t, "Three things we shipped", b.PreviewText)
	require.JSONEq(t, `{"blocks": [{"type": "heading", "level": 2, "text": "Shipped"}],
		"settings": {"preview_text": "Three things we shipped"}}`, string(b.Components), "the preview text is the document's")
	require.Contains(t, *b.HTML, "Three things we shipped")

	// Reloaded, the editor shows the server's copy.
	_, page := get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String())
	require.Contains(t, page, `value="November news"`)
	require.Contains(t, page, `value="Three things we shipped"`)

	// Invalid values are refused with the field to show, nothing saved.
	for field, value := range map[string]string{"from": "not an address", "components": `{"blocks": [{"type": "nope"}]}`,
		"subject": "two\nlines", "name": " "} {
		bad := cloneForm(form)
		bad.Set(field, value)
		status, out = f.autosave(id, bad)
		require.Equal(t, http.StatusOK, status, field)
		require.Equal(t, field, out["field"], out)
		require.NotEmpty(t, out["error"])
	}
	require.Equal(t, b.UpdatedAt, f.load(id).UpdatedAt, "nothing was written")

	// Without the script, Save saves and comes back.
	form.Set("name", "November newsletter")
	res, _ := post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String(), form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/broadcasts/"+id.String()+"?done=saved", res.Header.Get("Location"))
	form.Set("from", "nobody")
	res, page = post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String(), form)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `id="broadcast-error"`)
	require.Contains(t, page, `value="nobody" aria-invalid="true"`, "the typed value is kept and marked")

	// The HTML body, the advanced alternative.
	form.Set("from", "onboarding@posthaste.test")
	form.Set("format", "html")
	form.Set("html", "<p>Plain {{{FIRST_NAME}}}</p>")
	status, out = f.autosave(id, form)
	require.Equal(t, http.StatusOK, status, out)
	b = f.load(id)
	require.Nil(t, b.Components)
	require.Equal(t, "<p>Plain {{{FIRST_NAME}}}</p>", *b.HTML)
}

var testSentRe = regexp.MustCompile(`href="/dashboard/emails/([0-9a-f-]{36})"`)

func TestBroadcastSendTestSendAndCancel(t *testing.T) {
	t.Parallel()
	f := newBroadcastFixture(t)
	f.addAudience()
	ctx := context.Background()
	team := uuid.MustParse(f.a.TeamID)
	id := f.create()
	form := f.form(id)
	form.Set("subject", "Hello {{{FIRST_NAME|friend}}}")

	// A test to the signed-in member, with the form saved first.
	res, page := post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/test", form)
	require.Equal(t, http.StatusOK, res.StatusCode, page)
	require.Contains(t, page, `id="test-sent"`)
	m := testSentRe.FindStringSubmatch(page)
	require.NotNil(t, m, "a link to the test's email")
	e, err := f.store.Emails.GetEmail(ctx, team, uuid.MustParse(m[1]))
	require.NoError(t, err)
	require.Equal(t, []string{f.a.Email}, e.To)
	require.Equal(t, "[Test] Hello friend", e.Subject, "the member has no contact: fallbacks")
	require.Equal(t, "Hello {{{FIRST_NAME|friend}}}", f.load(id).Subject, "saved before the test")

	// Send now asks first, naming the segment and its subscribed contacts.
	form.Set("mode", "now")
	res, page = post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/send", form)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `id="confirm-send"`)
	require.Contains(t, page, "<strong>Newsletter</strong>")
	require.Contains(t, page, `<strong id="confirm-count">2 contacts</strong>`)
	require.Equal(t, store.BroadcastDraft, f.load(id).Status, "nothing sent before the confirmation")
	res, _ = post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/send",
		url.Values{"csrf": {csrf(t, page)}, "confirm": {"1"}, "mode": {"now"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/broadcasts/"+id.String()+"?done=sent", res.Header.Get("Location"))
	require.Equal(t, store.BroadcastQueued, f.load(id).Status)

	// The report: read-only, with its counts, polled as JSON.
	res, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"?done=sent")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotContains(t, page, `id="broadcast-form"`)
	require.Contains(t, page, `data-count="delivered"`)
	require.Contains(t, page, "Cancel broadcast")
	require.Contains(t, page, "No emails handed over yet.")
	res, body := get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/progress")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var progress struct {
		Status  string           `json:"status"`
		Counts  map[string]int64 `json:"counts"`
		Settled bool             `json:"settled"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &progress))
	require.Equal(t, "queued", progress.Status)
	require.Contains(t, progress.Counts, "delivered")
	require.False(t, progress.Settled)

	// A sent broadcast is no longer edited.
	form.Set("name", "Too late")
	status, out := f.autosave(id, form)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, out["error"], "queued")

	res, _ = post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/cancel", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, store.BroadcastCanceled, f.load(id).Status)
	require.Equal(t, []uuid.UUID{id}, f.waker.woken(), "the workflow is woken")
	_, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String())
	require.NotContains(t, page, "Cancel broadcast")

	// Duplicate opens a new draft with the same content.
	res, _ = post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/duplicate", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	dup := idAfter(t, res, "/dashboard/broadcasts/")
	require.NotEqual(t, id, dup)
	d := f.load(dup)
	require.Equal(t, store.BroadcastDraft, d.Status)
	require.Equal(t, "Hello {{{FIRST_NAME|friend}}}", d.Subject)
	require.Equal(t, "Copy of Untitled broadcast", d.Name)
	_, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts")
	require.Contains(t, page, ">canceled<")
}

func TestBroadcastScheduleAndErrors(t *testing.T) {
	t.Parallel()
	f := newBroadcastFixture(t)
	f.addAudience()
	id := f.create()
	form := f.form(id)
	send := func(v url.Values) (*http.Response, string) {
		return post(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String()+"/send", v)
	}

	// Missing fields and unparsable times are shown inline.
	bad := cloneForm(form)
	bad.Set("subject", "")
	bad.Set("mode", "now")
	res, page := send(bad)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `id="broadcast-error"`)
	require.Contains(t, page, "<code>subject</code>")
	bad = cloneForm(form)
	bad.Set("mode", "schedule")
	bad.Set("scheduled_at", "whenever you like")
	res, page = send(bad)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `value="whenever you like" aria-invalid="true"`)

	// A sender on a domain the team has not verified is refused at the send.
	bad = cloneForm(form)
	bad.Set("from", "news@unverified.example")
	bad.Set("mode", "now")
	res, page = send(bad)
	require.Equal(t, http.StatusOK, res.StatusCode, "the confirmation")
	res, page = send(url.Values{"csrf": {csrf(t, page)}, "confirm": {"1"}, "mode": {"now"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "unverified.example")
	require.Contains(t, page, `id="broadcast-error"`)
	require.Equal(t, store.BroadcastDraft, f.load(id).Status)

	// Scheduled in natural language: the confirmation carries the time.
	form.Set("mode", "schedule")
	form.Set("scheduled_at", "in 2 hours")
	res, page = send(form)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Schedule this broadcast?")
	at := regexp.MustCompile(`name="scheduled_at" value="([^"]+)"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, at)
	when, err := time.Parse(time.RFC3339, at[0][1])
	require.NoError(t, err, "the confirmation's time is absolute")
	require.WithinDuration(t, time.Now().Add(2*time.Hour), when, time.Minute)
	res, _ = send(url.Values{"csrf": {csrf(t, page)}, "confirm": {"1"}, "mode": {"schedule"}, "scheduled_at": {at[0][1]}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	b := f.load(id)
	require.Equal(t, store.BroadcastScheduled, b.Status)
	require.WithinDuration(t, when, *b.ScheduledAt, time.Second)
	_, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts")
	require.Contains(t, page, ">scheduled<")
	_, page = get(t, f.c, f.srv.URL+"/dashboard/broadcasts/"+id.String())
	require.Contains(t, page, "Scheduled for")
	require.Contains(t, page, "Cancel broadcast")
}

func TestBroadcastPagesAreTeamIsolated(t *testing.T) {
	t.Parallel()
	f := newBroadcastFixture(t)
	f.addAudience()
	id := f.create()
	form := f.form(id)
	form.Set("name", "A's secret plan")
	status, _ := f.autosave(id, form)
	require.Equal(t, http.StatusOK, status)

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	base := "/dashboard/broadcasts/" + id.String()
	form.Set("mode", "now")
	form.Set("confirm", "1")
	f.requireOutOfReach(cb, "/dashboard/broadcasts", base, []string{"", "/preview", "/progress"},
		[]string{"", "/test", "/send", "/cancel", "/duplicate"}, form, "A&#39;s secret plan", "Newsletter")
	require.Equal(t, store.BroadcastDraft, f.load(id).Status)
	require.Equal(t, "A's secret plan", f.load(id).Name)
}
