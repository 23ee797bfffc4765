package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/webhook"
	"github.com/posthaste/posthaste/workflows/contract"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// receiver is a loopback endpoint answering with the statuses of answer,
// in turn (the last one repeats), and recording what it got.
type receiver struct {
	mu     sync.Mutex
	answer []int
	got    []received
	srv    *httptest.Server
}

type received struct {
	ID, Type string
}

func newReceiver(t *testing.T, answer ...int) *receiver {
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var p struct{ Type string }
		_ = json.Unmarshal(b, &p)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Get("webhook-id"), p.Type})
		status := r.answer[min(len(r.got), len(r.answer))-1]
		r.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, "answer from the receiver")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type noticeRecorder struct {
	mu sync.Mutex
	n  []webhook.Notice
}

func (n *noticeRecorder) WebhookDisabled(_ context.Context, wn webhook.Notice) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.n = append(n.n, wn)
	return nil
}

type webhookEnv struct {
	st      *store.Store
	clock   *clocktest.Clock // the activities' and the webhook client's
	acts    *webhook.Activities
	email   store.Email
	hook    store.Webhook
	notices *noticeRecorder
}

func newWebhookEnv(t *testing.T, endpoint string, disableAfter time.Duration) *webhookEnv {
	st := storetest.New(t)
	box, err := seal.New(make([]byte, 32))
	require.NoError(t, err)
	e := acttest.InsertEmail(t, st, "delivered@posthaste.test")
	id := uuid.Must(uuid.NewV7())
	sealed, err := box.Seal(webhook.NewSecret(), id[:])
	require.NoError(t, err)
	w := store.Webhook{ID: id, TeamID: e.TeamID, Endpoint: endpoint, Events: []string{"email.sent", "email.delivered"},
		Status: store.WebhookEnabled, Secret: sealed}
	require.NoError(t, st.Webhooks.CreateWebhook(context.Background(), w))
	n := &noticeRecorder{}
	clock := clocktest.New(time.Now())
	acts := webhook.NewActivities(webhook.ActivitiesConfig{Keys: box, Now: clock.Now,
		Client: webhook.NewClient(egress.New(egress.Config{AllowPrivate: true}),
			webhook.ClientConfig{Timeout: 2 * time.Second, Now: clock.Now}),
		Schedule:     []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
		DisableAfter: disableAfter,
		Notices:      n,
	}, st.Webhooks)
	return &webhookEnv{st: st, clock: clock, acts: acts, email: e, hook: w, notices: n}
}

// deliverAll runs passes the way DeliverWebhook does until nothing waits,
// moving the clock to each pass's NextAt as the workflow's timer would.
func (e *webhookEnv) deliverAll(t *testing.T) contract.DeliverWebhooksResult {
	for i := 0; i < 50; i++ {
		res, err := acttest.Run[contract.DeliverWebhooksInput, contract.DeliverWebhooksResult](t, e.acts.DeliverWebhooks,
			contract.DeliverWebhooksInput{WebhookID: e.hook.ID.String()})
		require.NoError(t, err)
		if res.Stop || (!res.More && res.NextAt == nil) {
			return res
		}
		if res.NextAt != nil {
			e.clock.AdvanceTo(*res.NextAt)
		}
	}
	t.Fatal("messages still waiting after 50 passes")
	return contract.DeliverWebhooksResult{}
}

// record records events stamped by the env's clock, as the activities
// stamp theirs: their webhook messages are due from then.
func (e *webhookEnv) record(t *testing.T, types ...string) {
	var evs []store.Event
	for _, typ := range types {
		evs = append(evs, store.Event{Type: typ, Recipient: "delivered@posthaste.test", CreatedAt: e.clock.Now()})
	}
	require.NoError(t, e.st.Emails.RecordEvents(context.Background(), e.email.ID, evs))
}

