package unsubscribe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// fixture is a team with a webhook endpoint subscribed to contact events,
// three topics (public opt-in, private opt-in, public opt-out) and a
// handler on the real store.
type fixture struct {
	t                    *testing.T
	st                   *store.Store
	h                    *Handler
	sealer               *Sealer
	team, other, webhook uuid.UUID
	news, secret, deals  store.Topic
}

func newFixture(t *testing.T, limiter Limiter) *fixture {
	ctx := context.Background()
	f := &fixture{t: t, st: storetest.New(t), sealer: testSealer(t, 3)}
	f.team, f.other = uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, team := range []uuid.UUID{f.team, f.other} {
		require.NoError(t, f.st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	}
	f.webhook = uuid.Must(uuid.NewV7())
	require.NoError(t, f.st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: f.webhook, TeamID: f.team, Endpoint: "https://hooks.test/x",
		Events: []string{"contact.created", "contact.updated", "contact.topics.updated"}, Status: store.WebhookEnabled,
		Secret: []byte("sealed")}))
	topic := func(name, def, vis string) store.Topic {
		tp, err := f.st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, Name: name,
			Description: name + " description", DefaultSubscription: def, Visibility: vis})
		require.NoError(t, err)
		return tp
	}
	f.news = topic("News", store.TopicOptIn, "public")
	f.secret = topic("Secret", store.TopicOptIn, "private")
	f.deals = topic("Deals", store.TopicOptOut, "public")
	var err error
	f.h, err = NewHandler(Config{Sealer: f.sealer, PublicURL: "https://mail.test", Limiter: limiter, Rate: 2}, f.st.Audience)
	require.NoError(t, err)
	return f
}

func (f *fixture) token(topic *uuid.UUID, email string) string {
	text, err := f.sealer.Seal(Token{TeamID: f.team, EmailID: uuid.New(), TopicID: topic, Email: email})
	require.NoError(f.t, err)
	return text
}

func (f *fixture) do(method, tok, contentType string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, Path+tok, body)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.h.ServeUnsubscribe(w, r, "192.0.2.1")
	return w
}

func (f *fixture) oneClick(tok string) *httptest.ResponseRecorder {
	return f.do("POST", tok, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
}

// events lists the webhook events queued for the team, oldest first.
func (f *fixture) events() []string {
	msgs, _, err := f.st.Webhooks.ListWebhookMessages(context.Background(), f.team, f.webhook, store.Page{Limit: 100})
	require.NoError(f.t, err)
	var out []string
	for i := len(msgs) - 1; i >= 0; i-- {
		var body struct {
			Data map[string]any `json:"data"`
		}
		require.NoError(f.t, json.Unmarshal(msgs[i].Payload, &body))
		out = append(out, msgs[i].Type+":"+body.Data["email"].(string))
	}
	return out
}

func (f *fixture) blocked(topic uuid.UUID, email string) bool {
	b, err := f.st.Audience.TopicBlocked(context.Background(), f.team, topic, []string{email})
	require.NoError(f.t, err)
	return b[store.NormalizeAddress(email)]
}

func TestOneClickUnsubscribesFromTheTopic(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	ct, err := f.st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, Email: "ann@x.test"}, nil, nil)
	require.NoError(t, err)
	// The same address in another team is another contact.
	otherAnn, err := f.st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: f.other, Email: "ann@x.test"}, nil, nil)
	require.NoError(t, err)
	tok := f.token(&f.news.ID, "Ann@x.test")

	require.False(t, f.blocked(f.news.ID, "ann@x.test"))
	w := f.oneClick(tok)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.True(t, f.blocked(f.news.ID, "ann@x.test"), "later sends with the topic are blocked")
	require.False(t, f.blocked(f.secret.ID, "ann@x.test"), "other topics are not touched")
	require.Equal(t, []string{"contact.topics.updated:ann@x.test"}, f.events())
	wakes, err := storetest.OutboxLen(ctx, f.st)
	require.NoError(t, err)
	require.Equal(t, 1, wakes, "the endpoint's delivery is woken when the change commits")
	msgs, _, err := f.st.Webhooks.ListWebhookMessages(ctx, f.team, f.webhook, store.Page{Limit: 1})
	require.NoError(t, err)
	require.Contains(t, string(msgs[0].Payload), `"topics": [{"id": "`+f.news.ID.String()+`", "subscription": "opt_out"}]`)
	require.Contains(t, string(msgs[0].Payload), ct.ID.String())

	// Again: nothing changes, no event.
	require.Equal(t, http.StatusOK, f.oneClick(tok).Code)
	require.Len(t, f.events(), 1)

	// Multipart, as RFC 8058 §3.2 prefers, from a topic-less token:
	// unsubscribed from everything.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	require.NoError(t, mw.WriteField("List-Unsubscribe", "One-Click"))
	require.NoError(t, mw.Close())
	w = f.do("POST", f.token(nil, "ann@x.test"), mw.FormDataContentType(), &buf)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	got, err := f.st.Audience.Contact(ctx, f.team, store.ContactRef{Email: "ann@x.test"})
	require.NoError(t, err)
	require.True(t, got.Unsubscribed)
	require.Equal(t, []string{"contact.topics.updated:ann@x.test", "contact.updated:ann@x.test"}, f.events())

	// Team isolation: the other team's contact is as it was.
	o, err := f.st.Audience.Contact(ctx, f.other, store.ContactRef{ID: &otherAnn.ID})
	require.NoError(t, err)
	require.False(t, o.Unsubscribed)
}

