package reqlog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrefixRedactsACutBody: a body over the cap is redacted like a whole
// one, and a secret the cut splits keeps none of its characters.
func TestPrefixRedactsACutBody(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name, in string
		want     *string
	}{
		{"empty", "", nil},
		{"secret cut in half", `{"id":"w1","signing_secret":"whsec_abcdef`, str(`{"id":"w1","signing_secret":`)},
		{"secret before the cut", `{"signing_secret":"whsec_abc","endpoint":"https://x/aaaa`,
			str(`{"signing_secret":"[redacted]","endpoint":`)},
		{"nested secrets and arrays", `{"data":[{"token":"t1","name":"a"},{"password":{"x":[1,2]},"name":"b"},{"token":"t3`,
			str(`{"data":[{"token":"[redacted]","name":"a"},{"password":"[redacted]","name":"b"},{"token":`)},
		{"secret object cut", `{"private_key":{"d":"abc`, str(`{"private_key":`)},
		{"attachments", `{"attachments":[{"filename":"a","content":"aGk="},{"content":[1,2,3]}],"html":"<p>&</p>","text":"ab`,
			str(`{"attachments":[{"filename":"a","content":"[elided]"},{"content":"[elided]"}],"html":"<p>&</p>","text":`)},
		{"content outside attachments", `{"content":"x","token":"y","more":"z`, str(`{"content":"x","token":"[redacted]","more":`)},
		{"text without secrets", "plain text é", str("plain text é")},
		{"text naming a secret", "password=hunter2&x=", str("[100 bytes that are not JSON and may hold secrets, not logged]")},
		{"JSON gone wrong", `{"token":"a"} nope`, str("[100 bytes that are not JSON and may hold secrets, not logged]")},
		{"binary", "\xff\xfe\xfd\xfc", str("[100 bytes, not UTF-8 text]")},
		{"split rune", "abc\xc3", str("abc")},
		{"signed URL", `{"download_url":"https://api.test/e/raw?expires=1&signature=c2ln&team=t","expires_at":"2026`,
			str(`{"download_url":"https://api.test/e/raw?expires=1&signature=[redacted]&team=t","expires_at":`)},
		{"signed URL cut", `{"id":"e","download_url":"https://api.test/e/raw?expires=1&signature=c2ln`, str(`{"id":"e","download_url":`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Prefix([]byte(c.in), 100))
		})
	}

	// A real one: a webhook whose long endpoint puts the response over the
	// cap, cut inside its signing secret.
	secret := "whsec_" + strings.Repeat("S", 40)
	body, err := json.Marshal(map[string]any{"endpoint": "https://example.com/" + strings.Repeat("a", MaxBody-120),
		"object": "webhook", "signing_secret": secret, "status": "enabled"})
	require.NoError(t, err)
	at := strings.Index(string(body), secret)
	require.Less(t, at+20, MaxBody, "the cut falls after the secret began")
	got := Prefix(body[:at+20], len(body))
	require.NotNil(t, got)
	require.NotContains(t, *got, "whsec_")
	require.LessOrEqual(t, len(*got), MaxBody)
	require.True(t, strings.HasPrefix(*got, `{"endpoint":"https://example.com/aaa`))
}