func TestWebhookRetriesThenSucceedsInOrder(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 500, 502, 503, 200)
	env := newWebhookEnv(t, r.srv.URL, time.Hour)
	ctx := context.Background()
	env.record(t, store.EventSent, store.EventDelivered)
	env.record(t, store.EventDelivered) // a repeated step queues nothing

	n, err := storetest.OutboxLen(ctx, env.st)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the email's own entry and one wake-up of the endpoint")

	res := env.deliverAll(t)
	require.False(t, res.Stop)
	got := r.received()
	require.Len(t, got, 5)
	for _, g := range got[:4] {
		require.Equal(t, received{got[0].ID, "email.sent"}, g, "the same message id on every retry")
	}
	require.Equal(t, "email.delivered", got[4].Type, "delivered waits until sent got through")

	msgs, _, err := env.st.Webhooks.ListWebhookMessages(ctx, env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	sent := msgs[1]
	require.Equal(t, store.MessageSuccess, sent.Status)
	require.Equal(t, webhook.MessageID(sent.ID), got[0].ID)
	var payload map[string]any
	require.NoError(t, json.Unmarshal(sent.Payload, &payload))
	data := payload["data"].(map[string]any)
	require.Equal(t, env.email.ID.String(), data["email_id"])
	require.Equal(t, []any{"delivered@posthaste.test"}, data["to"])
	require.Equal(t, "Hi ✓", data["subject"])

	attempts, err := env.st.Webhooks.WebhookAttempts(ctx, env.hook.TeamID, sent.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 4)
	require.Equal(t, 500, *attempts[0].ResponseStatus)
	require.Equal(t, "answer from the receiver", attempts[0].ResponseBody)
	require.Equal(t, 200, *attempts[3].ResponseStatus)
	_, err = env.st.Webhooks.WebhookAttempts(ctx, uuid.Must(uuid.NewV7()), sent.ID)
	require.NoError(t, err)

	// Replay: the same id again, a fresh attempt.
	require.NoError(t, env.st.Webhooks.ReplayWebhookMessage(ctx, env.hook.TeamID, env.hook.ID, sent.ID))
	env.deliverAll(t)
	got = r.received()
	require.Len(t, got, 6)
	require.Equal(t, received{webhook.MessageID(sent.ID), "email.sent"}, got[5])
	require.ErrorIs(t, env.st.Webhooks.ReplayWebhookMessage(ctx, uuid.Must(uuid.NewV7()), env.hook.ID, sent.ID), store.ErrNotFound,
		"another team cannot replay it")
}

func TestWebhookGivesUpAfterTheLastRetry(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 500)
	env := newWebhookEnv(t, r.srv.URL, time.Hour)
	env.record(t, store.EventSent)
	env.deliverAll(t)
	require.Len(t, r.received(), 5, "the first attempt and four retries")
	msgs, _, err := env.st.Webhooks.ListWebhookMessages(context.Background(), env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.MessageFailed, msgs[0].Status)
	w, err := env.st.Webhooks.WebhookByID(context.Background(), env.hook.ID)
	require.NoError(t, err)
	require.Equal(t, store.WebhookEnabled, w.Status)
	require.NotNil(t, w.FailingSince)
}

func TestWebhookGoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 410)
	env := newWebhookEnv(t, r.srv.URL, time.Hour)
	env.record(t, store.EventSent, store.EventDelivered)
	res := env.deliverAll(t)
	require.True(t, res.Stop)
	require.Len(t, r.received(), 1)
	w, err := env.st.Webhooks.WebhookByID(context.Background(), env.hook.ID)
	require.NoError(t, err)
	require.Equal(t, store.WebhookDisabled, w.Status)
	msgs, _, err := env.st.Webhooks.ListWebhookMessages(context.Background(), env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	for _, m := range msgs {
		require.Equal(t, store.MessageFailed, m.Status)
	}
	require.Len(t, env.notices.n, 1)

	// A disabled endpoint gets no new messages.
	env.record(t, store.EventBounced)
	msgs, _, err = env.st.Webhooks.ListWebhookMessages(context.Background(), env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
}

func TestWebhookFailingTooLongIsDisabledAndOwnersAreTold(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 500)
	env := newWebhookEnv(t, r.srv.URL, 120*time.Millisecond)
	env.record(t, store.EventSent)
	res := env.deliverAll(t)
	require.True(t, res.Stop)
	w, err := env.st.Webhooks.WebhookByID(context.Background(), env.hook.ID)
	require.NoError(t, err)
	require.Equal(t, store.WebhookDisabled, w.Status)
	require.Contains(t, w.DisabledReason, "Every delivery has failed since")
	require.Len(t, env.notices.n, 1)
	require.Equal(t, env.hook.TeamID, env.notices.n[0].TeamID)
}

