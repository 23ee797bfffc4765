package seal

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	tok, err := NewTokens(bytes.Repeat([]byte{7}, 32), "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTokens(make([]byte, 16), "test"); err == nil || !strings.Contains(err.Error(), "test key must be 32 bytes") {
		t.Fatalf("a short key: %v", err)
	}
	payload := []byte("a payload")
	a, err := tok.Seal(payload)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tok.Seal(payload)
	if a == b {
		t.Fatal("two seals of one payload are the same text")
	}
	if len(a) != tokenTextLength(len(payload)) {
		t.Fatalf("text of %d bytes, want %d", len(a), tokenTextLength(len(payload)))
	}
	got, err := tok.Open(a, len(payload), len(a))
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("open: %q %v", got, err)
	}
	other, _ := NewTokens(bytes.Repeat([]byte{8}, 32), "test")
	raw, _ := base64.RawURLEncoding.DecodeString(a)
	raw[len(raw)-1] ^= 1
	for name, c := range map[string]struct {
		tokens      *Tokens
		text        string
		min, maxLen int
	}{
		"too long":          {tok, a, 0, len(a) - 1},
		"payload too short": {tok, a, len(payload) + 1, len(a)},
		"other key":         {other, a, 0, len(a)},
		"altered":           {tok, base64.RawURLEncoding.EncodeToString(raw), 0, len(a)},
		"not base64":        {tok, "*" + a[1:], 0, len(a)},
		"padded":            {tok, a + "=", 0, len(a) + 1},
	} {
		if _, err := c.tokens.Open(c.text, c.min, c.maxLen); err != ErrToken {
			t.Errorf("%s: %v, want ErrToken", name, err)
		}
	}
}

// tokenTextLength is the length of the text of a payload of n bytes.
func tokenTextLength(n int) int { return base64.RawURLEncoding.EncodedLen(TokenOverhead + n) }