func TestOneClickCreatesTheContact(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	require.Equal(t, http.StatusOK, f.oneClick(f.token(&f.news.ID, "new@x.test")).Code)
	ct, err := f.st.Audience.Contact(ctx, f.team, store.ContactRef{Email: "new@x.test"})
	require.NoError(t, err)
	require.False(t, ct.Unsubscribed)
	require.True(t, f.blocked(f.news.ID, "new@x.test"))
	require.Equal(t, []string{"contact.created:new@x.test", "contact.topics.updated:new@x.test"}, f.events())

	// An opt-out topic the address never joined: nothing to do.
	require.Equal(t, http.StatusOK, f.oneClick(f.token(&f.deals.ID, "other@x.test")).Code)
	_, err = f.st.Audience.Contact(ctx, f.team, store.ContactRef{Email: "other@x.test"})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.True(t, f.blocked(f.deals.ID, "other@x.test"))

	// No topic: a contact unsubscribed from everything.
	require.Equal(t, http.StatusOK, f.oneClick(f.token(nil, "all@x.test")).Code)
	ct, err = f.st.Audience.Contact(ctx, f.team, store.ContactRef{Email: "all@x.test"})
	require.NoError(t, err)
	require.True(t, ct.Unsubscribed)
	require.True(t, f.blocked(f.news.ID, "all@x.test"))
}

func TestPreferencesPage(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	tok := f.token(&f.secret.ID, "bob@x.test")

	w := f.do("GET", tok, "", nil)
	require.Equal(t, http.StatusOK, w.Code)
	page := w.Body.String()
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, "no-referrer", w.Header().Get("Referrer-Policy"))
	require.Contains(t, w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Contains(t, page, "bob@x.test")
	require.Contains(t, page, "News")
	require.Contains(t, page, "Deals")
	require.Contains(t, page, "Secret", "the email's own topic is listed though private")
	require.Contains(t, page, `value="`+f.news.ID.String()+`" checked`)
	require.Contains(t, page, `value="`+f.deals.ID.String()+`" >`, "opt-out topic unchecked")
	require.Contains(t, page, `action="/unsubscribe/`+tok+`"`)
	// Another email's token does not list the private topic.
	require.NotContains(t, f.do("GET", f.token(&f.news.ID, "bob@x.test"), "", nil).Body.String(), "Secret")

	// Save: News off, Deals on; no contact existed.
	form := "form=preferences&topic=" + f.deals.ID.String() + "&topic=" + f.secret.ID.String()
	w = f.do("POST", tok, "application/x-www-form-urlencoded", strings.NewReader(form), "Origin", "https://mail.test")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "Your preferences were saved.")
	require.True(t, f.blocked(f.news.ID, "bob@x.test"))
	require.False(t, f.blocked(f.deals.ID, "bob@x.test"))
	require.False(t, f.blocked(f.secret.ID, "bob@x.test"))
	require.Equal(t, []string{"contact.created:bob@x.test", "contact.topics.updated:bob@x.test"}, f.events())

	// Unsubscribe from everything.
	w = f.do("POST", tok, "application/x-www-form-urlencoded", strings.NewReader(form+"&everything=on"))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "You are unsubscribed from all emails")
	ct, err := f.st.Audience.Contact(ctx, f.team, store.ContactRef{Email: "bob@x.test"})
	require.NoError(t, err)
	require.True(t, ct.Unsubscribed)
	require.True(t, f.blocked(f.deals.ID, "bob@x.test"))
	require.Equal(t, "contact.updated:bob@x.test", f.events()[2])

	// From another origin: refused, nothing changed.
	w = f.do("POST", tok, "application/x-www-form-urlencoded", strings.NewReader("form=preferences"), "Origin", "https://evil.test")
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Len(t, f.events(), 3)
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.token(&f.news.ID, "ann@x.test")
	flipped := "A"
	if tok[10] == 'A' {
		flipped = "B"
	}
	for name, bad := range map[string]string{
		"tampered":  tok[:10] + flipped + tok[11:],
		"truncated": tok[:len(tok)-2],
		"foreign": func() string {
			s, _ := testSealer(t, 9).Seal(Token{TeamID: f.team, EmailID: uuid.New(), Email: "a@x.test"})
			return s
		}(),
		"empty":  "",
		"nested": tok + "/x",
	} {
		require.Equal(t, http.StatusNotFound, f.do("GET", bad, "", nil).Code, name)
		require.Equal(t, http.StatusNotFound, f.oneClick(bad).Code, name)
	}
	require.Equal(t, http.StatusBadRequest, f.do("POST", tok, "application/x-www-form-urlencoded", strings.NewReader("x=1")).Code)
	big := "List-Unsubscribe=One-Click&pad=" + strings.Repeat("a", MaxBody)
	require.Equal(t, http.StatusRequestEntityTooLarge,
		f.do("POST", tok, "application/x-www-form-urlencoded", strings.NewReader(big)).Code)
	require.Equal(t, http.StatusMethodNotAllowed, f.do("DELETE", tok, "", nil).Code)
	require.Empty(t, f.events(), "nothing changed")
}

