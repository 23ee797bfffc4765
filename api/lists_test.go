package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// TestListAllCap: a list Resend documents as returning every item answers,
// without `limit`, up to 1,000 rows with has_more only beyond them, and
// `after` reaches the rest; a paged list (emails) still answers 20.
func TestListAllCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for i := range 1001 {
		_, err := e.store.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: e.teamA,
			Name: fmt.Sprintf("s%d", i)})
		require.NoError(t, err)
	}
	r := e.do("GET", "/segments", e.keyA, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	data := r.body["data"].([]any)
	require.Len(t, data, 1000)
	require.Equal(t, true, r.body["has_more"])
	last := data[999].(map[string]any)["id"].(string)
	r = e.do("GET", "/segments?after="+last, e.keyA, nil)
	require.Len(t, r.body["data"].([]any), 1)
	require.Equal(t, false, r.body["has_more"])
	r = e.do("GET", "/segments?limit=100", e.keyA, nil)
	require.Len(t, r.body["data"].([]any), 100)
	require.Equal(t, true, r.body["has_more"])
	r = e.do("GET", "/segments", e.keyB, nil)
	require.Empty(t, r.body["data"], "team B sees none of A's")

	for range 21 {
		require.Equal(t, 200, e.do("POST", "/emails", e.keyA, sandboxSend).status)
	}
	r = e.do("GET", "/emails", e.keyA, nil)
	require.Len(t, r.body["data"].([]any), 20, "emails page by default, as Resend's do")
	require.Equal(t, true, r.body["has_more"])
}
