// Package tracking implements open and click tracking of outgoing mail:
// the authenticated tokens that tracked links and the open pixel carry,
// the rewriting of an HTML body for one recipient, and the classification
// of a hit as a person's or a machine's (mail scanners, image proxies that
// prefetch).
//
// A token names the team, the email, the recipient's index among the
// email's recipients, the tracking host of the domain that sent the
// email, and what was hit: the open pixel, or link n of the body together
// with that link's original URL. It is sealed with
// AES-256-GCM under a key derived from the installation's master key for
// this purpose only (seal.Box.DeriveKey with KeyPurpose), with a random
// nonce. The URL a click redirects to is therefore authenticated: a token
// cannot be altered to lead anywhere else (no open redirect), and any
// token that does not open is refused. The host is authenticated too, so
// that a token is served only on the host it was issued for (or the
// operator's shared tracking host), never under another team's domain.
package tracking

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/seal"
)

// KeyPurpose is the purpose the token key is derived from the master key
// for (seal.Box.DeriveKey).
const KeyPurpose = "posthaste tracking token v1"

// Paths of the tracking endpoints on a tracking host:
// https://<host>/o/<token> (the open pixel) and https://<host>/c/<token>
// (a click, redirected to the link's URL).
const (
	OpenPath  = "/o/"
	ClickPath = "/c/"
)

// MaxURLLength bounds the URL of a link that is tracked: a longer link is
// left as it is.
const MaxURLLength = 2048

// MaxLinks bounds the links of one body that are tracked: links past it
// are left as they are.
const MaxLinks = 1000

// MaxRecipients bounds the recipient index a token carries.
const MaxRecipients = 1 << 16

// Kind says what a token was hit through.
type Kind byte

// The kinds of token.
const (
	Open  Kind = 1 // the open pixel
	Click Kind = 2 // a link
)

