package api_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func TestGetEmailShowsBounceObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/emails", e.keyA, map[string]any{
		"from": "Acme <onboarding@posthaste.test>", "to": []string{"bounced@posthaste.test", "delivered@posthaste.test"},
		"subject": "Hello", "html": "<p>Hi</p>",
	})
	require.Equal(t, 200, r.status, string(r.raw))
	id := uuid.MustParse(r.body["id"].(string))

	// The outcomes, as the send workflow records them.
	require.NoError(t, e.store.Emails.RecordEvents(context.Background(), id, []store.Event{
		{Type: store.EventBounced, Recipient: "bounced@posthaste.test", Detail: map[string]any{
			"type": "Permanent", "subType": "General", "message": "The recipient's address does not exist.",
			"diagnosticCode": []string{"smtp; 550 5.1.1 user unknown"}}},
		{Type: store.EventDelivered, Recipient: "delivered@posthaste.test"},
	}))

	g := e.do("GET", "/emails/"+id.String(), e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, []any{
		map[string]any{"email": "bounced@posthaste.test", "status": "bounced", "bounce": map[string]any{
			"type": "Permanent", "subType": "General", "message": "The recipient's address does not exist.",
			"diagnosticCode": []any{"smtp; 550 5.1.1 user unknown"}}},
		map[string]any{"email": "delivered@posthaste.test", "status": "delivered"},
	}, g.body["recipients"])

	// Another team's key sees nothing of it.
	requireError(t, e.do("GET", "/emails/"+id.String(), e.keyB, nil), 404, "not_found")
}
