package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// Tokens seals short payloads into URL-safe text for links that carry
// their own authority (unsubscribe links, tracked links). The text is
// base64url without padding of
//
//	version (1) | nonce (12) | AES-256-GCM(payload) with its tag (16)
//
// with the version byte as associated data: a token cannot be forged,
// altered or told apart from another one sealing the same payload. Use a
// key derived for one purpose only (Box.DeriveKey). Safe for concurrent
// use.
type Tokens struct{ aead cipher.AEAD }

// TokenOverhead is what sealing adds to a payload, in bytes before
// base64.
const TokenOverhead = 1 + tokenNonce + 16

const (
	tokenVersion = 1
	tokenNonce   = 12
)

// ErrToken is a text that is not a token these Tokens sealed, unaltered.
var ErrToken = errors.New("invalid token")

// NewTokens returns Tokens for a 32-byte key; purpose names it in errors.
func NewTokens(key []byte, purpose string) (*Tokens, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%s key must be 32 bytes, not %d", purpose, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", purpose, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", purpose, err)
	}
	return &Tokens{aead: aead}, nil
}

// Seal returns the text of payload, with a random nonce.
func (t *Tokens) Seal(payload []byte) (string, error) {
	out := make([]byte, 1+tokenNonce, TokenOverhead+len(payload))
	out[0] = tokenVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return "", fmt.Errorf("making nonce: %w", err)
	}
	out = t.aead.Seal(out, out[1:1+tokenNonce], payload, out[:1])
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns the payload sealed in text, which must be at most maxText
// long (checked before anything is decoded) and carry at least minPayload
// bytes. Anything else is ErrToken.
func (t *Tokens) Open(text string, minPayload, maxText int) ([]byte, error) {
	if len(text) > maxText {
		return nil, ErrToken
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(text)
	if err != nil || len(raw) < TokenOverhead+minPayload || raw[0] != tokenVersion {
		return nil, ErrToken
	}
	payload, err := t.aead.Open(nil, raw[1:1+tokenNonce], raw[1+tokenNonce:], raw[:1])
	if err != nil {
		return nil, ErrToken
	}
	return payload, nil
}
