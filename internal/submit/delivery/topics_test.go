package delivery_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestPrepareFailsRecipientsOutsideTopic: an email sent with a topic is not
// sent to contacts who opted out of it, nor (for a topic contacts must opt
// in to) to addresses that never opted in; as Resend's, they end `failed`
// (not `suppressed`) with a reason naming the topic, and an email.failed
// webhook event carries that reason.
func TestPrepareFailsRecipientsOutsideTopic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box, Unsubscribe: testLinks(t)}, st, nil, nil, nil)
	topic := func(def string) store.Topic {
		tp, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, Name: def,
			DefaultSubscription: def, Visibility: "private"})
		require.NoError(t, err)
		return tp
	}
	news, deals := topic(store.TopicOptIn), topic(store.TopicOptOut)
	hook := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: hook, TeamID: d.TeamID,
		Endpoint: "https://hooks.example/x", Status: "enabled", Secret: []byte("s"),
		Events: []string{"email.failed", "email.suppressed"}}))
	contact := func(email string, choices ...store.TopicChoice) {
		_, err := st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, Email: email}, nil, choices)
		require.NoError(t, err)
	}
	contact("left@dest.test", store.TopicChoice{TopicID: news.ID, Subscription: store.TopicOptOut})
	contact("joined@dest.test", store.TopicChoice{TopicID: deals.ID, Subscription: store.TopicOptIn})
	contact("member@dest.test")

	send := func(tp store.Topic, rcpts ...string) map[string]string {
		text := "Hi"
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID, TopicID: &tp.ID,
			From: "Shop <hello@shop.test>", FromDomain: "shop.test", To: rcpts, Subject: "Topic", Text: &text,
			LastEvent: store.EventQueued, CreatedAt: time.Now()}
		for _, r := range rcpts {
			_, dom, _ := strings.Cut(r, "@")
			e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: dom, Status: store.EventQueued})
		}
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		_, err = run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
		require.NoError(t, err)
		evs, err := st.Emails.Events(ctx, e.ID)
		require.NoError(t, err)
		for _, ev := range evs {
			require.NotEqual(t, store.EventSuppressed, ev.Type)
			if ev.Type == store.EventFailed {
				require.Equal(t, "The recipient is not subscribed to topic "+tp.ID.String()+".", ev.Detail["reason"])
				require.Equal(t, tp.ID.String(), ev.Detail["topic_id"])
			}
		}
		return recipientStatus(t, st, e)
	}

	// Subscribed by default: only the contact who opted out is skipped.
	require.Equal(t, map[string]string{"Left@dest.test": "failed", "member@dest.test": "sent",
		"stranger@dest.test": "sent"}, send(news, "Left@dest.test", "member@dest.test", "stranger@dest.test"))
	// Opt-in only: only the contact who opted in is sent to.
	require.Equal(t, map[string]string{"joined@dest.test": "sent", "member@dest.test": "failed",
		"stranger@dest.test": "failed"}, send(deals, "joined@dest.test", "member@dest.test", "stranger@dest.test"))

	// One email.failed per recipient left out, with failed.reason naming
	// the topic; no email.suppressed.
	msgs, _, err := st.Webhooks.ListWebhookMessages(ctx, d.TeamID, hook, store.Page{Limit: 10})
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, m := range msgs {
		require.Equal(t, "email.failed", m.Type)
		var p struct {
			Data struct {
				Recipient string
				Failed    struct{ Reason string }
			}
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		reasons[p.Data.Recipient] = p.Data.Failed.Reason
	}
	require.Equal(t, map[string]string{"Left@dest.test": delivery.TopicOptOutReason(news.ID),
		"member@dest.test":   delivery.TopicOptOutReason(deals.ID),
		"stranger@dest.test": delivery.TopicOptOutReason(deals.ID)}, reasons)
}
