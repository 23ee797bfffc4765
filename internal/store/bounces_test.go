package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestBounceObjectInWebhooksAndBounces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	hook := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
		Events: []string{"email.bounced"}, Status: "enabled", Secret: []byte("sealed")}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook))
	e := newEmail(team, "gone@posthaste.test", "full@posthaste.test", "old@posthaste.test", "ok@posthaste.test")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		// As Deliver records it: diagnostic lines as []string.
		{Type: store.EventBounced, Recipient: "gone@posthaste.test", Detail: map[string]any{
			"type": "Permanent", "subType": "NoEmail", "message": "The address does not exist.",
			"diagnosticCode": []string{"smtp; 550 5.1.1 user unknown"}}},
		// As a workflow's RecordEvents passes it, through JSON: []any.
		{Type: store.EventBounced, Recipient: "full@posthaste.test", Detail: map[string]any{
			"type": "Transient", "subType": "MailboxFull", "message": "Mailbox full.",
			"diagnosticCode": []any{"smtp; 552 5.2.2 over quota", "smtp; 552 5.2.2 try later"}}},
		// Recorded before bounces had diagnostic codes.
		{Type: store.EventBounced, Recipient: "old@posthaste.test", Detail: map[string]any{
			"type": "Permanent", "subType": "General", "message": "550 5.1.1 no such user"}},
		{Type: store.EventDelivered, Recipient: "ok@posthaste.test"},
	}))

	want := map[string]store.Bounce{
		"gone@posthaste.test": {Type: "Permanent", SubType: "NoEmail", Message: "The address does not exist.",
			DiagnosticCode: []string{"smtp; 550 5.1.1 user unknown"}},
		"full@posthaste.test": {Type: "Transient", SubType: "MailboxFull", Message: "Mailbox full.",
			DiagnosticCode: []string{"smtp; 552 5.2.2 over quota", "smtp; 552 5.2.2 try later"}},
		"old@posthaste.test": {Type: "Permanent", SubType: "General", Message: "550 5.1.1 no such user",
			DiagnosticCode: []string{"550 5.1.1 no such user"}},
	}
	got, err := st.Emails.Bounces(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, want, got)

	other, err := st.Emails.Bounces(ctx, newTeam(t, st), e.ID)
	require.NoError(t, err)
	require.Empty(t, other, "another team sees no bounces of this email")

	msgs, _, err := st.Webhooks.ListWebhookMessages(ctx, team, hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 3, "one email.bounced per bounced recipient")
	seen := map[string]store.Bounce{}
	for _, m := range msgs {
		var p struct {
			Type string
			Data struct {
				Recipient string          `json:"recipient"`
				Bounce    json.RawMessage `json:"bounce"`
			}
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		require.Equal(t, "email.bounced", p.Type)
		// diagnosticCode is an array on the wire, never a string or null.
		var raw map[string]any
		require.NoError(t, json.Unmarshal(p.Data.Bounce, &raw))
		require.IsType(t, []any{}, raw["diagnosticCode"])
		var b store.Bounce
		require.NoError(t, json.Unmarshal(p.Data.Bounce, &b))
		seen[p.Data.Recipient] = b
	}
	require.Equal(t, want, seen)
}

func TestBounceOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		detail map[string]any
		want   store.Bounce
	}{
		{"empty", nil, store.Bounce{Type: "Undetermined", SubType: "Undetermined", DiagnosticCode: []string{}}},
		{"no diagnostic", map[string]any{"type": "Transient", "subType": "General", "message": "gave up", "diagnosticCode": nil},
			store.Bounce{Type: "Transient", SubType: "General", Message: "gave up", DiagnosticCode: []string{}}},
		{"non-strings dropped", map[string]any{"type": "Permanent", "subType": "General", "diagnosticCode": []any{"smtp; 550", 7}},
			store.Bounce{Type: "Permanent", SubType: "General", DiagnosticCode: []string{"smtp; 550"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, store.BounceOf(tc.detail))
		})
	}
}
