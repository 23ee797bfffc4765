package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

type fakeKeys struct {
	mu      sync.Mutex
	keys    map[string]store.APIKey
	lookups int
}

func (f *fakeKeys) UseAPIKey(_ context.Context, hash []byte) (store.APIKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	k, ok := f.keys[string(hash)]
	if !ok {
		return store.APIKey{}, store.ErrNotFound
	}
	return k, nil
}

func TestNewTokenShape(t *testing.T) {
	tok, prefix, hash, err := NewToken()
	require.NoError(t, err)
	require.Regexp(t, `^ph_[A-Za-z0-9_-]{40}$`, tok)
	require.Equal(t, tok[:9], prefix)
	require.Equal(t, Hash(tok), hash)
	tok2, _, _, err := NewToken()
	require.NoError(t, err)
	require.NotEqual(t, tok, tok2)
}

func TestAuthenticateCachesAndForgets(t *testing.T) {
	tok, _, hash, err := NewToken()
	require.NoError(t, err)
	team := uuid.New()
	keys := &fakeKeys{keys: map[string]store.APIKey{string(hash): {ID: uuid.New(), TeamID: team, Permission: store.PermissionFullAccess}}}
	a := NewAuthenticator(keys, time.Second)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }

	p, err := a.Authenticate(context.Background(), tok)
	require.NoError(t, err)
	require.Equal(t, team, p.TeamID)
	require.True(t, p.FullAccess())
	_, err = a.Authenticate(context.Background(), tok)
	require.NoError(t, err)
	require.Equal(t, 1, keys.lookups, "second call within the TTL is served from the cache")

	// Revoked elsewhere: the cache hides it until the TTL passes.
	keys.mu.Lock()
	delete(keys.keys, string(hash))
	keys.mu.Unlock()
	now = now.Add(1100 * time.Millisecond)
	_, err = a.Authenticate(context.Background(), tok)
	require.ErrorIs(t, err, ErrInvalidKey)

	// Revoked here: Forget drops it at once.
	keys.keys[string(hash)] = store.APIKey{TeamID: team}
	_, err = a.Authenticate(context.Background(), tok)
	require.NoError(t, err)
	delete(keys.keys, string(hash))
	a.Forget(hash)
	_, err = a.Authenticate(context.Background(), tok)
	require.ErrorIs(t, err, ErrInvalidKey)
}

func TestAuthenticateRejectsMalformedWithoutLookup(t *testing.T) {
	keys := &fakeKeys{keys: map[string]store.APIKey{}}
	a := NewAuthenticator(keys, time.Second)
	for _, tok := range []string{"", "ph_short", "re_0123456789012345678901234567890123456789", string(make([]byte, 300))} {
		_, err := a.Authenticate(context.Background(), tok)
		require.ErrorIs(t, err, ErrInvalidKey)
	}
	require.Zero(t, keys.lookups)
}

func TestCachedNeverLooksUp(t *testing.T) {
	tok, _, hash, err := NewToken()
	require.NoError(t, err)
	keys := &fakeKeys{keys: map[string]store.APIKey{string(hash): {ID: uuid.New(), TeamID: uuid.New()}}}
	a := NewAuthenticator(keys, time.Second)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	_, ok := a.Cached(tok)
	require.False(t, ok)
	require.Zero(t, keys.lookups)
	p, err := a.Authenticate(context.Background(), tok)
	require.NoError(t, err)
	got, ok := a.Cached(tok)
	require.True(t, ok)
	require.Equal(t, p, got)
	now = now.Add(time.Second)
	_, ok = a.Cached(tok)
	require.False(t, ok, "an expired entry is not served")
	require.Equal(t, 1, keys.lookups)
	require.True(t, WellFormed(tok))
	require.False(t, WellFormed("ph_short"))
}
