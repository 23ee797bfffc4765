package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// TestReserveSystemMail: invitation emails are limited per team and every
// system email per address, over a sliding window, durably (issue 14,
// point 5).
func TestReserveSystemMail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	lim := store.SystemMailLimits{Window: time.Hour, PerTeam: 3, PerAddress: 2}
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	invite := func(team uuid.UUID, email string, at time.Time) error {
		return st.Emails.ReserveSystemMail(ctx, store.SystemMail{Kind: store.SystemMailInvitation, TeamID: team, Email: email}, lim, at)
	}
	reset := func(email string, at time.Time) error {
		return st.Emails.ReserveSystemMail(ctx, store.SystemMail{Kind: store.SystemMailPasswordReset, Email: email}, lim, at)
	}

	require.NoError(t, invite(teamA, "x@example.com", t0))
	require.NoError(t, reset("X@Example.com", t0.Add(time.Minute)))
	require.ErrorIs(t, invite(teamA, "x@example.com", t0.Add(2*time.Minute)), store.ErrAddressMailLimit)
	require.ErrorIs(t, invite(teamB, "x@example.com", t0.Add(2*time.Minute)), store.ErrAddressMailLimit, "whichever team invites")
	require.ErrorIs(t, reset("x@example.com", t0.Add(2*time.Minute)), store.ErrAddressMailLimit, "resets share the budget")

	require.NoError(t, invite(teamA, "y@example.com", t0.Add(3*time.Minute)))
	require.NoError(t, invite(teamA, "z@example.com", t0.Add(4*time.Minute)))
	require.ErrorIs(t, invite(teamA, "w@example.com", t0.Add(5*time.Minute)), store.ErrTeamMailLimit)
	require.NoError(t, invite(teamB, "w@example.com", t0.Add(5*time.Minute)), "another team has its own budget")
	require.NoError(t, reset("v@example.com", t0.Add(5*time.Minute)), "resets do not count against a team")

	// The window slides: an hour after the first emails they no longer count.
	require.ErrorIs(t, invite(teamA, "w@example.com", t0.Add(time.Hour-time.Second)), store.ErrTeamMailLimit)
	require.NoError(t, invite(teamA, "w@example.com", t0.Add(time.Hour)))
	require.NoError(t, reset("x@example.com", t0.Add(time.Hour)))
	require.ErrorIs(t, reset("x@example.com", t0.Add(time.Hour+30*time.Second)), store.ErrAddressMailLimit,
		"the reset at t0+1m still counts")
	require.NoError(t, reset("x@example.com", t0.Add(time.Hour+time.Minute)))

	// The record is swept a day later.
	n, err := st.Privacy.PurgeExpired(ctx, t0.Add(26*time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 9, n, "every recorded email")
}

// TestReserveSystemMailConcurrently: concurrent reservations (as from
// several API processes) never exceed a limit.
func TestReserveSystemMailConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	lim := store.SystemMailLimits{Window: time.Hour, PerTeam: 5, PerAddress: 100}
	now := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.Emails.ReserveSystemMail(ctx, store.SystemMail{Kind: store.SystemMailInvitation, TeamID: team,
				Email: uuid.NewString() + "@example.com"}, lim, now)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, store.ErrTeamMailLimit)
		}
	}
	require.Equal(t, 5, ok)
}