func TestWebhookRefusedDestinationIsLoggedAsAnAttempt(t *testing.T) {
	t.Parallel()
	env := newWebhookEnv(t, "https://169.254.169.254/hook", time.Hour)
	guarded := webhook.NewActivities(webhook.ActivitiesConfig{Keys: mustBox(t), Now: env.clock.Now,
		Client:   webhook.NewClient(egress.New(egress.Config{}), webhook.ClientConfig{Timeout: time.Second, Now: env.clock.Now}),
		Schedule: []time.Duration{time.Hour},
	}, env.st.Webhooks)
	env.acts = guarded
	env.record(t, store.EventSent)
	_, err := acttest.Run[contract.DeliverWebhooksInput, contract.DeliverWebhooksResult](t, env.acts.DeliverWebhooks,
		contract.DeliverWebhooksInput{WebhookID: env.hook.ID.String()})
	require.NoError(t, err)
	msgs, _, err := env.st.Webhooks.ListWebhookMessages(context.Background(), env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.MessageAttempting, msgs[0].Status)
	as, err := env.st.Webhooks.WebhookAttempts(context.Background(), env.hook.TeamID, msgs[0].ID)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Nil(t, as[0].ResponseStatus)
	require.Equal(t, "refused by the egress guard: egress: address 169.254.169.254 is not allowed", as[0].Error)
}

func mustBox(t *testing.T) *seal.Box {
	box, err := seal.New(make([]byte, 32))
	require.NoError(t, err)
	return box
}

func TestWebhookHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	env := newWebhookEnv(t, srv.URL, time.Hour) // schedule steps are 50 ms
	env.record(t, store.EventSent)
	env.deliverAll(t)
	msgs, _, err := env.st.Webhooks.ListWebhookMessages(context.Background(), env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	as, err := env.st.Webhooks.WebhookAttempts(context.Background(), env.hook.TeamID, msgs[0].ID)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, 429, *as[0].ResponseStatus)
	require.Equal(t, 200, *as[1].ResponseStatus)
	require.Equal(t, time.Second, as[1].AttemptedAt.Sub(as[0].AttemptedAt),
		"429 with Retry-After: 1 waits a second, not 50 ms")
}

func TestWebhookTimesOutAHangingEndpoint(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	env := newWebhookEnv(t, srv.URL, time.Hour)
	// The client keeps the real clock: the timeout and the attempt's
	// duration are real; the activities' clock decides when the retry is due.
	env.acts = webhook.NewActivities(webhook.ActivitiesConfig{Keys: mustBox(t), Now: env.clock.Now,
		Client: webhook.NewClient(egress.New(egress.Config{AllowPrivate: true}),
			webhook.ClientConfig{Timeout: 300 * time.Millisecond}),
		Schedule: []time.Duration{50 * time.Millisecond},
	}, env.st.Webhooks)
	env.record(t, store.EventSent)
	env.deliverAll(t)
	msgs, _, err := env.st.Webhooks.ListWebhookMessages(context.Background(), env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.MessageSuccess, msgs[0].Status)
	as, err := env.st.Webhooks.WebhookAttempts(context.Background(), env.hook.TeamID, msgs[0].ID)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, "no response within 300ms", as[0].Error)
	require.Nil(t, as[0].ResponseStatus)
	require.GreaterOrEqual(t, as[0].DurationMS, 300)
	require.Equal(t, 200, *as[1].ResponseStatus)
}

// A scheduled email reports email.scheduled in the transaction that
// accepts it.
func TestScheduledEmailQueuesItsWebhook(t *testing.T) {
	t.Parallel()
	env := newWebhookEnv(t, "https://hooks.example/", time.Hour)
	ctx := context.Background()
	require.NoError(t, env.st.Webhooks.UpdateWebhook(ctx, env.hook.TeamID, env.hook.ID,
		store.WebhookUpdate{Events: []string{"email.scheduled"}}, audit.Entry{}))
	at := time.Now().Add(time.Hour)
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: env.hook.TeamID, From: "a@posthaste.test",
		FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "Later",
		Tags: []store.Tag{{Name: "k", Value: "v"}}, ScheduledAt: &at, LastEvent: store.EventScheduled, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "delivered@posthaste.test", Kind: "to", Domain: "posthaste.test",
			Status: store.EventScheduled}}}
	_, err := storetest.InsertEmail(ctx, env.st, e)
	require.NoError(t, err)
	msgs, _, err := env.st.Webhooks.ListWebhookMessages(ctx, env.hook.TeamID, env.hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "email.scheduled", msgs[0].Type)
	var p struct {
		Data struct {
			EmailID string            `json:"email_id"`
			Tags    map[string]string `json:"tags"`
		}
	}
	require.NoError(t, json.Unmarshal(msgs[0].Payload, &p))
	require.Equal(t, e.ID.String(), p.Data.EmailID)
	require.Equal(t, map[string]string{"k": "v"}, p.Data.Tags)
}
