package api_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// A team may have store.MaxWebhooksPerTeam endpoints; one more is refused
// with the error body of API.md, and other teams keep their own count.
func TestWebhookEndpointsPerTeamAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	create := func(key string, i int) resp {
		return e.do("POST", "/webhooks", key, map[string]any{
			"endpoint": fmt.Sprintf("https://hooks.example/%d", i), "events": []string{"email.sent"}})
	}
	for i := range store.MaxWebhooksPerTeam {
		r := create(e.keyA, i)
		require.Equal(t, 201, r.status, string(r.raw))
	}
	r := create(e.keyA, store.MaxWebhooksPerTeam)
	requireError(t, r, 403, "validation_error")
	require.Equal(t, fmt.Sprintf("This team already has %d webhook endpoints, the most allowed. "+
		"Delete one before adding another.", store.MaxWebhooksPerTeam), r.body["message"])
	require.Equal(t, 201, create(e.keyB, 0).status, "team B has its own count")
}