func TestRateLimitPerClient(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, ratelimit.NewLocal(ratelimit.LocalConfig{Now: func() time.Time { return now }}))
	tok := f.token(&f.news.ID, "ann@x.test")
	require.Equal(t, http.StatusOK, f.do("GET", tok, "", nil).Code)
	require.Equal(t, http.StatusOK, f.do("GET", tok, "", nil).Code)
	w := f.do("GET", tok, "", nil)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	// Another client is not held back.
	r := httptest.NewRequest("GET", Path+tok, nil)
	w = httptest.NewRecorder()
	f.h.ServeUnsubscribe(w, r, "192.0.2.2")
	require.Equal(t, http.StatusOK, w.Code)
}

// An unsubscribe through a broadcast's email counts in the broadcast's
// report, once however often it is clicked; the same click on an email of
// another broadcast, or a click that changes nothing, counts nowhere.
func TestOneClickOfABroadcastCountsInItsReport(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	seg, err := f.st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, Name: "all"})
	require.NoError(t, err)
	ct, err := f.st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, Email: "reader@x.test"},
		[]uuid.UUID{seg.ID}, nil)
	require.NoError(t, err)
	html := "<p>hi</p>"
	b, err := f.st.Broadcasts.CreateBroadcast(ctx, store.Broadcast{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, SegmentID: &seg.ID,
		TopicID: &f.news.ID, From: "onboarding@posthaste.test", Subject: "s", HTML: &html})
	require.NoError(t, err)
	_, err = f.st.Broadcasts.SendBroadcast(ctx, f.team, b.ID, nil, nil)
	require.NoError(t, err)
	_, err = f.st.Broadcasts.HandOffBroadcastChunk(ctx, store.BroadcastChunk{BroadcastID: b.ID, Size: 10, FromDomain: "posthaste.test",
		Now: time.Now()}, func(b store.Broadcast, c store.BroadcastContact) (store.RenderedBroadcast, error) {
		return store.RenderedBroadcast{Subject: b.Subject, HTML: b.HTML}, nil
	})
	require.NoError(t, err)
	rs, _, err := f.st.Broadcasts.BroadcastRecipients(ctx, f.team, b.ID, "", "", "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	tok, err := f.sealer.Seal(Token{TeamID: f.team, EmailID: rs[0].EmailID, TopicID: &f.news.ID, BroadcastID: &b.ID,
		Email: ct.Email})
	require.NoError(t, err)
	for range 2 {
		require.Equal(t, http.StatusOK, f.oneClick(tok).Code)
	}
	require.True(t, f.blocked(f.news.ID, ct.Email))
	counts, err := f.st.Broadcasts.BroadcastCounts(ctx, f.team, b.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.Unsubscribed)
	unsub, _, err := f.st.Broadcasts.BroadcastRecipients(ctx, f.team, b.ID, "unsubscribed", "", "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, unsub, 1)
	require.Equal(t, ct.Email, unsub[0].Email)

	// A token naming an email that is not this broadcast's counts nowhere.
	other, err := f.sealer.Seal(Token{TeamID: f.team, EmailID: uuid.New(), BroadcastID: &b.ID, Email: "someone@x.test"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, f.oneClick(other).Code)
	counts, err = f.st.Broadcasts.BroadcastCounts(ctx, f.team, b.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.Unsubscribed)
}
