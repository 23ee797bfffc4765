package tracking

import (
	"bytes"
	"encoding/base64"
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

func TestTokenRoundTrip(t *testing.T) {
	s := testSealer(t, 1)
	team, email := uuid.New(), uuid.New()
	long := "https://example.test/" + strings.Repeat("p", MaxURLLength-len("https://example.test/"))
	for _, tc := range []struct {
		name string
		tok  Token
	}{
		{"open", Token{Kind: Open, TeamID: team, EmailID: email, Recipient: 3}},
		{"click", Token{Kind: Click, TeamID: team, EmailID: email, Recipient: 0, Link: 7,
			URL: "https://example.test/a?b=c&d=é#frag"}},
		{"longest url", Token{Kind: Click, TeamID: team, EmailID: email, Recipient: MaxRecipients - 1,
			Link: MaxLinks - 1, URL: long}},
		{"open bound to a host", Token{Kind: Open, TeamID: team, EmailID: email, Recipient: 3,
			Host: "links.example.test"}},
		{"click bound to a host", Token{Kind: Click, TeamID: team, EmailID: email, Link: 7,
			URL: "https://example.test/a", Host: "links.example.test"}},
		{"longest url and host", Token{Kind: Click, TeamID: team, EmailID: email, Recipient: MaxRecipients - 1,
			Link: MaxLinks - 1, URL: long, Host: strings.Repeat("h", 253)}},
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
			require.NotEqual(t, text, again, "a random nonce")
		})
	}
}

func TestTokenOpenIsCompact(t *testing.T) {
	text, err := testSealer(t, 1).Seal(Token{Kind: Open, TeamID: uuid.New(), EmailID: uuid.New()})
	require.NoError(t, err)
	require.Equal(t, base64.RawURLEncoding.EncodedLen(1+12+16+37), len(text))
	text, err = testSealer(t, 1).Seal(Token{Kind: Open, TeamID: uuid.New(), EmailID: uuid.New(),
		Host: "links.example.test"})
	require.NoError(t, err)
	require.Equal(t, base64.RawURLEncoding.EncodedLen(1+12+16+37+1+len("links.example.test")), len(text))
}

// TestTokenFirstFormat checks that a token sealed before tokens were bound
// to their host (by the code of issue 19, with the key of testSealer(t, 1))
// still opens, as a token without a host: links already delivered keep
// working.
func TestTokenFirstFormat(t *testing.T) {
	const text = "AZsArfDmhUbPmOSMbVyRRq5dgRIOv0Syr4iqHwh58vr4FDF6w1U2HAzb40pp4ncVrh_yKIHZdFVoOAgmqCipFFSuKmSgiHN4eWQrx5l4M3rGIniLpQ"
	tok, err := testSealer(t, 1).Open(text)
	require.NoError(t, err)
	require.Equal(t, Token{Kind: Click, TeamID: uuid.MustParse("0b1c2d3e-0000-4000-8000-00000000000a"),
		EmailID: uuid.MustParse("0b1c2d3e-0000-4000-8000-00000000000e"), Recipient: 1, Link: 2,
		URL: "https://shop.test/x"}, tok)
}

func TestTokenSealRefuses(t *testing.T) {
	s := testSealer(t, 1)
	for name, tok := range map[string]Token{
		"no kind":           {TeamID: uuid.New()},
		"open with a link":  {Kind: Open, Link: 1},
		"open with a url":   {Kind: Open, URL: "https://x.test/"},
		"click without url": {Kind: Click},
		"url too long":      {Kind: Click, URL: "https://x.test/" + strings.Repeat("a", MaxURLLength)},
		"link too far":      {Kind: Click, Link: MaxLinks, URL: "https://x.test/"},
		"recipient too far": {Kind: Open, Recipient: MaxRecipients},
		"negative":          {Kind: Open, Recipient: -1},
		"host in capitals":  {Kind: Open, Host: "Links.example.test"},
		"host with a port":  {Kind: Open, Host: "links.example.test:443"},
		"host with a dot":   {Kind: Open, Host: "links.example.test."},
		"host too long":     {Kind: Open, Host: strings.Repeat("h", 254)},
		"not a host":        {Kind: Open, Host: "a/b"},
	} {
		_, err := s.Seal(tok)
		require.Error(t, err, name)
	}
}

