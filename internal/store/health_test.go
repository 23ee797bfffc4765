package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
)

// sendOutcomes stores emails of the team created at `at` whose recipients
// reached the given states, at most 25 recipients an email.
func sendOutcomes(t *testing.T, st *store.Store, team uuid.UUID, at time.Time, states map[string]int) {
	t.Helper()
	for status, left := range states {
		for left > 0 {
			n := min(25, left)
			rcpts := make([]string, n)
			for i := range rcpts {
				rcpts[i] = fmt.Sprintf("r%d-%s@posthaste.test", i, uuid.NewString()[:8])
			}
			e := newEmail(team, rcpts...)
			e.CreatedAt, e.LastEvent = at, status
			for i := range e.Recipients {
				e.Recipients[i].Status = status
			}
			_, err := st.Emails.Accept(context.Background(), store.Acceptance{Emails: []store.Email{e}})
			require.NoError(t, err)
			left -= n
		}
	}
}

// TestEvaluateHealth: the rates count the outcomes of recipients of email
// created within the window; a crossing warns once and, with pause,
// pauses the team until an operator resumes it (issue 19, point 5).
func TestEvaluateHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	bouncy, clean, old, complainer := newTeam(t, st), newTeam(t, st), newTeam(t, st), newTeam(t, st)
	for _, team := range []uuid.UUID{bouncy, clean, old, complainer} {
		require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	}
	sendOutcomes(t, st, bouncy, now.Add(-time.Hour), map[string]int{"delivered": 95, "bounced": 5, "queued": 20, "failed": 5})
	sendOutcomes(t, st, clean, now.Add(-time.Hour), map[string]int{"delivered": 99, "bounced": 1})
	sendOutcomes(t, st, old, now.Add(-31*24*time.Hour), map[string]int{"bounced": 100})
	sendOutcomes(t, st, complainer, now.Add(-time.Hour), map[string]int{"delivered": 1248, "complained": 2})

	c, err := st.Insights.HealthCounts(ctx, bouncy, now, health.DefaultWindow)
	require.NoError(t, err)
	require.Equal(t, health.Counts{Delivered: 95, Bounced: 5}, c, "queued and failed recipients are not counted")

	notices, err := st.Insights.EvaluateHealth(ctx, now, health.DefaultWindow, false)
	require.NoError(t, err)
	pending, err := st.Insights.PendingHealthNotices(ctx, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, notices, pending, "each crossing is stored as a pending notice")
	for i, n := range notices {
		require.NotEqual(t, uuid.Nil, n.ID)
		require.Equal(t, now, n.CreatedAt)
		notices[i].ID, notices[i].CreatedAt = uuid.Nil, time.Time{}
	}
	require.ElementsMatch(t, []store.HealthNotice{
		{TeamID: bouncy, Window: health.DefaultWindow, Counts: health.Counts{Delivered: 95, Bounced: 5},
			Crossing: health.Crossing{Metric: health.Bounce, Rate: 0.05, Threshold: 0.04}},
		{TeamID: complainer, Window: health.DefaultWindow, Counts: health.Counts{Delivered: 1250, Complained: 2},
			Crossing: health.Crossing{Metric: health.Complaint, Rate: 2.0 / 1250, Threshold: 0.0008}},
	}, notices, "the old team's bounces are outside the window")
	p, err := st.Insights.SendingPause(ctx, bouncy)
	require.NoError(t, err)
	require.Nil(t, p, "without POSTHASTE_HEALTH_PAUSE, crossings only warn")

	// Turning pause on later does not pause a team already warned: its
	// crossing was before.
	notices, err = st.Insights.EvaluateHealth(ctx, now.Add(time.Minute), health.DefaultWindow, true)
	require.NoError(t, err)
	require.Empty(t, notices, "each crossing is noticed once")
	p, err = st.Insights.SendingPause(ctx, bouncy)
	require.NoError(t, err)
	require.Nil(t, p)

	// The rate goes back under (more clean mail), then crosses again: now
	// the team is paused.
	sendOutcomes(t, st, bouncy, now.Add(-time.Minute), map[string]int{"delivered": 100})
	notices, err = st.Insights.EvaluateHealth(ctx, now.Add(2*time.Minute), health.DefaultWindow, true)
	require.NoError(t, err)
	require.Empty(t, notices)
	h, err := st.Insights.TeamHealth(ctx, bouncy)
	require.NoError(t, err)
	require.Empty(t, h.State.Warned)
	sendOutcomes(t, st, bouncy, now.Add(-time.Minute), map[string]int{"bounced": 20})
	t3 := now.Add(3 * time.Minute)
	notices, err = st.Insights.EvaluateHealth(ctx, t3, health.DefaultWindow, true)
	require.NoError(t, err)
	require.Len(t, notices, 1)
	require.Equal(t, bouncy, notices[0].TeamID)
	require.True(t, notices[0].Crossing.Paused)
	pending, err = st.Insights.PendingHealthNotices(ctx, 100)
	require.NoError(t, err)
	require.Len(t, pending, 3, "nothing marked the first two sent")
	require.Equal(t, notices[0], pending[2], "oldest first")
	p, err = st.Insights.SendingPause(ctx, bouncy)
	require.NoError(t, err)
	require.Equal(t, &health.Pause{Metric: health.Bounce, Rate: 25.0 / 220, Threshold: 0.04, Window: health.DefaultWindow,
		At: t3}, p)
	for _, team := range []uuid.UUID{clean, old, complainer} {
		p, err = st.Insights.SendingPause(ctx, team)
		require.NoError(t, err)
		require.Nil(t, p)
	}

	// Still paused at the next evaluation; an operator lifts it, and it
	// stays lifted while the rate stays above the threshold.
	notices, err = st.Insights.EvaluateHealth(ctx, now.Add(4*time.Minute), health.DefaultWindow, true)
	require.NoError(t, err)
	require.Empty(t, notices)
	p, err = st.Insights.SendingPause(ctx, bouncy)
	require.NoError(t, err)
	require.NotNil(t, p)
	resumed, err := st.Insights.ResumeSending(ctx, bouncy, now.Add(5*time.Minute))
	require.NoError(t, err)
	require.True(t, resumed)
	resumed, err = st.Insights.ResumeSending(ctx, bouncy, now.Add(5*time.Minute))
	require.NoError(t, err)
	require.False(t, resumed, "not paused any more")
	_, err = st.Insights.EvaluateHealth(ctx, now.Add(6*time.Minute), health.DefaultWindow, true)
	require.NoError(t, err)
	p, err = st.Insights.SendingPause(ctx, bouncy)
	require.NoError(t, err)
	require.Nil(t, p)
	h, err = st.Insights.TeamHealth(ctx, bouncy)
	require.NoError(t, err)
	require.Equal(t, health.Counts{Delivered: 195, Bounced: 25}, h.Counts)
	require.Contains(t, h.State.Warned, health.Bounce)
	require.NotNil(t, h.ResumedAt)

	_, err = st.Insights.TeamHealth(ctx, uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestHealthNoticePending: notices stay pending, across evaluations,
// until marked sent; marking again, or an unknown notice, is harmless;
// retention drops them 30 days after their crossing, sent or not.
func TestHealthNoticePending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	a, b := newTeam(t, st), newTeam(t, st)
	for _, team := range []uuid.UUID{a, b} {
		require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
		sendOutcomes(t, st, team, now.Add(-time.Hour), map[string]int{"delivered": 90, "bounced": 10})
	}
	notices, err := st.Insights.EvaluateHealth(ctx, now, health.DefaultWindow, true)
	require.NoError(t, err)
	require.Len(t, notices, 2)
	_, err = st.Insights.EvaluateHealth(ctx, now.Add(time.Minute), health.DefaultWindow, true)
	require.NoError(t, err)

	pending, err := st.Insights.PendingHealthNotices(ctx, 1)
	require.NoError(t, err)
	require.Len(t, pending, 1, "limit")
	pending, err = st.Insights.PendingHealthNotices(ctx, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, notices, pending, "a later evaluation adds no notice and leaves the pending ones")
	for _, n := range pending {
		require.True(t, n.Crossing.Paused)
		require.Equal(t, health.Counts{Delivered: 90, Bounced: 10}, n.Counts)
		require.Equal(t, health.DefaultWindow, n.Window)
	}

	emailID := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Insights.MarkHealthNoticeSent(ctx, pending[0].ID, &emailID))
	require.NoError(t, st.Insights.MarkHealthNoticeSent(ctx, pending[0].ID, nil), "marking twice is harmless")
	require.NoError(t, st.Insights.MarkHealthNoticeSent(ctx, uuid.New(), nil), "an unknown notice is not an error")
	left, err := st.Insights.PendingHealthNotices(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []store.HealthNotice{pending[1]}, left)

	// Retention: kept 30 days after the crossing, then dropped sent or
	// not (the other one is still pending).
	_, err = st.Privacy.PurgeExpired(ctx, now.Add(29*24*time.Hour), 100)
	require.NoError(t, err)
	left, err = st.Insights.PendingHealthNotices(ctx, 10)
	require.NoError(t, err)
	require.Len(t, left, 1)
	_, err = st.Privacy.PurgeExpired(ctx, now.Add(31*24*time.Hour), 100)
	require.NoError(t, err)
	left, err = st.Insights.PendingHealthNotices(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, left)
}
