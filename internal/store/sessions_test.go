package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestUseSessionThrottlesLastUse checks that a request refreshes a
// session's last use only once it is a minute old, so a busy session costs
// at most one write a minute.
func TestUseSessionThrottlesLastUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	u := newUser(t, st, "u@example.com")
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	hash := hashOf("s")
	require.NoError(t, st.Sessions.CreateSession(ctx, store.Session{IDHash: hash, UserID: u, TeamID: team, CSRFToken: "c",
		ExpiresAt: start.Add(24 * time.Hour), ClientAddr: "203.0.113.7", UserAgent: "Firefox", LastUsedAt: start}))

	se, err := st.Sessions.UseSession(ctx, hash, start.Add(30*time.Second), time.Hour)
	require.NoError(t, err)
	require.True(t, se.LastUsedAt.Equal(start), "not refreshed within a minute: %v", se.LastUsedAt)
	require.Equal(t, "203.0.113.7", se.ClientAddr)
	require.Equal(t, "Firefox", se.UserAgent)
	require.Equal(t, "u@example.com", se.UserEmail)

	later := start.Add(90 * time.Second)
	se, err = st.Sessions.UseSession(ctx, hash, later, time.Hour)
	require.NoError(t, err)
	require.True(t, se.LastUsedAt.Equal(later), "refreshed after a minute: %v", se.LastUsedAt)
	list, err := st.Sessions.UserSessions(ctx, u, later, time.Hour)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.True(t, list[0].LastUsedAt.Equal(later), "the refresh was stored")

	se, err = st.Sessions.UseSession(ctx, hash, later.Add(59*time.Second), time.Hour)
	require.NoError(t, err)
	require.True(t, se.LastUsedAt.Equal(later))
}

// TestUseSessionIdleTimeout checks that a session unused for the idle
// timeout ends before its absolute lifetime, that use keeps it alive, and
// that the absolute lifetime still applies.
func TestUseSessionIdleTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	u := newUser(t, st, "u@example.com")
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	idle := 2 * time.Hour
	for _, name := range []string{"used", "idle"} {
		require.NoError(t, st.Sessions.CreateSession(ctx, store.Session{IDHash: hashOf(name), UserID: u, TeamID: team, CSRFToken: "c",
			ExpiresAt: start.Add(5 * time.Hour), LastUsedAt: start}))
	}
	for i := 1; i <= 4; i++ { // every hour: the used one stays alive past the idle timeout
		_, err := st.Sessions.UseSession(ctx, hashOf("used"), start.Add(time.Duration(i)*time.Hour), idle)
		require.NoError(t, err, "hour %d", i)
	}
	_, err := st.Sessions.UseSession(ctx, hashOf("idle"), start.Add(idle), idle)
	require.ErrorIs(t, err, store.ErrNotFound, "unused for the idle timeout")
	_, err = st.Sessions.UseSession(ctx, hashOf("idle"), start.Add(idle), idle+1500*time.Millisecond)
	require.NoError(t, err, "a fractional timeout")
	_, err = st.Sessions.UseSession(ctx, hashOf("idle"), start.Add(idle), 0)
	require.NoError(t, err, "no idle timeout configured")
	list, err := st.Sessions.UserSessions(ctx, u, start.Add(4*time.Hour), idle)
	require.NoError(t, err)
	require.Len(t, list, 1, "the idle session is not listed")
	require.Equal(t, hashOf("used"), list[0].IDHash)
	_, err = st.Sessions.UseSession(ctx, hashOf("used"), start.Add(5*time.Hour), idle)
	require.ErrorIs(t, err, store.ErrNotFound, "the absolute lifetime still ends it")
}

// TestRevokeUserSession checks that a user revokes only their own sessions.
func TestRevokeUserSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	ann, bob := newUser(t, st, "ann@example.com"), newUser(t, st, "bob@example.com")
	now := time.Now()
	for _, s := range []store.Session{
		{IDHash: hashOf("ann 1"), UserID: ann}, {IDHash: hashOf("ann 2"), UserID: ann},
		{IDHash: hashOf("ann 3"), UserID: ann}, {IDHash: hashOf("bob"), UserID: bob},
	} {
		s.TeamID, s.CSRFToken, s.ExpiresAt = team, "c", now.Add(time.Hour)
		require.NoError(t, st.Sessions.CreateSession(ctx, s))
	}
	require.ErrorIs(t, st.Sessions.RevokeUserSession(ctx, ann, hashOf("bob"), audit.Entry{}), store.ErrNotFound, "not ann's")
	_, err := storetest.SessionByHash(ctx, st, hashOf("bob"))
	require.NoError(t, err)
	require.NoError(t, st.Sessions.RevokeUserSession(ctx, ann, hashOf("ann 1"), audit.Entry{}))
	_, err = storetest.SessionByHash(ctx, st, hashOf("ann 1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	n, err := st.Sessions.RevokeOtherSessions(ctx, ann, hashOf("ann 2"), nil)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	list, err := st.Sessions.UserSessions(ctx, ann, now, 0)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, hashOf("ann 2"), list[0].IDHash)
	_, err = storetest.SessionByHash(ctx, st, hashOf("bob"))
	require.NoError(t, err, "bob stays signed in")
}
