// Package seal encrypts secrets at rest (DKIM private keys, webhook
// secrets, TOTP secrets, the installation's token keys) with the
// installation's master key, POSTHASTE_MASTER_KEY, using AES-256-GCM.
//
// A Box holds a keyring: the current master key, which seals, and older
// keys that can still open what they sealed, so that the master key can
// be rotated while the service runs. A sealed value (version 2) is
//
//	version (1 byte, 2) | key id (4) | nonce (12) | GCM ciphertext and tag
//
// where the key id is the first 4 bytes of SHA-256 of the master key, so
// Open picks the key without trying each. Version 1 (version byte, nonce,
// ciphertext; no key id), written before keyrings, still opens with any
// key of the ring. The caller's associated data (the owning row's id)
// binds a sealed value to its row, so values cannot be swapped between
// rows.
package seal

import (
	"bytes"
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

// KeyIDSize is the length of a key id: the first bytes of SHA-256 of a
// master key.
const KeyIDSize = 4

const (
	version1 = 1 // AES-256-GCM, 12-byte nonce, no key id
	version2 = 2 // AES-256-GCM, 4-byte key id, 12-byte nonce
)

// ErrOpen means a sealed value could not be decrypted: it was sealed with
// a master key that is not in the ring, for another row, or it was
// altered.
var ErrOpen = errors.New("sealed value cannot be opened with this master key")

// KeyID is the id of a master key in sealed values.
type KeyID [KeyIDSize]byte

// String is the id in hex, as the admin commands print it.
func (id KeyID) String() string { return hex.EncodeToString(id[:]) }

// IDOf returns the id of a master key.
func IDOf(key []byte) KeyID {
	sum := sha256.Sum256(key)
	var id KeyID
	copy(id[:], sum[:KeyIDSize])
	return id
}

// ring is one master key of a Box.
type ring struct {
	id   KeyID
	aead cipher.AEAD
	key  []byte
}

// Box seals with the current master key and opens with any key of its
// ring. It is safe for concurrent use. A nil *Box is never valid to call;
// callers treat nil as "no master key configured".
type Box struct {
	keys []ring // keys[0] is the current key
	// pinned are the keys DeriveKey returns instead of deriving, by
	// purpose (see WithKeys).
	pinned map[string][]byte
}

// New returns a Box for a 32-byte key and no older keys.
func New(key []byte) (*Box, error) { return NewRing(key) }

// NewRing returns a Box that seals with current and opens values sealed
// with current or any of previous. Keys must be 32 bytes and distinct.
func NewRing(current []byte, previous ...[]byte) (*Box, error) {
	b := &Box{}
	for i, key := range append([][]byte{current}, previous...) {
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
		id := IDOf(key)
		for _, k := range b.keys {
			if k.id == id {
				return nil, fmt.Errorf("master key %d of the ring repeats key %s", i+1, id)
			}
		}
		b.keys = append(b.keys, ring{id: id, aead: aead, key: bytes.Clone(key)})
	}
	return b, nil
}

// CurrentID is the id of the key that seals.
func (b *Box) CurrentID() KeyID { return b.keys[0].id }

// KeyIDs are the ids of the ring, the current key's first.
func (b *Box) KeyIDs() []KeyID {
	ids := make([]KeyID, len(b.keys))
	for i, k := range b.keys {
		ids[i] = k.id
	}
	return ids
}

// SealedUnder reports which key sealed a value: its key id, or ok false
// for a version-1 value (which names no key) or bytes that are no sealed
// value. It decrypts nothing.
func SealedUnder(sealed []byte) (id KeyID, ok bool) {
	if len(sealed) < 1+KeyIDSize || sealed[0] != version2 {
		return KeyID{}, false
	}
	copy(id[:], sealed[1:1+KeyIDSize])
	return id, true
}

// CurrentPrefix is how every value sealed with the current key starts
// (the version byte and the key id), for finding the values still under
// other keys without opening them.
func (b *Box) CurrentPrefix() []byte {
	return append([]byte{version2}, b.keys[0].id[:]...)
}

// IsCurrent reports whether a sealed value was sealed with the current
// key (it may still fail to open if it was altered).
func (b *Box) IsCurrent(sealed []byte) bool {
	id, ok := SealedUnder(sealed)
	return ok && id == b.keys[0].id
}

// DeriveKey returns the 32-byte key of one purpose (unsubscribe tokens,
// tracked links, return-path signatures), never the master key itself.
// When the Box carries pinned keys (WithKeys) it returns the one of
// purpose; otherwise it derives one from the current master key with
// HKDF-SHA256 (RFC 5869), purpose as the info string. A derived key
// changes with the master key, so deployments pin every purpose they use
// (the stored installation keys) to keep links in mail already sent
// working across a rotation.
func (b *Box) DeriveKey(purpose string) []byte {
	if k, ok := b.pinned[purpose]; ok {
		return bytes.Clone(k)
	}
	k, err := hkdf.Key(sha256.New, b.keys[0].key, nil, purpose, KeySize)
	if err != nil { // only for lengths HKDF cannot produce
		panic(fmt.Sprintf("deriving a key: %v", err))
	}
	return k
}

// Oldest returns a Box of the last key of the ring alone (the current key
// when there is no other), without pinned keys.
func (b *Box) Oldest() *Box { return &Box{keys: b.keys[len(b.keys)-1:]} }

// WithKeys returns a Box with the same ring whose DeriveKey returns
// keys[purpose] for the purposes keys holds.
func (b *Box) WithKeys(keys map[string][]byte) *Box {
	nb := &Box{keys: b.keys, pinned: make(map[string][]byte, len(keys)+len(b.pinned))}
	for p, k := range b.pinned {
		nb.pinned[p] = k
	}
	for p, k := range keys {
		nb.pinned[p] = bytes.Clone(k)
	}
	return nb
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

// ParseKeys decodes a list of master keys, one per line or separated by
// commas, the form of key files and of POSTHASTE_MASTER_KEY_PREVIOUS.
// Blank lines and lines starting with # are skipped.
func ParseKeys(s string) ([][]byte, error) {
	var keys [][]byte
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, f := range strings.Split(line, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			k, err := ParseKey(f)
			if err != nil {
				return nil, fmt.Errorf("key %d: %w", len(keys)+1, err)
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// LoadOrCreateKeyFile reads the master keys in path, the current key
// first, first writing a new random one there (mode 0600) when the file
// does not exist. `dev` keeps its keys in the data directory this way;
// the file holds one key per line (see PrependKeyFile).
func LoadOrCreateKeyFile(path string) ([][]byte, error) {
	keys, err := ReadKeyFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		return keys, err
	}
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
	return ParseKeys(k)
}

// ReadKeyFile reads the master keys in path, the current key first. A
// missing file is an error that wraps os.ErrNotExist.
func ReadKeyFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading master key: %w", err)
	}
	keys, err := ParseKeys(string(b))
	if err == nil && len(keys) == 0 {
		err = errors.New("no key in the file")
	}
	if err != nil {
		return nil, fmt.Errorf("reading master key %s: %w", path, err)
	}
	return keys, nil
}

// PrependKeyFile writes a new random key as the first line of the key
// file in path, keeping the keys it held on the following lines: the new
// key becomes the current one, the others previous keys, for the next
// process that reads the file. It replaces the file atomically (mode
// 0600) and returns the new key's id.
func PrependKeyFile(path string) (KeyID, error) {
	return rewriteKeyFile(path, func(old []string) ([]string, KeyID, error) {
		k, err := NewKey()
		if err != nil {
			return nil, KeyID{}, fmt.Errorf("making master key: %w", err)
		}
		raw, _ := ParseKey(k)
		return append([]string{k}, old...), IDOf(raw), nil
	})
}

// TrimKeyFile keeps only the first (current) key of the key file in path,
// once nothing is sealed under the others any more. It returns the id of
// the key kept.
func TrimKeyFile(path string) (KeyID, error) {
	return rewriteKeyFile(path, func(old []string) ([]string, KeyID, error) {
		if len(old) == 0 {
			return nil, KeyID{}, errors.New("no key in the file")
		}
		raw, err := ParseKey(old[0])
		if err != nil {
			return nil, KeyID{}, err
		}
		return old[:1], IDOf(raw), nil
	})
}

// rewriteKeyFile replaces the key lines of path with what edit makes of
// them, through a temporary file renamed over it.
func rewriteKeyFile(path string, edit func(old []string) ([]string, KeyID, error)) (KeyID, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return KeyID{}, fmt.Errorf("reading master key: %w", err)
	}
	var old []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			if _, err := ParseKeys(line); err != nil {
				return KeyID{}, fmt.Errorf("reading master key %s: %w", path, err)
			}
			old = append(old, line)
		}
	}
	lines, id, err := edit(old)
	if err != nil {
		return KeyID{}, fmt.Errorf("master key file %s: %w", path, err)
	}
	// CreateTemp makes the file with mode 0600.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".master.key-*")
	if err != nil {
		return KeyID{}, fmt.Errorf("writing master key: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	_, err = tmp.WriteString(strings.Join(lines, "\n") + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return KeyID{}, fmt.Errorf("writing master key: %w", err)
	}
	return id, nil
}

