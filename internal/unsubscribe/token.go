// Package unsubscribe implements one-click unsubscribe (RFC 8058) and the
// preferences page of mail sent to a team's contacts: the authenticated
// tokens that unsubscribe links carry, the links themselves, and the
// anonymous HTTP endpoints those links lead to.
//
// A token names the team, the email, the email's topic (optional), a
// broadcast (optional, for broadcasts to come) and the recipient's
// address. It is sealed with AES-256-GCM under a key derived from the
// installation's master key for this purpose only (seal.Box.DeriveKey with
// KeyPurpose), with a random nonce: a token cannot be forged, altered or
// guessed from another one, and two links to the same address differ.
package unsubscribe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/seal"

	"github.com/posthaste/posthaste/internal/merge"
)

// KeyPurpose is the purpose the token key is derived from the master key
// for (seal.Box.DeriveKey).
const KeyPurpose = "posthaste unsubscribe token v1"

// Placeholder is what a body holds where each recipient's unsubscribe URL
// goes: template rendering at acceptance fills the reserved variables
// RESEND_UNSUBSCRIBE_URL and UNSUBSCRIBE_URL with it, and raw bodies sent
// with a topic may hold it. PlaceholderAlias is replaced alike.
const (
	Placeholder      = "{{{" + merge.UnsubscribeURL + "}}}"
	PlaceholderAlias = "{{{" + merge.UnsubscribeURLAlias + "}}}"
)

// Path is the path under the public URL that links lead to:
// <public URL>/unsubscribe/<token>.
const Path = "/unsubscribe/"

// MaxAddressLength bounds the address a token carries (RFC 5321 §4.5.3.1:
// 64 octets of local part, 255 of domain, and the @).
const MaxAddressLength = 320

// MaxTokenLength bounds the text of a token: a longer one is refused
// before it is decoded.
const MaxTokenLength = 2 * (seal.TokenOverhead + plainFixed + 2*idLen + MaxAddressLength)

// ErrInvalid is any token that cannot be opened: altered, cut, sealed with
// another key, or not a token at all.
var ErrInvalid = errors.New("invalid unsubscribe token")

// Token is what an unsubscribe link authorises: changing the
// subscriptions of Email in TeamID's audience.
type Token struct {
	TeamID  uuid.UUID
	EmailID uuid.UUID // the email the link was sent in
	// TopicID is the topic the email was sent with; nil: the link
	// unsubscribes from everything.
	TopicID *uuid.UUID
	// BroadcastID is the broadcast the email belongs to; nil for emails
	// sent through the API.
	BroadcastID *uuid.UUID
	Email       string // the recipient's address, as it was sent to
}

// Wire format, before base64url without padding:
//
//	version (1) | nonce (12) | AES-256-GCM(plaintext) with its tag (16)
//
// with the version byte as associated data, and the plaintext
//
//	flags (1) | team id (16) | email id (16) | [topic id (16)] | [broadcast id (16)] | address
//
// where flag bit 0 says a topic id follows and bit 1 a broadcast id.
const (
	idLen      = 16
	plainFixed = 1 + 2*idLen
	flagTopic  = 1 << 0
	flagBcast  = 1 << 1
)

// Sealer seals and opens tokens (in a seal.Tokens envelope). Safe for
// concurrent use.
type Sealer struct{ tokens *seal.Tokens }

// NewSealer returns a Sealer for a 32-byte key, which must be used for
// nothing else: seal.Box.DeriveKey(KeyPurpose).
func NewSealer(key []byte) (*Sealer, error) {
	t, err := seal.NewTokens(key, "unsubscribe")
	if err != nil {
		return nil, err
	}
	return &Sealer{tokens: t}, nil
}

// Seal returns the token's text: URL-safe, without padding.
func (s *Sealer) Seal(t Token) (string, error) {
	if t.Email == "" || len(t.Email) > MaxAddressLength {
		return "", fmt.Errorf("sealing unsubscribe token: address of %d bytes", len(t.Email))
	}
	plain := make([]byte, 0, plainFixed+2*idLen+len(t.Email))
	var flags byte
	if t.TopicID != nil {
		flags |= flagTopic
	}
	if t.BroadcastID != nil {
		flags |= flagBcast
	}
	plain = append(plain, flags)
	plain = append(plain, t.TeamID[:]...)
	plain = append(plain, t.EmailID[:]...)
	if t.TopicID != nil {
		plain = append(plain, t.TopicID[:]...)
	}
	if t.BroadcastID != nil {
		plain = append(plain, t.BroadcastID[:]...)
	}
	plain = append(plain, t.Email...)

	return s.tokens.Seal(plain)
}

// Open returns the token sealed in text. Anything but a token this
// Sealer's key sealed, unaltered, is ErrInvalid.
func (s *Sealer) Open(text string) (Token, error) {
	plain, err := s.tokens.Open(text, plainFixed+1, MaxTokenLength)
	if err != nil {
		return Token{}, ErrInvalid
	}
	// Authenticated: what follows was written by Seal, yet it is read
	// defensively.
	flags := plain[0]
	if flags&^(flagTopic|flagBcast) != 0 {
		return Token{}, ErrInvalid
	}
	rest := plain[1:]
	next := func() (uuid.UUID, bool) {
		var id uuid.UUID
		if len(rest) < idLen {
			return id, false
		}
		copy(id[:], rest)
		rest = rest[idLen:]
		return id, true
	}
	var t Token
	var ok bool
	if t.TeamID, ok = next(); !ok {
		return Token{}, ErrInvalid
	}
	if t.EmailID, ok = next(); !ok {
		return Token{}, ErrInvalid
	}
	if flags&flagTopic != 0 {
		id, ok := next()
		if !ok {
			return Token{}, ErrInvalid
		}
		t.TopicID = &id
	}
	if flags&flagBcast != 0 {
		id, ok := next()
		if !ok {
			return Token{}, ErrInvalid
		}
		t.BroadcastID = &id
	}
	if len(rest) == 0 || len(rest) > MaxAddressLength {
		return Token{}, ErrInvalid
	}
	t.Email = string(rest)
	return t, nil
}

// Links makes unsubscribe links: Base (POSTHASTE_PUBLIC_URL, without a
// trailing slash) + Path + a token sealed by Sealer.
type Links struct {
	Base   string
	Sealer *Sealer
}

// NewLinks returns the links of an installation, or nil when it has no
// public URL or no master key: mail that needs links cannot be built then.
func NewLinks(base string, key []byte) (*Links, error) {
	base = strings.TrimRight(base, "/")
	if base == "" || key == nil {
		return nil, nil
	}
	s, err := NewSealer(key)
	if err != nil {
		return nil, err
	}
	return &Links{Base: base, Sealer: s}, nil
}

// URL returns a new link for t. Its characters are all URL-safe
// (RFC 3986 unreserved, and the base's), so it goes into HTML and headers
// as it is.
func (l *Links) URL(t Token) (string, error) {
	tok, err := l.Sealer.Seal(t)
	if err != nil {
		return "", err
	}
	return l.Base + Path + tok, nil
}

// ReplacePlaceholders returns s with every Placeholder and
// PlaceholderAlias replaced by url.
func ReplacePlaceholders(s, url string) string {
	if !strings.Contains(s, "{{{") {
		return s
	}
	return strings.NewReplacer(Placeholder, url, PlaceholderAlias, url).Replace(s)
}
