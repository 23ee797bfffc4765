// Package datakey seals the content of a team's mail at rest (message
// bodies, built and submitted messages, attachments, received mail) with
// envelope encryption: each team has a data key, a random AES-256 key
// stored sealed under the installation's master key (internal/seal) in
// team_data_key, and values are sealed with AES-256-GCM under the team's
// data key.
//
// A sealed value is a version byte, the 16-byte id of the data key that
// sealed it, a random 96-bit nonce and the GCM ciphertext with its tag.
// The associated data is the version and key id followed by the caller's
// AD, which names the value's row and column (see AD), so a value cannot
// be moved to another row, column or team unnoticed, and values sealed
// under older data keys stay readable once a team has a newer one.
//
// A Keyring caches unsealed data keys in a bounded LRU: a team's first
// value in a process costs one query (two when its key is created);
// later ones none.
package datakey

import (
	"container/list"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// KeySize is the length of a data key (AES-256).
const KeySize = 32

// version1: AES-256-GCM, 16-byte key id, 12-byte nonce.
const version1 = 1

const headerLen = 1 + 16

// ErrOpen means a sealed value could not be opened: it is not a sealed
// value, it was sealed for another row, column or team, or it was altered.
var ErrOpen = errors.New("sealed value cannot be opened")

// MasterKey seals data keys; *seal.Box implements it. Data keys are sealed
// with their own id as associated data.
type MasterKey interface {
	Seal(plaintext, ad []byte) ([]byte, error)
	Open(sealed, ad []byte) ([]byte, error)
}

// Record is a data key as stored: SealedKey is the key sealed with the
// master key under AD ID[:].
type Record struct {
	ID        uuid.UUID
	TeamID    uuid.UUID
	SealedKey []byte
}

// Store keeps data keys (internal/store implements it).
type Store interface {
	// CurrentDataKey returns the team's current data key; ErrNoKey
	// (wrapped) when it has none.
	CurrentDataKey(ctx context.Context, teamID uuid.UUID) (Record, error)
	// AddDataKey stores candidate as the team's current data key unless
	// the team already has one (another process was first), and returns
	// the team's current key either way.
	AddDataKey(ctx context.Context, candidate Record) (Record, error)
	// DataKey returns the data key with this id, current or not.
	DataKey(ctx context.Context, id uuid.UUID) (Record, error)
}

// ErrNoKey is what a Store wraps when a team has no current data key.
var ErrNoKey = errors.New("no data key")

// Config tunes a Keyring; zero values take the defaults.
type Config struct {
	// CacheSize bounds the unsealed keys held in memory (default 4096).
	CacheSize int
	// CurrentTTL is how long the team's current key is trusted to still be
	// current before it is looked up again (default 10 minutes), so a new
	// data key made elsewhere is used here after at most that long.
	CurrentTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Keyring seals and opens values with teams' data keys. It is safe for
// concurrent use.
type Keyring struct {
	master MasterKey
	store  Store
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	size    int
	lru     *list.List // of *entry, most recently used first
	byID    map[uuid.UUID]*list.Element
	current map[uuid.UUID]*list.Element // team → its current key's element
}

type entry struct {
	id, team uuid.UUID
	aead     cipher.AEAD
	// currentAt is when the key was last known to be its team's current
	// one; zero when it was only ever loaded to open values.
	currentAt time.Time
}

// New returns a Keyring whose data keys are sealed with master and kept in
// store.
func New(master MasterKey, store Store, cfg Config) *Keyring {
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 4096
	}
	if cfg.CurrentTTL <= 0 {
		cfg.CurrentTTL = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Keyring{master: master, store: store, ttl: cfg.CurrentTTL, now: cfg.Now, size: cfg.CacheSize,
		lru: list.New(), byID: map[uuid.UUID]*list.Element{}, current: map[uuid.UUID]*list.Element{}}
}

// AD is the associated data of the value in column of the row of table
// identified by id (and, for tables whose key has two parts, part).
func AD(table, column string, id uuid.UUID, part ...int) []byte {
	ad := make([]byte, 0, len(table)+len(column)+16+8)
	ad = append(ad, table...)
	ad = append(ad, '.')
	ad = append(ad, column...)
	ad = append(ad, 0)
	ad = append(ad, id[:]...)
	for _, p := range part {
		ad = fmt.Appendf(ad, "/%d", p)
	}
	return ad
}

// Seal seals plaintext with the team's current data key, creating the key
// on first use, bound to ad.
func (k *Keyring) Seal(ctx context.Context, teamID uuid.UUID, plaintext, ad []byte) ([]byte, error) {
	e, err := k.currentKey(ctx, teamID)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, e.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("making nonce: %w", err)
	}
	out := make([]byte, 0, headerLen+len(nonce)+len(plaintext)+e.aead.Overhead())
	out = append(out, version1)
	out = append(out, e.id[:]...)
	out = append(out, nonce...)
	return e.aead.Seal(out, nonce, plaintext, fullAD(out[:headerLen], ad)), nil
}

// Open opens a value Seal made for the same team and ad. ErrOpen when the
// value is not one, or its key is not one of the team's.
func (k *Keyring) Open(ctx context.Context, teamID uuid.UUID, sealed, ad []byte) ([]byte, error) {
	id, ok := KeyID(sealed)
	if !ok {
		return nil, ErrOpen
	}
	e, err := k.keyByID(ctx, id)
	if err != nil {
		return nil, err
	}
	n := e.aead.NonceSize()
	if e.team != teamID || len(sealed) < headerLen+n+e.aead.Overhead() {
		return nil, ErrOpen
	}
	pt, err := e.aead.Open(nil, sealed[headerLen:headerLen+n], sealed[headerLen+n:], fullAD(sealed[:headerLen], ad))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// KeyID returns the id of the data key that sealed a value.
func KeyID(sealed []byte) (uuid.UUID, bool) {
	if len(sealed) < headerLen || sealed[0] != version1 {
		return uuid.UUID{}, false
	}
	return uuid.UUID(sealed[1:headerLen]), true
}

func fullAD(header, ad []byte) []byte {
	return append(append(make([]byte, 0, len(header)+len(ad)), header...), ad...)
}

// currentKey returns the team's current data key, from the cache when it
// was confirmed current within the TTL.
func (k *Keyring) currentKey(ctx context.Context, teamID uuid.UUID) (*entry, error) {
	now := k.now()
	k.mu.Lock()
	if el, ok := k.current[teamID]; ok {
		e := el.Value.(*entry)
		if now.Sub(e.currentAt) < k.ttl {
			k.lru.MoveToFront(el)
			k.mu.Unlock()
			return e, nil
		}
	}
	k.mu.Unlock()
	rec, err := k.store.CurrentDataKey(ctx, teamID)
	if errors.Is(err, ErrNoKey) {
		rec, err = k.create(ctx, teamID)
	}
	if err != nil {
		return nil, fmt.Errorf("loading data key of team %s: %w", teamID, err)
	}
	e, err := k.unseal(rec)
	if err != nil {
		return nil, err
	}
	e.currentAt = now
	return k.add(e, true), nil
}

// create makes a new data key and stores it as the team's current one
// unless another process stored one first; it returns the current one.
func (k *Keyring) create(ctx context.Context, teamID uuid.UUID) (Record, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Record{}, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return Record{}, fmt.Errorf("making data key: %w", err)
	}
	sealed, err := k.master.Seal(key, id[:])
	if err != nil {
		return Record{}, fmt.Errorf("sealing data key: %w", err)
	}
	return k.store.AddDataKey(ctx, Record{ID: id, TeamID: teamID, SealedKey: sealed})
}

// keyByID returns a data key by id, from the cache or the store.
func (k *Keyring) keyByID(ctx context.Context, id uuid.UUID) (*entry, error) {
	k.mu.Lock()
	if el, ok := k.byID[id]; ok {
		k.lru.MoveToFront(el)
		k.mu.Unlock()
		return el.Value.(*entry), nil
	}
	k.mu.Unlock()
	rec, err := k.store.DataKey(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("loading data key %s: %w", id, err)
	}
	e, err := k.unseal(rec)
	if err != nil {
		return nil, err
	}
	return k.add(e, false), nil
}

func (k *Keyring) unseal(rec Record) (*entry, error) {
	key, err := k.master.Open(rec.SealedKey, rec.ID[:])
	if err != nil {
		return nil, fmt.Errorf("opening data key %s: %w", rec.ID, err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("data key %s is %d bytes", rec.ID, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &entry{id: rec.ID, team: rec.TeamID, aead: aead}, nil
}

// add caches e (or refreshes the entry already cached for its id) and
// evicts the least recently used keys beyond the cache size. With current
// set, e becomes its team's current key.
func (k *Keyring) add(e *entry, current bool) *entry {
	k.mu.Lock()
	defer k.mu.Unlock()
	el, ok := k.byID[e.id]
	if ok {
		old := el.Value.(*entry)
		if current {
			old.currentAt = e.currentAt
		}
		e = old
		k.lru.MoveToFront(el)
	} else {
		el = k.lru.PushFront(e)
		k.byID[e.id] = el
	}
	if current {
		k.current[e.team] = el
	}
	for k.lru.Len() > k.size {
		last := k.lru.Back()
		old := last.Value.(*entry)
		k.lru.Remove(last)
		delete(k.byID, old.id)
		if k.current[old.team] == last {
			delete(k.current, old.team)
		}
	}
	return e
}

// Len returns the number of data keys cached.
func (k *Keyring) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lru.Len()
}