// Seal encrypts plaintext bound to ad (associated data, not secret) with
// the current master key.
func (b *Box) Seal(plaintext, ad []byte) ([]byte, error) {
	k := b.keys[0]
	n := k.aead.NonceSize()
	out := make([]byte, 1+KeyIDSize+n, 1+KeyIDSize+n+len(plaintext)+k.aead.Overhead())
	out[0] = version2
	copy(out[1:], k.id[:])
	nonce := out[1+KeyIDSize:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("making nonce: %w", err)
	}
	return k.aead.Seal(out, nonce, plaintext, ad), nil
}

// Open decrypts a value made by Seal with a key of the ring and the same
// ad: a version-2 value with the key its id names, a version-1 value with
// each key in turn. It returns ErrOpen for anything else.
func (b *Box) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, ErrOpen
	}
	switch sealed[0] {
	case version2:
		id, _ := SealedUnder(sealed)
		for _, k := range b.keys {
			if k.id == id {
				return open(k.aead, sealed[1+KeyIDSize:], ad)
			}
		}
	case version1:
		for _, k := range b.keys {
			if pt, err := open(k.aead, sealed[1:], ad); err == nil {
				return pt, nil
			}
		}
	}
	return nil, ErrOpen
}

// Reseal opens sealed and seals it again with the current key. A value
// already under the current key is returned unchanged with changed false.
func (b *Box) Reseal(sealed, ad []byte) (out []byte, changed bool, err error) {
	pt, err := b.Open(sealed, ad)
	if err != nil {
		return nil, false, err
	}
	if b.IsCurrent(sealed) {
		return sealed, false, nil
	}
	out, err = b.Seal(pt, ad)
	return out, err == nil, err
}

// open decrypts nonce|ciphertext.
func open(aead cipher.AEAD, rest, ad []byte) ([]byte, error) {
	n := aead.NonceSize()
	if len(rest) < n+aead.Overhead() {
		return nil, ErrOpen
	}
	pt, err := aead.Open(nil, rest[:n], rest[n:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
