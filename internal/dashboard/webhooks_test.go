package dashboard_test

import (
	"bytes"
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/webhook"
)

// receiver is a webhook endpoint that records what it is sent.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []receivedRequest
}

type receivedRequest struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, receivedRequest{header: r.Header.Clone(), body: b})
		rc.mu.Unlock()
		_, _ = w.Write([]byte("thanks"))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []receivedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedRequest(nil), rc.reqs...)
}

// fixtureBox is the master key of newFixture.
func fixtureBox(t *testing.T) *seal.Box {
	box, err := seal.New(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	return box
}

var secretShownRe = regexp.MustCompile(`<code class="token" id="signing-secret">(whsec_[^<]+)</code>`)

// shownSecret is the signing secret on a page, "" when none is shown.
func shownSecret(page string) string {
	m := secretShownRe.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// addWebhook submits the Add an endpoint form and returns the new id.
func (f *fixture) addWebhook(c *http.Client, endpoint string, events ...string) uuid.UUID {
	f.t.Helper()
	_, page := get(f.t, c, f.srv.URL+"/dashboard/webhooks")
	res, _ := post(f.t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"csrf": {csrf(f.t, page)},
		"endpoint": {endpoint}, "events": events})
	require.Equal(f.t, http.StatusSeeOther, res.StatusCode)
	loc := strings.TrimSuffix(strings.TrimPrefix(res.Header.Get("Location"), "/dashboard/webhooks/"), "?done=added")
	id, err := uuid.Parse(loc)
	require.NoError(f.t, err, res.Header.Get("Location"))
	return id
}

func TestAddWebhookFromTheDashboard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	_, page := get(t, c, f.srv.URL+"/dashboard/webhooks")
	require.Contains(t, page, "No endpoints yet.", "the empty list says what to do")
	for _, typ := range webhook.Types {
		require.Contains(t, page, `name="events" value="`+typ+`"`, "a box for every event type")
	}
	require.Contains(t, page, `<label for="webhook-endpoint">`)
	require.Contains(t, page, "<legend>Events to send</legend>")
	token := csrf(t, page)

	res, _ := post(t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"endpoint": {"https://x.test/"}, "events": {"email.sent"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the CSRF token is required")

	// Errors are shown with the input kept.
	res, page = post(t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"csrf": {token},
		"endpoint": {"ftp://hooks.shop.test/in"}, "events": {"email.bounced", "domain.created"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>endpoint</code> field must be an absolute https or http URL.")
	require.Contains(t, page, `value="ftp://hooks.shop.test/in"`)
	require.Contains(t, page, `value="email.bounced" checked`)
	require.Contains(t, page, `value="domain.created" checked`)
	require.NotContains(t, page, `value="email.sent" checked`)
	res, page = post(t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"csrf": {token},
		"endpoint": {"https://hooks.shop.test/in"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>events</code> field must list at least one event type.")
	require.Contains(t, page, `value="https://hooks.shop.test/in"`)
	list, _, err := f.store.Webhooks.ListWebhooks(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)

	res, _ = post(t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"csrf": {token},
		"endpoint": {"https://hooks.shop.test/in"}, "events": {"email.sent", "email.bounced"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	list, _, err = f.store.Webhooks.ListWebhooks(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	wh := list[0]
	require.Equal(t, "/dashboard/webhooks/"+wh.ID.String()+"?done=added", res.Header.Get("Location"))
	require.Equal(t, "https://hooks.shop.test/in", wh.Endpoint)
	require.Equal(t, []string{"email.sent", "email.bounced"}, wh.Events)
	require.Equal(t, store.WebhookEnabled, wh.Status)
	keys, err := webhook.Keys(fixtureBox(t), wh, time.Now())
	require.NoError(t, err, "the secret is sealed with the master key")

	res, page = get(t, c, f.srv.URL+res.Header.Get("Location"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Endpoint added.")
	require.Contains(t, page, "No events sent to this endpoint yet.")
	require.NotContains(t, page, "whsec_", "the secret is shown only when asked for")

	// Reveal: the page shows the secret the endpoint signs with.
	res, page = post(t, c, f.srv.URL+"/dashboard/webhooks/"+wh.ID.String()+"/secret", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	first := shownSecret(page)
	require.Equal(t, webhook.FormatSecret(keys[0]), first, "the secret is shown")

	// Rotate: a new secret, the old one kept for the overlap.
	res, page = post(t, c, f.srv.URL+"/dashboard/webhooks/"+wh.ID.String()+"/rotate", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	second := shownSecret(page)
	require.NotEmpty(t, second)
	require.NotEqual(t, first, second)
	require.Contains(t, page, "keeps signing alongside it for 24 hours")
	wh, err = f.store.Webhooks.GetWebhook(ctx, teamA, wh.ID)
	require.NoError(t, err)
	keys, err = webhook.Keys(fixtureBox(t), wh, time.Now())
	require.NoError(t, err)
	require.Len(t, keys, 2, "both secrets sign during the overlap")
	require.Equal(t, second, webhook.FormatSecret(keys[0]))
}

func TestWebhookTestEditStatusAndDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	rc := newReceiver(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	id := f.addWebhook(c, rc.srv.URL+"/hooks", "email.sent")
	detail := f.srv.URL + "/dashboard/webhooks/" + id.String()
	_, page := get(t, c, detail)
	token := csrf(t, page)
	require.Contains(t, page, `<label for="test-type">`)

	// A test event goes out now, signed, and shows with its attempt.
	res, _ := post(t, c, detail+"/test", url.Values{"csrf": {token}, "type": {"email.delivered"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	got := rc.requests()
	require.Len(t, got, 1)
	require.Contains(t, string(got[0].body), `"type":"email.delivered"`)
	wh, err := f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.NoError(t, err)
	keys, err := webhook.Keys(fixtureBox(t), wh, time.Now())
	require.NoError(t, err)
	unix, err := strconv.ParseInt(got[0].header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	ts := time.Unix(unix, 0)
	require.Equal(t, webhook.Sign(keys[0], got[0].header.Get("webhook-id"), ts, got[0].body), got[0].header.Get("webhook-signature"))
	loc := res.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/dashboard/webhooks/"+id.String()+"/events/"), loc)
	_, page = get(t, c, f.srv.URL+loc)
	require.Contains(t, page, `class="badge ok">200<`)
	require.Contains(t, page, "thanks", "the endpoint's answer")
	_, page = get(t, c, detail)
	require.Contains(t, page, got[0].header.Get("webhook-id"), "the event is listed on the endpoint's page")
	require.Contains(t, page, `<span class="badge ok">success</span>`)

	// Edit: a bad change is shown with what was typed; a good one is saved.
	res, page = post(t, c, detail, url.Values{"csrf": {token}, "endpoint": {rc.srv.URL + "/v2"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>events</code> field must list at least one event type.")
	require.Contains(t, page, `value="`+rc.srv.URL+`/v2"`)
	require.NotContains(t, page, `value="email.sent" checked`, "the boxes as they were sent")
	res, _ = post(t, c, detail, url.Values{"csrf": {token}, "endpoint": {rc.srv.URL + "/v2"},
		"events": {"domain.created", "email.failed"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	wh, err = f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.NoError(t, err)
	require.Equal(t, rc.srv.URL+"/v2", wh.Endpoint)
	require.ElementsMatch(t, []string{"domain.created", "email.failed"}, wh.Events)

	// Disable and enable, waking the delivery each time.
	res, _ = post(t, c, detail+"/status", url.Values{"csrf": {token}, "status": {"disabled"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	wh, err = f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.NoError(t, err)
	require.Equal(t, store.WebhookDisabled, wh.Status)
	_, page = get(t, c, f.srv.URL+res.Header.Get("Location"))
	require.Contains(t, page, "Endpoint disabled")
	require.Contains(t, page, "Disabled by a team member.")
	require.Contains(t, page, `<button type="submit">Enable endpoint</button>`)
	res, _ = post(t, c, detail+"/status", url.Values{"csrf": {token}, "status": {"paused"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	res, _ = post(t, c, detail+"/status", url.Values{"csrf": {token}, "status": {"enabled"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	wh, err = f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.NoError(t, err)
	require.Equal(t, store.WebhookEnabled, wh.Status)
	require.Equal(t, []string{id.String(), id.String()}, f.waker.ids)

	// Delete after confirming.
	res, page = get(t, c, detail+"/delete")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Delete this endpoint?")
	_, err = f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.NoError(t, err, "the confirmation page deletes nothing")
	res, _ = post(t, c, detail+"/delete", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/webhooks", res.Header.Get("Location"))
	_, err = f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestWebhookPagesAreTeamScoped: another team can neither see nor change
// an endpoint, nor read its secret, through the dashboard's routes.
func TestWebhookPagesAreTeamScoped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	rc := newReceiver(t)
	ca := f.browser()
	f.login(ca, f.a.Email, f.a.Password)
	id := f.addWebhook(ca, rc.srv.URL+"/private", "email.sent")

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	f.requireOutOfReach(cb, "/dashboard/webhooks", "/dashboard/webhooks/"+id.String(), []string{"", "/delete"},
		[]string{"", "/status", "/secret", "/rotate", "/test", "/delete"},
		url.Values{"endpoint": {"https://evil.test/"}, "events": {"email.sent"}, "status": {"disabled"}}, "/private", "whsec_")
	require.Empty(t, rc.requests(), "no test event was sent")
	wh, err := f.store.Webhooks.GetWebhook(ctx, teamA, id)
	require.NoError(t, err, "still there")
	require.Equal(t, rc.srv.URL+"/private", wh.Endpoint)
	require.Equal(t, store.WebhookEnabled, wh.Status)
	require.Nil(t, wh.PreviousSecret, "not rotated")
}

// TestWebhookLimitShownOnThePage: past the team's limit of endpoints the
// form says so, with the input kept.
func TestWebhookLimitShownOnThePage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	for range store.MaxWebhooksPerTeam {
		require.NoError(t, f.store.Webhooks.CreateWebhook(ctx, store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: teamA,
			Endpoint: "https://hooks.shop.test/", Events: []string{"email.sent"}, Status: store.WebhookEnabled,
			Secret: []byte("sealed")}))
	}
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/webhooks")
	res, page := post(t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"csrf": {csrf(t, page)},
		"endpoint": {"https://hooks.shop.test/one-more"}, "events": {"email.sent"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Your team already has 20 webhook endpoints, the most allowed: delete one first.")
	require.Contains(t, page, `value="https://hooks.shop.test/one-more"`)
}
