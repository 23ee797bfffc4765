package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// FailEmail ends only the recipients without an outcome, once, with the
// reason in the event and in the email.failed webhook.
func TestFailEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	hook := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.test/in",
		Events: []string{"email.failed"}, Status: store.WebhookEnabled, Secret: []byte("sealed")}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook))
	e := newEmail(team, "a@rcpt.test", "b@rcpt.test", "c@rcpt.test")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: store.EventSent},
		{Type: store.EventDelivered, Recipient: "a@rcpt.test"},
	}))

	n, err := st.Emails.FailEmail(ctx, e.ID, "The message could not be built: bad header.")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = st.Emails.FailEmail(ctx, e.ID, "again")
	require.NoError(t, err)
	require.Zero(t, n, "a second call fails no one")

	got, err := st.Emails.GetEmail(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventFailed, got.LastEvent)
	status := map[string]string{}
	for _, r := range got.Recipients {
		status[r.Address] = r.Status
	}
	require.Equal(t, map[string]string{"a@rcpt.test": "delivered", "b@rcpt.test": "failed", "c@rcpt.test": "failed"}, status)

	evs, err := st.Emails.Events(ctx, e.ID)
	require.NoError(t, err)
	var failed int
	for _, ev := range evs {
		if ev.Type == store.EventFailed {
			failed++
			require.Equal(t, "The message could not be built: bad header.", ev.Detail["reason"])
		}
	}
	require.Equal(t, 2, failed)

	msgs, err := st.Webhooks.DueMessages(ctx, hook.ID, time.Now().Add(time.Minute), 10, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2, "one email.failed per failed recipient")
	var payload struct {
		Type string `json:"type"`
		Data struct {
			Failed struct {
				Reason string `json:"reason"`
			} `json:"failed"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Payload, &payload))
	require.Equal(t, "email.failed", payload.Type)
	require.Equal(t, "The message could not be built: bad header.", payload.Data.Failed.Reason)

	_, err = st.Emails.FailEmail(ctx, uuid.Must(uuid.NewV7()), "x")
	require.ErrorIs(t, err, store.ErrNotFound)
}
