package datakey

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/seal"
)

// memStore keeps data keys in memory and counts the lookups that reach it.
type memStore struct {
	mu      sync.Mutex
	keys    map[uuid.UUID]Record
	current map[uuid.UUID]uuid.UUID
	lookups int
}

func newMemStore() *memStore {
	return &memStore{keys: map[uuid.UUID]Record{}, current: map[uuid.UUID]uuid.UUID{}}
}

func (m *memStore) CurrentDataKey(_ context.Context, team uuid.UUID) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	id, ok := m.current[team]
	if !ok {
		return Record{}, ErrNoKey
	}
	return m.keys[id], nil
}

func (m *memStore) AddDataKey(_ context.Context, r Record) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.current[r.TeamID]; ok {
		return m.keys[id], nil
	}
	m.keys[r.ID] = r
	m.current[r.TeamID] = r.ID
	return r, nil
}

func (m *memStore) DataKey(_ context.Context, id uuid.UUID) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	r, ok := m.keys[id]
	if !ok {
		return Record{}, errors.New("not found")
	}
	return r, nil
}

func (m *memStore) lookupCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups
}

func newMaster(t *testing.T) *seal.Box {
	t.Helper()
	b, err := seal.New(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSealOpen(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	k := New(newMaster(t), st, Config{})
	teamA, teamB := uuid.New(), uuid.New()
	row, other := uuid.New(), uuid.New()
	plain := []byte("the body <b>secret marker</b>")
	ad := AD("email", "html", row)

	sealed, err := k.Seal(ctx, teamA, plain, ad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("secret marker")) {
		t.Fatal("sealed value holds the plaintext")
	}
	if id, ok := KeyID(sealed); !ok || id != st.current[teamA] {
		t.Fatalf("key id %v %v, want the team's current key %v", id, ok, st.current[teamA])
	}
	got, err := k.Open(ctx, teamA, sealed, ad)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %q, %v", got, err)
	}
	// A fresh keyring (another process) opens it too, through the store.
	if got, err := New(newMaster(t), st, Config{}).Open(ctx, teamA, sealed, ad); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open in another keyring: %q, %v", got, err)
	}

	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	otherKeyID := append([]byte(nil), sealed...)
	if _, err := k.Seal(ctx, teamB, []byte("x"), ad); err != nil {
		t.Fatal(err)
	}
	bKey := st.current[teamB]
	copy(otherKeyID[1:17], bKey[:])
	for name, c := range map[string]struct {
		team   uuid.UUID
		sealed []byte
		ad     []byte
	}{
		"another row":              {teamA, sealed, AD("email", "html", other)},
		"another column":           {teamA, sealed, AD("email", "text", row)},
		"another part":             {teamA, sealed, AD("email", "html", row, 1)},
		"another team":             {teamB, sealed, ad},
		"another team's key id":    {teamB, otherKeyID, ad},
		"altered":                  {teamA, tampered, ad},
		"plaintext":                {teamA, plain, ad},
		"truncated":                {teamA, sealed[:20], ad},
		"empty":                    {teamA, nil, ad},
		"another team's key, mine": {teamA, otherKeyID, ad},
	} {
		if _, err := k.Open(ctx, c.team, c.sealed, c.ad); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: err %v, want ErrOpen", name, err)
		}
	}
}

func TestWrongMasterKeyCannotOpenDataKey(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	team := uuid.New()
	ad := AD("attachment", "content", uuid.New(), 0)
	sealed, err := New(newMaster(t), st, Config{}).Seal(ctx, team, []byte("x"), ad)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := seal.New(bytes.Repeat([]byte{8}, seal.KeySize))
	if _, err := New(other, st, Config{}).Open(ctx, team, sealed, ad); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("err %v, want the master key's ErrOpen", err)
	}
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	now := time.Now()
	k := New(newMaster(t), st, Config{CacheSize: 3, CurrentTTL: time.Minute, Now: func() time.Time { return now }})
	team := uuid.New()
	ad := AD("email", "text", uuid.New())
	var sealed []byte
	for range 100 {
		var err error
		if sealed, err = k.Seal(ctx, team, []byte("x"), ad); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Open(ctx, team, sealed, ad); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.lookupCount(); n != 1 {
		t.Fatalf("%d store lookups for one team's 100 seals and opens, want 1", n)
	}
	now = now.Add(2 * time.Minute)
	if _, err := k.Seal(ctx, team, []byte("x"), ad); err != nil {
		t.Fatal(err)
	}
	if n := st.lookupCount(); n != 2 {
		t.Fatalf("%d store lookups after the current-key TTL, want 2", n)
	}

	// Many teams: the cache stays bounded and evicted keys load again.
	for i := range 50 {
		if _, err := k.Seal(ctx, uuid.New(), []byte(fmt.Sprint(i)), ad); err != nil {
			t.Fatal(err)
		}
	}
	if n := k.Len(); n != 3 {
		t.Fatalf("%d keys cached, want the cache size 3", n)
	}
	before := st.lookupCount()
	if got, err := k.Open(ctx, team, sealed, ad); err != nil || string(got) != "x" {
		t.Fatalf("opening with an evicted key: %q, %v", got, err)
	}
	if st.lookupCount() != before+1 {
		t.Fatal("an evicted key must be loaded from the store again")
	}
}

func TestConcurrentFirstUseMakesOneKey(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	team := uuid.New()
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A keyring each, as separate processes would have.
			sealed, err := New(newMaster(t), st, Config{}).Seal(ctx, team, []byte("x"), nil)
			errs[i] = err
			ids[i], _ = KeyID(sealed)
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("values sealed with keys %v and %v: one team must have one current key", ids[0], ids[i])
		}
	}
}
