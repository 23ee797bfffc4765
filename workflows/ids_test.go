package workflows

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkflowIDsStayShort(t *testing.T) {
	const (
		team  = "0190f0a4-7a4c-7000-8000-000000000001"
		email = "0190f0a4-7a4c-7000-8000-000000000002"
	)
	longest := strings.Repeat("k", MaxKeyInID)
	emoji := strings.Repeat("😀", 256)                   // 1,024 bytes: the ID Temporal refused
	hashedEmoji := "h-8041e66714937367b6c831f9d738485d" // sha256sum, first 32 hex digits
	tests := []struct {
		name, key, want string
	}{
		{"short printable key keeps its form", "welcome/owner", "email/" + team + "/welcome/owner/" + email},
		{"spaces and punctuation are printable", "order 42: #1~", "email/" + team + "/order 42: #1~/" + email},
		{"longest key kept as it is", longest, "email/" + team + "/" + longest + "/" + email},
		{"one byte longer is hashed", longest + "k", "email/" + team + "/" + KeyInID(longest+"k") + "/" + email},
		{"256 emoji are hashed", emoji, "email/" + team + "/" + hashedEmoji + "/" + email},
		{"one non-ASCII letter is hashed", "café", "email/" + team + "/" + KeyInID("café") + "/" + email},
		{"control characters are hashed", "a\nb", "email/" + team + "/" + KeyInID("a\nb") + "/" + email},
		{"DEL is hashed", "a\x7f", "email/" + team + "/" + KeyInID("a\x7f") + "/" + email},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := KeyedEmailWorkflowID(team, tt.key, email)
			require.Equal(t, tt.want, id)
			require.LessOrEqual(t, len(id), 255)
			b := KeyedBatchWorkflowID(team, tt.key, email)
			require.Equal(t, "batch/"+strings.TrimPrefix(tt.want, "email/"), b)
			require.LessOrEqual(t, len(b), 255)
		})
	}
	hashed := KeyInID(longest + "k")
	require.Regexp(t, `^h-[0-9a-f]{32}$`, hashed)
	require.Equal(t, hashed, KeyInID(longest+"k"), "the same key gives the same ID")
	require.NotEqual(t, hashed, KeyInID(longest+"j"), "keys that differ in their last byte differ")
	require.NotEqual(t, KeyInID("café"), KeyInID("cafe\u0301"), "no Unicode normalisation: keys are bytes")
}

func TestUnkeyedAndRestartIDs(t *testing.T) {
	const email = "0190f0a4-7a4c-7000-8000-000000000002"
	require.Equal(t, "email/"+email, EmailWorkflowID(email))
	require.Equal(t, "batch/"+email, BatchWorkflowID(email))
	require.Equal(t, "email/"+email+"/retry-1", RestartEmailWorkflowID(email, 1))
	require.Equal(t, "email/"+email+"/retry-12", RestartEmailWorkflowID(email, 12))
	require.NotEqual(t, EmailWorkflowID(email), RestartEmailWorkflowID(email, 1))
}
