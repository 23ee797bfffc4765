// Package codec keeps personal data out of readable Temporal histories by
// crypto-shredding (issue 22): every value that carries recipient
// addresses declares them (PersonalData); the data converter
// (NewDataConverter) tags its payload with the addresses' subject ids,
// and the payload codec (Codec) encrypts a tagged payload with AES-256-GCM
// under a key derived from the keys of all its subjects. Each subject
// (a team and a normalised address) has one random key, sealed with the
// master key in the subject_key table; Erase deletes it, and with it every
// copy of the address in every history. Untagged payloads pass through
// untouched, so histories recorded before this package replay.
//
// Handler serves the codec to the Temporal UI (the codec-server protocol),
// so operators can still read the payloads whose keys exist.
package codec

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/ttlcache"
)

// PersonalData is implemented by the values passed through Temporal that
// carry recipient addresses: their payloads are encrypted under the keys
// of those addresses. A value with a nil team id or no addresses is left
// in the clear (histories from before team ids were recorded).
type PersonalData interface {
	PersonalData() (teamID uuid.UUID, addresses []string)
}

// DefaultCacheTTL is how long a process keeps an unsealed subject key:
// the bound within which an erasure on one process takes effect on all
// (Erase drops the key from its own process at once).
const DefaultCacheTTL = 30 * time.Second

// DefaultCacheSize bounds the number of unsealed keys a process keeps.
const DefaultCacheSize = 10000

// SubjectIDPurpose is the purpose of the key of subject ids, derived from
// the master key. It must outlive a rotation of the master key (or the
// ids of existing keys would change, and erasures miss them): pin it with
// the other token keys (keyring.Pin).
const SubjectIDPurpose = "subject-id"

// keySize is the length of a subject key (AES-256).
const keySize = 32

// ErrErased means a payload's key is gone: one of its subjects was erased.
var ErrErased = errors.New("personal data erased: subject key destroyed")

// KeyStore holds the sealed subject keys (implemented by *store.Privacy),
// in maps from a subject (as a string of its bytes) to its stored key.
type KeyStore interface {
	// SubjectKeys returns the stored keys of subjects, storing fresh[i]
	// first for subjects[i] when it has none.
	SubjectKeys(ctx context.Context, teamID uuid.UUID, subjects [][]byte, fresh []store.SubjectKey) (map[string]store.SubjectKey, error)
	// FindSubjectKeys returns the stored keys of those subjects that have
	// one.
	FindSubjectKeys(ctx context.Context, teamID uuid.UUID, subjects [][]byte) (map[string]store.SubjectKey, error)
	// DeleteSubjectKey deletes the key; a missing one is no error.
	DeleteSubjectKey(ctx context.Context, teamID uuid.UUID, subject []byte) error
}

var _ KeyStore = (*store.Privacy)(nil)

// Config tunes the key cache; zero values take the defaults.
type Config struct {
	// CacheTTL is how long an unsealed key is kept (DefaultCacheTTL),
	// CacheSize how many (DefaultCacheSize).
	CacheTTL  time.Duration
	CacheSize int
	// Timeout bounds each database call of the codec, whose interface
	// carries no context (default 10 s).
	Timeout time.Duration
}

// Keys makes, finds and erases subject keys. It is safe for concurrent use.
type Keys struct {
	box   *seal.Box
	idKey []byte
	store KeyStore
	cfg   Config
	cache *ttlcache.Cache[cacheKey, []byte] // unsealed keys
}

type cacheKey struct {
	team    uuid.UUID
	subject string // raw HMAC bytes
}

// NewKeys returns the subject keys sealed with box (the master key ring,
// with SubjectIDPurpose pinned: keyring.Pin) in st.
func NewKeys(cfg Config, box *seal.Box, st KeyStore) (*Keys, error) {
	if box == nil {
		return nil, errors.New("subject keys need the master key")
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Keys{box: box, idKey: box.DeriveKey(SubjectIDPurpose), store: st, cfg: cfg,
		cache: ttlcache.New[cacheKey, []byte](ttlcache.Config{MaxEntries: cfg.CacheSize})}, nil
}

// Normalize is the form of an address its subject id is computed from:
// trimmed and lower-cased.
func Normalize(address string) string {
	return strings.ToLower(strings.TrimSpace(address))
}

// Subject returns the subject id of an address: HMAC-SHA256 of the
// normalised address under a key derived from the master key. It reveals
// nothing of the address without the master key.
func (k *Keys) Subject(address string) []byte {
	m := hmac.New(sha256.New, k.idKey)
	m.Write([]byte(Normalize(address)))
	return m.Sum(nil)
}

// SubjectHex is Subject in lower-case hex, the form payload metadata holds.
func (k *Keys) SubjectHex(address string) string {
	return hex.EncodeToString(k.Subject(address))
}

// keys returns the unsealed keys of subjects, in order, with one
// database round trip for all those not cached; create makes the missing
// ones, otherwise a missing key is ErrErased.
func (k *Keys) keys(ctx context.Context, team uuid.UUID, subjects [][]byte, create bool) ([][]byte, error) {
	out := make([][]byte, len(subjects))
	var missing [][]byte
	for i, sub := range subjects {
		if key, ok := k.cache.Get(cacheKey{team, string(sub)}); ok {
			out[i] = key
		} else {
			missing = append(missing, sub)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	var sealed map[string]store.SubjectKey
	var err error
	if create {
		fresh := make([]store.SubjectKey, len(missing))
		for i := range missing {
			key := make([]byte, keySize)
			if _, err := rand.Read(key); err != nil {
				return nil, fmt.Errorf("making subject key: %w", err)
			}
			// Sealed bound to its row's id, as every sealed column
			// (store.SealedColumns), so a rotation re-seals it.
			fresh[i].ID = uuid.New()
			if fresh[i].Sealed, err = k.box.Seal(key, fresh[i].ID[:]); err != nil {
				return nil, fmt.Errorf("sealing subject key: %w", err)
			}
		}
		if sealed, err = k.store.SubjectKeys(ctx, team, missing, fresh); err != nil {
			return nil, fmt.Errorf("storing subject keys: %w", err)
		}
	} else if sealed, err = k.store.FindSubjectKeys(ctx, team, missing); err != nil {
		return nil, fmt.Errorf("reading subject keys: %w", err)
	}
	for i, sub := range subjects {
		if out[i] != nil {
			continue
		}
		s, ok := sealed[string(sub)]
		if !ok {
			return nil, ErrErased
		}
		key, err := k.box.Open(s.Sealed, s.ID[:])
		if err != nil {
			return nil, fmt.Errorf("opening subject key: %w", err)
		}
		k.cache.Set(cacheKey{team, string(sub)}, key, k.cfg.CacheTTL)
		out[i] = key
	}
	return out, nil
}

// CacheTTL is the bound within which an erasure on another process takes
// effect on this one.
func (k *Keys) CacheTTL() time.Duration { return k.cfg.CacheTTL }

// Erase destroys the key of a team's address: every payload encrypted
// under it, in every history, can no longer be decoded. It takes effect
// at once on this process and within CacheTTL on the others, which keep
// the unsealed key that long. A later payload with the address gets a new
// key. Erasing an address without a key is no error.
func (k *Keys) Erase(ctx context.Context, teamID uuid.UUID, address string) error {
	subject := k.Subject(address)
	if err := k.store.DeleteSubjectKey(ctx, teamID, subject); err != nil {
		return fmt.Errorf("erasing subject key: %w", err)
	}
	k.cache.Delete(cacheKey{teamID, string(subject)})
	return nil
}
