package api_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestContactAndTopicWebhooks: contact and topic changes become webhook
// events through the same outbox as domain events, with the contact's
// data; the other team's endpoint hears nothing.
func TestContactAndTopicWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	events := []string{"contact.created", "contact.updated", "contact.deleted", "contact.topics.updated",
		"topic.created", "topic.updated", "topic.deleted"}
	hook := e.created("/webhooks", e.keyA, map[string]any{"endpoint": "https://hooks.example/a", "events": events})
	other := e.created("/webhooks", e.keyB, map[string]any{"endpoint": "https://hooks.example/b", "events": events})

	seg := e.created("/segments", e.keyA, map[string]any{"name": "VIP"})
	topic := e.created("/topics", e.keyA, map[string]any{"name": "News", "default_subscription": "opt_in"})
	require.Equal(t, 200, e.do("PATCH", "/topics/"+topic, e.keyA, map[string]any{"description": "Weekly"}).status)
	contact := e.created("/contacts", e.keyA, map[string]any{"email": "a@example.com", "first_name": "Ada",
		"segments": []string{seg}})
	require.Equal(t, 200, e.do("PATCH", "/contacts/"+contact, e.keyA, map[string]any{"last_name": "Lovelace"}).status)
	require.Equal(t, 200, e.do("PATCH", "/contacts/"+contact+"/topics", e.keyA,
		[]map[string]string{{"id": topic, "subscription": "opt_out"}}).status)
	require.Equal(t, 200, e.do("DELETE", "/contacts/"+contact, e.keyA, nil).status)
	require.Equal(t, 200, e.do("DELETE", "/topics/"+topic, e.keyA, nil).status)
	wakes, err := storetest.OutboxLen(context.Background(), e.store)
	require.NoError(t, err)
	require.Positive(t, wakes, "the endpoint's delivery is woken by entries committed with the changes")

	list := e.do("GET", "/webhooks/"+hook+"/events?limit=100", e.keyA, nil)
	require.Equal(t, 200, list.status, string(list.raw))
	byType := map[string]string{}
	var types []string
	for _, d := range list.body["data"].([]any) {
		m := d.(map[string]any)
		types = append(types, m["type"].(string))
		byType[m["type"].(string)] = m["id"].(string)
	}
	require.ElementsMatch(t, []string{"topic.created", "topic.updated", "contact.created", "contact.updated",
		"contact.topics.updated", "contact.deleted", "topic.deleted"}, types)

	created := e.do("GET", "/webhooks/"+hook+"/events/"+byType["contact.created"], e.keyA, nil)
	require.Equal(t, 200, created.status, string(created.raw))
	payload := created.body["payload"].(map[string]any)
	require.Equal(t, "contact.created", payload["type"])
	data := payload["data"].(map[string]any)
	require.Equal(t, contact, data["id"])
	require.Equal(t, "a@example.com", data["email"])
	require.Equal(t, "Ada", data["first_name"])
	require.Equal(t, false, data["unsubscribed"])
	require.Equal(t, []any{seg}, data["segment_ids"])
	require.NotEmpty(t, data["updated_at"])

	topics := e.do("GET", "/webhooks/"+hook+"/events/"+byType["contact.topics.updated"], e.keyA, nil)
	data = topics.body["payload"].(map[string]any)["data"].(map[string]any)
	require.Equal(t, []any{map[string]any{"id": topic, "subscription": "opt_out"}}, data["topics"])

	tu := e.do("GET", "/webhooks/"+hook+"/events/"+byType["topic.updated"], e.keyA, nil)
	data = tu.body["payload"].(map[string]any)["data"].(map[string]any)
	require.Equal(t, "Weekly", data["description"])
	require.Equal(t, "opt_in", data["default_subscription"])

	require.Empty(t, listIDs(t, e.do("GET", "/webhooks/"+other+"/events", e.keyB, nil)))
}