// String returns "open" or "click".
func (k Kind) String() string {
	switch k {
	case Open:
		return "open"
	case Click:
		return "click"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Token is what a tracked URL names.
type Token struct {
	Kind      Kind
	TeamID    uuid.UUID
	EmailID   uuid.UUID
	Recipient int // index of the recipient in the email's recipients
	// Link is the index of the link in the body (0 for Open), and URL its
	// original URL ("" for Open).
	Link int
	URL  string
	// Host is the tracking host of the domain that issued the token
	// (normalised as NormalizeHost does). It is "" in a token of the first
	// format, which named no host: such tokens are no longer issued, and
	// are opened only for the links already delivered.
	Host string
}

// Wire format, before base64url without padding:
//
//	version (1) | nonce (12) | AES-256-GCM(plaintext) with its tag (16)
//
// with the version byte as associated data, and the plaintext
//
//	kind (1) | team id (16) | email id (16) | recipient (2) | link (2) | [host] | url
//
// where url is empty for Open. A kind byte with hostFlag set is followed,
// after the link, by host: its length (1) and the host; without the flag
// (the first format, before tokens were bound to their host) there is no
// host.
const (
	idLen      = 16
	plainFixed = 1 + 2*idLen + 2 + 2
	hostFlag   = 0x80
	maxHostLen = 253 // a DNS name (RFC 1035 §2.3.4), as NormalizeHost bounds it
)

// MaxTokenLength bounds the text of a token: a longer one is refused
// before it is decoded.
const MaxTokenLength = (seal.TokenOverhead+plainFixed+1+maxHostLen+MaxURLLength)*4/3 + 4

// ErrInvalid is any token that cannot be opened: altered, cut, sealed with
// another key, or not a token at all.
var ErrInvalid = errors.New("invalid tracking token")

// Sealer seals and opens tokens (in a seal.Tokens envelope). Safe for
// concurrent use.
type Sealer struct{ tokens *seal.Tokens }

// NewSealer returns a Sealer for a 32-byte key, which must be used for
// nothing else: seal.Box.DeriveKey(KeyPurpose).
func NewSealer(key []byte) (*Sealer, error) {
	t, err := seal.NewTokens(key, "tracking")
	if err != nil {
		return nil, err
	}
	return &Sealer{tokens: t}, nil
}

// check says whether t can be sealed.
func (t Token) check() error {
	switch {
	case t.Recipient < 0 || t.Recipient >= MaxRecipients:
		return fmt.Errorf("recipient index %d out of range", t.Recipient)
	case t.Kind == Open && (t.Link != 0 || t.URL != ""):
		return errors.New("an open token names no link")
	case t.Kind == Click && (t.Link < 0 || t.Link >= MaxLinks):
		return fmt.Errorf("link index %d out of range", t.Link)
	case t.Kind == Click && (t.URL == "" || len(t.URL) > MaxURLLength):
		return fmt.Errorf("link URL of %d bytes", len(t.URL))
	case t.Kind != Open && t.Kind != Click:
		return fmt.Errorf("unknown kind %d", byte(t.Kind))
	}
	if t.Host != "" {
		if h, ok := NormalizeHost(t.Host); !ok || h != t.Host {
			return fmt.Errorf("host %q is not a normalised host name", t.Host)
		}
	}
	return nil
}

// Seal returns the token's text: URL-safe, without padding. A token
// without a Host is sealed in the first format (which only tests of the
// links already delivered have a use for).
func (s *Sealer) Seal(t Token) (string, error) {
	if err := t.check(); err != nil {
		return "", fmt.Errorf("sealing tracking token: %w", err)
	}
	plain := make([]byte, 0, plainFixed+1+len(t.Host)+len(t.URL))
	kind := byte(t.Kind)
	if t.Host != "" {
		kind |= hostFlag
	}
	plain = append(plain, kind)
	plain = append(plain, t.TeamID[:]...)
	plain = append(plain, t.EmailID[:]...)
	plain = binary.BigEndian.AppendUint16(plain, uint16(t.Recipient))
	plain = binary.BigEndian.AppendUint16(plain, uint16(t.Link))
	if t.Host != "" {
		plain = append(plain, byte(len(t.Host)))
		plain = append(plain, t.Host...)
	}
	plain = append(plain, t.URL...)

	return s.tokens.Seal(plain)
}

// Open returns the token sealed in text. Anything but a token this
// Sealer's key sealed, unaltered, is ErrInvalid.
func (s *Sealer) Open(text string) (Token, error) {
	plain, err := s.tokens.Open(text, plainFixed, MaxTokenLength)
	if err != nil || len(plain) < plainFixed {
		return Token{}, ErrInvalid
	}
	// Authenticated: what follows was written by Seal, yet it is checked
	// again.
	var t Token
	t.Kind = Kind(plain[0] &^ hostFlag)
	copy(t.TeamID[:], plain[1:])
	copy(t.EmailID[:], plain[1+idLen:])
	t.Recipient = int(binary.BigEndian.Uint16(plain[1+2*idLen:]))
	t.Link = int(binary.BigEndian.Uint16(plain[3+2*idLen:]))
	rest := plain[plainFixed:]
	if plain[0]&hostFlag != 0 {
		if len(rest) < 1 || int(rest[0]) > len(rest)-1 || rest[0] == 0 {
			return Token{}, ErrInvalid
		}
		t.Host, rest = string(rest[1:1+rest[0]]), rest[1+rest[0]:]
	}
	t.URL = string(rest)
	if t.check() != nil {
		return Token{}, ErrInvalid
	}
	return t, nil
}

// Links makes the tracked URLs of one tracking host, with tokens bound to
// it.
type Links struct {
	Host   string // the domain's tracking host, e.g. links.example.com
	Sealer *Sealer
	// Base, when set, is what the URLs start with instead of
	// https://<Host>: `posthaste dev`'s own address (e.g.
	// http://localhost:8080), whose host is Host, so that tracked mail
	// works on the developer's machine without a DNS record.
	Base string
}

// prefix is what the URLs of l start with, before the path.
func (l Links) prefix() string {
	if l.Base != "" {
		return strings.TrimSuffix(l.Base, "/")
	}
	return "https://" + l.Host
}

// OpenURL returns the URL of the open pixel of one recipient of an email.
func (l Links) OpenURL(teamID, emailID uuid.UUID, recipient int) (string, error) {
	host, err := l.host()
	if err != nil {
		return "", err
	}
	tok, err := l.Sealer.Seal(Token{Kind: Open, TeamID: teamID, EmailID: emailID, Recipient: recipient,
		Host: host})
	if err != nil {
		return "", err
	}
	return l.prefix() + OpenPath + tok, nil
}

// ClickURL returns the tracked URL of link number link (whose original
// URL is target) for one recipient of an email.
func (l Links) ClickURL(teamID, emailID uuid.UUID, recipient, link int, target string) (string, error) {
	host, err := l.host()
	if err != nil {
		return "", err
	}
	tok, err := l.Sealer.Seal(Token{Kind: Click, TeamID: teamID, EmailID: emailID, Recipient: recipient,
		Link: link, URL: target, Host: host})
	if err != nil {
		return "", err
	}
	return l.prefix() + ClickPath + tok, nil
}

// host returns l.Host as the tokens carry it: normalised.
func (l Links) host() (string, error) {
	h, ok := NormalizeHost(l.Host)
	if !ok {
		return "", fmt.Errorf("sealing tracking token: tracking host %q is not a host name", l.Host)
	}
	return h, nil
}
