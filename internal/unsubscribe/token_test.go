package unsubscribe

import (
	"bytes"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func testSealer(t testing.TB, b byte) *Sealer {
	t.Helper()
	s, err := NewSealer(bytes.Repeat([]byte{b}, 32))
	require.NoError(t, err)
	return s
}

func ptr(id uuid.UUID) *uuid.UUID { return &id }

func TestTokenRoundTrip(t *testing.T) {
	s := testSealer(t, 1)
	team, email, topic, bcast := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 250) + ".test"
	for _, tc := range []struct {
		name string
		tok  Token
	}{
		{"topic", Token{TeamID: team, EmailID: email, TopicID: ptr(topic), Email: "Ann@Example.test"}},
		{"no topic", Token{TeamID: team, EmailID: email, Email: "a@b.test"}},
		{"broadcast", Token{TeamID: team, EmailID: email, BroadcastID: ptr(bcast), Email: "a@b.test"}},
		{"topic and broadcast", Token{TeamID: team, EmailID: email, TopicID: ptr(topic), BroadcastID: ptr(bcast),
			Email: "ü@bücher.test"}},
		{"longest address", Token{TeamID: team, EmailID: email, TopicID: ptr(topic), Email: long[:MaxAddressLength]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, err := s.Seal(tc.tok)
			require.NoError(t, err)
			require.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9_-]+$`), text, "URL-safe, unpadded")
			require.LessOrEqual(t, len(text), MaxTokenLength)
			got, err := s.Open(text)
			require.NoError(t, err)
			require.Equal(t, tc.tok, got)
			again, err := s.Seal(tc.tok)
			require.NoError(t, err)
			require.NotEqual(t, text, again, "a random nonce: the same token never seals the same twice")
		})
	}
}

func TestTokenIsCompact(t *testing.T) {
	text, err := testSealer(t, 1).Seal(Token{TeamID: uuid.New(), EmailID: uuid.New(), TopicID: ptr(uuid.New()),
		Email: "someone@example.com"})
	require.NoError(t, err)
	// 1 + 12 + 16 bytes of sealing, 49 of ids and flags, the address.
	require.Equal(t, base64.RawURLEncoding.EncodedLen(1+12+16+49+len("someone@example.com")), len(text))
	require.Less(t, len(text), 150)
}

func TestSealRefusesBadAddresses(t *testing.T) {
	s := testSealer(t, 1)
	for _, addr := range []string{"", strings.Repeat("a", MaxAddressLength+1)} {
		_, err := s.Seal(Token{TeamID: uuid.New(), EmailID: uuid.New(), Email: addr})
		require.Error(t, err)
	}
}

// Every byte of the sealed token is covered: the version, the nonce, the
// ciphertext and the tag; changing any of them, cutting or extending the
// token, or opening it with another key fails.
func TestTokenTamperingFails(t *testing.T) {
	s := testSealer(t, 1)
	text, err := s.Seal(Token{TeamID: uuid.New(), EmailID: uuid.New(), TopicID: ptr(uuid.New()), Email: "a@b.test"})
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(text)
	require.NoError(t, err)
	open := func(b []byte) error {
		_, err := s.Open(base64.RawURLEncoding.EncodeToString(b))
		return err
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(raw)
			b[i] ^= bit
			require.ErrorIs(t, open(b), ErrInvalid, "byte %d flipped", i)
		}
	}
	for n := range len(raw) {
		require.ErrorIs(t, open(raw[:n]), ErrInvalid, "cut to %d bytes", n)
	}
	require.ErrorIs(t, open(append(bytes.Clone(raw), 0)), ErrInvalid, "extended")

	_, err = testSealer(t, 2).Open(text)
	require.ErrorIs(t, err, ErrInvalid, "another key")
	for _, bad := range []string{"", "!!!!", text + "=", strings.ToUpper(text), text[:len(text)-1],
		strings.Repeat("A", MaxTokenLength+1)} {
		_, err := s.Open(bad)
		require.ErrorIs(t, err, ErrInvalid, "%.40q", bad)
	}
}

func TestLinks(t *testing.T) {
	l, err := NewLinks("", bytes.Repeat([]byte{1}, 32))
	require.NoError(t, err)
	require.Nil(t, l, "no public URL: no links")
	l, err = NewLinks("https://mail.example.test/", nil)
	require.NoError(t, err)
	require.Nil(t, l, "no master key: no links")
	l, err = NewLinks("https://mail.example.test/", bytes.Repeat([]byte{1}, 32))
	require.NoError(t, err)
	tok := Token{TeamID: uuid.New(), EmailID: uuid.New(), Email: "a@b.test"}
	u, err := l.URL(tok)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u, "https://mail.example.test/unsubscribe/"), u)
	got, err := l.Sealer.Open(strings.TrimPrefix(u, "https://mail.example.test/unsubscribe/"))
	require.NoError(t, err)
	require.Equal(t, tok, got)
}

func TestReplacePlaceholders(t *testing.T) {
	require.Equal(t, `<a href="U">x</a> U U`,
		ReplacePlaceholders(`<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">x</a> {{{UNSUBSCRIBE_URL}}} {{{RESEND_UNSUBSCRIBE_URL}}}`, "U"))
	require.Equal(t, "{{{OTHER}}}", ReplacePlaceholders("{{{OTHER}}}", "U"))
}

func FuzzOpen(f *testing.F) {
	s := testSealer(f, 1)
	// The fuzzing workers each run this function: the token's content is
	// fixed, its nonce is not.
	want := Token{TeamID: uuid.MustParse("0193a4a0-0000-7000-8000-000000000001"),
		EmailID: uuid.MustParse("0193a4a0-0000-7000-8000-000000000002"),
		TopicID: ptr(uuid.MustParse("0193a4a0-0000-7000-8000-000000000003")), Email: "a@b.test"}
	good, err := s.Seal(want)
	require.NoError(f, err)
	f.Add(good)
	f.Add("")
	f.Add("AQ")
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, text string) {
		tok, err := s.Open(text)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		// Only a sealed token opens, and it opens to what was sealed.
		if tok.TeamID != want.TeamID || tok.EmailID != want.EmailID || *tok.TopicID != *want.TopicID ||
			tok.BroadcastID != nil || tok.Email != want.Email {
			t.Fatalf("opened %q to %+v", text, tok)
		}
	})
}
