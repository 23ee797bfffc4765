package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestResendNodeSDKAccounts runs testdata/resend-node/accounts.cjs: a list
// of 30+ keys without a limit answers every key (Resend's documented
// default, not a page of 20), apiKeys.update renames a key, and usage.get
// answers the fields of the SDK's GetUsageResponseSuccess.
func TestResendNodeSDKAccounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "accounts.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	var got struct {
		Created, AllCount, PageCount int
		AllHasMore, PageHasMore      bool
		AllIDs                       []string
		Updated                      map[string]any
		RenamedName                  string
		BadName, Unknown             map[string]any
		Usage                        map[string]any
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Equal(t, 31, got.AllCount, "the 30 keys and the team's first, all in one response")
	require.False(t, got.AllHasMore)
	require.Len(t, got.AllIDs, 31)
	require.Equal(t, 10, got.PageCount)
	require.True(t, got.PageHasMore, "a limit pages as before")

	require.Equal(t, "api_key", got.Updated["object"])
	require.NotEmpty(t, got.Updated["id"])
	require.Equal(t, "renamed", got.RenamedName, "stored trimmed")
	require.Equal(t, "missing_required_field", got.BadName["name"], got.BadName)
	require.Equal(t, "not_found", got.Unknown["name"], got.Unknown)

	u := got.Usage
	require.Equal(t, "usage", u["object"])
	monthly := u["emails"].(map[string]any)["monthly"].(map[string]any)
	require.Equal(t, float64(2), monthly["used"])
	require.Equal(t, float64(2), monthly["sent"])
	require.Equal(t, float64(0), monthly["received"])
	require.Equal(t, float64(3000), monthly["limit"], "the free plan")
	daily := u["emails"].(map[string]any)["daily"].(map[string]any)
	require.Equal(t, float64(2), daily["sent"])
	require.Nil(t, daily["limit"], "no daily cap")
	for _, at := range []any{monthly["resets_at"], daily["resets_at"], u["generated_at"]} {
		_, err := time.Parse(time.RFC3339, at.(string))
		require.NoError(t, err)
	}
	for _, k := range []string{"contacts", "segments", "broadcasts", "domains"} {
		require.Equal(t, map[string]any{"used": float64(0), "limit": nil}, u[k], k)
	}
	require.Equal(t, map[string]any{"used": float64(0), "limit": nil, "next_increase_at": nil}, u["ai_credits"])
	require.Equal(t, float64(0), u["automation_runs"].(map[string]any)["limit"])
	require.Equal(t, map[string]any{"limit": float64(10_000), "duration": "1s"}, u["rate_limit"])
}