func TestTokenTamperedIsInvalid(t *testing.T) {
	s := testSealer(t, 1)
	text, err := s.Seal(Token{Kind: Click, TeamID: uuid.New(), EmailID: uuid.New(), Link: 2,
		URL: "https://example.test/landing", Host: "links.example.test"})
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(text)
	require.NoError(t, err)
	// Every bit of the token is authenticated.
	for i := range raw {
		for bit := 0; bit < 8; bit++ {
			bad := bytes.Clone(raw)
			bad[i] ^= 1 << bit
			_, err := s.Open(base64.RawURLEncoding.EncodeToString(bad))
			require.ErrorIs(t, err, ErrInvalid, "byte %d bit %d", i, bit)
		}
	}
	for name, bad := range map[string]string{
		"empty":         "",
		"cut":           text[:len(text)-1],
		"cut short":     text[:20],
		"padded":        text + "=",
		"not base64":    strings.Replace(text, text[5:6], "*", 1),
		"extended":      text + "AAAA",
		"too long":      strings.Repeat("A", MaxTokenLength+1),
		"other key":     mustSeal(t, testSealer(t, 2), Token{Kind: Open}),
		"only overhead": base64.RawURLEncoding.EncodeToString(append([]byte{1}, make([]byte, 40)...)),
	} {
		_, err := s.Open(bad)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
}

func mustSeal(t *testing.T, s *Sealer, tok Token) string {
	t.Helper()
	text, err := s.Seal(tok)
	require.NoError(t, err)
	return text
}

func TestNewSealerKeyLength(t *testing.T) {
	_, err := NewSealer(make([]byte, 16))
	require.Error(t, err)
}

func TestLinksURLs(t *testing.T) {
	s := testSealer(t, 1)
	l := Links{Host: "links.example.test", Sealer: s}
	team, email := uuid.New(), uuid.New()
	o, err := l.OpenURL(team, email, 1)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(o, "https://links.example.test/o/"), o)
	tok, err := s.Open(strings.TrimPrefix(o, "https://links.example.test/o/"))
	require.NoError(t, err)
	require.Equal(t, Token{Kind: Open, TeamID: team, EmailID: email, Recipient: 1, Host: "links.example.test"}, tok)

	c, err := l.ClickURL(team, email, 1, 4, "https://shop.test/x")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(c, "https://links.example.test/c/"), c)
	tok, err = s.Open(strings.TrimPrefix(c, "https://links.example.test/c/"))
	require.NoError(t, err)
	require.Equal(t, Token{Kind: Click, TeamID: team, EmailID: email, Recipient: 1, Link: 4,
		URL: "https://shop.test/x", Host: "links.example.test"}, tok)

	// The host the tokens are bound to is normalised; a Links without a
	// host name makes no URL (rather than tokens bound to no host).
	o, err = Links{Host: "Links.Example.TEST.", Sealer: s}.OpenURL(team, email, 0)
	require.NoError(t, err)
	tok, err = s.Open(o[strings.LastIndex(o, "/")+1:])
	require.NoError(t, err)
	require.Equal(t, "links.example.test", tok.Host)
	for _, host := range []string{"", "a b.test"} {
		_, err = Links{Host: host, Sealer: s}.OpenURL(team, email, 0)
		require.Error(t, err, host)
		_, err = Links{Host: host, Sealer: s}.ClickURL(team, email, 0, 0, "https://shop.test/")
		require.Error(t, err, host)
	}
}

// Links with a Base (`posthaste dev`'s own address) make URLs under it,
// with tokens bound to its host.
func TestLinksURLsUnderBase(t *testing.T) {
	s := testSealer(t, 1)
	l := Links{Host: "localhost", Base: "http://localhost:8080/", Sealer: s}
	team, email := uuid.New(), uuid.New()
	o, err := l.OpenURL(team, email, 0)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(o, "http://localhost:8080/o/"), o)
	tok, err := s.Open(strings.TrimPrefix(o, "http://localhost:8080/o/"))
	require.NoError(t, err)
	require.Equal(t, Token{Kind: Open, TeamID: team, EmailID: email, Host: "localhost"}, tok)
	c, err := l.ClickURL(team, email, 0, 2, "https://shop.test/x")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(c, "http://localhost:8080/c/"), c)
	tok, err = s.Open(strings.TrimPrefix(c, "http://localhost:8080/c/"))
	require.NoError(t, err)
	require.Equal(t, "localhost", tok.Host)
	require.Equal(t, "https://shop.test/x", tok.URL)
}
