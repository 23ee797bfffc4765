// Package seal encrypts secrets at rest (DKIM private keys, later webhook
// secrets) with the installation's master key, POSTHASTE_MASTER_KEY, using
// AES-256-GCM. A sealed value is a version byte, a random 96-bit nonce and
// the GCM ciphertext with its tag; the caller's associated data (the owning
// row's id) binds a sealed value to its row, so values cannot be swapped
// between rows.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the length of a master key in bytes (AES-256).
const KeySize = 32

// version 1: AES-256-GCM, 12-byte nonce.
const version1 = 1

// ErrOpen means a sealed value could not be decrypted: it was sealed with
// another master key, for another row, or it was altered.
var ErrOpen = errors.New("sealed value cannot be opened with this master key")

// Box seals and opens values with one master key. It is safe for
// concurrent use.
type Box struct {
	aead cipher.AEAD
	key  []byte // the master key, for DeriveKey
}

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("master key must be %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead, key: append([]byte(nil), key...)}, nil
}

// DeriveKey returns a 32-byte key for one purpose, derived from the master
// key with HKDF-SHA256 (RFC 5869) with purpose as the info string, so that
// other uses of the master key (unsubscribe tokens) never share key
// material with the values it seals. The same purpose gives the same key.
func (b *Box) DeriveKey(purpose string) []byte {
	k, err := hkdf.Key(sha256.New, b.key, nil, purpose, KeySize)
	if err != nil { // only for lengths HKDF cannot produce
		panic(fmt.Sprintf("deriving a key: %v", err))
	}
	return k
}

// ParseKey decodes a master key written as base64 (standard or URL
// alphabet, padded or not) or as 64 hex digits.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("master key must decode to %d bytes, not %d", KeySize, len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("master key must be 32 bytes in base64 or 64 hex digits")
}

// NewKey returns a random master key in the base64 form ParseKey reads.
func NewKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// LoadOrCreateKeyFile reads the master key in path, first writing a new
// random one there (mode 0600) when the file does not exist. `dev` keeps
// its key in the data directory this way.
func LoadOrCreateKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k, err := NewKey()
		if err != nil {
			return nil, fmt.Errorf("making master key: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreateKeyFile(path) // another process wrote it first
		}
		if err != nil {
			return nil, fmt.Errorf("writing master key: %w", err)
		}
		if _, err := f.WriteString(k + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("writing master key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("writing master key: %w", err)
		}
		return ParseKey(k)
	}
	if err != nil {
		return nil, fmt.Errorf("reading master key: %w", err)
	}
	key, err := ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("reading master key %s: %w", path, err)
	}
	return key, nil
}

// Seal encrypts plaintext bound to ad (associated data, not secret).
func (b *Box) Seal(plaintext, ad []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("making nonce: %w", err)
	}
	out := make([]byte, 0, 1+len(nonce)+len(plaintext)+b.aead.Overhead())
	out = append(out, version1)
	out = append(out, nonce...)
	return b.aead.Seal(out, nonce, plaintext, ad), nil
}

// Open decrypts a value made by Seal with the same key and ad. It returns
// ErrOpen for anything else.
func (b *Box) Open(sealed, ad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < 1+n+b.aead.Overhead() || sealed[0] != version1 {
		return nil, ErrOpen
	}
	pt, err := b.aead.Open(nil, sealed[1:1+n], sealed[1+n:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
