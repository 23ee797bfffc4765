package api

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestShareTokenExpires: a share token opens until its expiry and not
// from then on, only under its key, and names the team and email it was
// signed for.
func TestShareTokenExpires(t *testing.T) {
	t.Parallel()
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	team, email := uuid.New(), uuid.New()
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	tok := shareToken(key, team, email, exp)

	gotTeam, gotEmail, ok := openShareToken(key, tok, exp.Add(-time.Second))
	require.True(t, ok)
	require.Equal(t, team, gotTeam)
	require.Equal(t, email, gotEmail)
	_, _, ok = openShareToken(key, tok, exp)
	require.False(t, ok, "expired")
	_, _, ok = openShareToken(other, tok, exp.Add(-time.Second))
	require.False(t, ok, "another key")
	_, _, ok = openShareToken(nil, tok, exp.Add(-time.Second))
	require.False(t, ok, "no key")
	// A token re-signed for a later expiry by someone without the key
	// does not open: the expiry is signed.
	later := shareToken(other, team, email, exp.Add(time.Hour))
	_, _, ok = openShareToken(key, later, exp.Add(-time.Second))
	require.False(t, ok)
}
