package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/health/notices"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// healthFixture is a store with a team whose bounce rate (10 %) is above
// the threshold, owned by owner@member.test, and a clean team.
type healthFixture struct {
	st          *store.Store
	team, clean uuid.UUID
}

func newHealthFixture(t *testing.T) healthFixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	creds, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "Bouncy", "owner@member.test")
	require.NoError(t, err)
	team := uuid.MustParse(creds.TeamID)
	clean, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "Clean", "clean@member.test")
	require.NoError(t, err)
	cleanTeam := uuid.MustParse(clean.TeamID)
	storetest.SeedOutcomes(t, st, team, map[string]int{"delivered": 90, "bounced": 10})
	storetest.SeedOutcomes(t, st, cleanTeam, map[string]int{"delivered": 100})
	return healthFixture{st: st, team: team, clean: cleanTeam}
}

// healthMonitor is the account health activity of one process with the
// input its Schedule passes.
type healthMonitor struct {
	h  *notices.Activities
	in contract.CheckAccountHealthInput
}

// check runs one evaluation, as one run of the AccountHealth workflow.
func (m *healthMonitor) check(ctx context.Context) error {
	_, err := m.h.CheckAccountHealth(ctx, m.in)
	return err
}

// monitor returns a health monitor (with pause) sending from `from`.
func (f healthFixture) monitor(t *testing.T, from string) (*healthMonitor, config.Config) {
	t.Helper()
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"POSTHASTE_SYSTEM_FROM": from, "POSTHASTE_HEALTH_PAUSE": "true"}[k]
	})
	require.NoError(t, err)
	h, err := newHealth(cfg, f.st, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	in := healthInput(cfg.Health)
	return &healthMonitor{h: h, in: contract.CheckAccountHealthInput{Window: in.Window, Pause: in.Pause}}, cfg
}

// notices returns the emails of the team other than the seeded ones.
func (f healthFixture) notices(t *testing.T, team uuid.UUID) []store.Email {
	t.Helper()
	list, _, err := f.st.Emails.ListEmails(context.Background(), team, store.Page{Limit: 100})
	require.NoError(t, err)
	var out []store.Email
	for _, e := range list {
		if e.Subject != "seed" {
			out = append(out, e)
		}
	}
	return out
}

func (f healthFixture) pending(t *testing.T) []store.HealthNotice {
	t.Helper()
	p, err := f.st.Insights.PendingHealthNotices(context.Background(), 100)
	require.NoError(t, err)
	return p
}

// TestHealthNoticeSentOnce: the monitor tells a team's owners once when
// its bounce rate crosses the threshold and pauses it, not at every
// evaluation, even when the first send fails, the process dies between
// the send and marking the notice sent, or two processes send at once;
// `admin health --resume` lifts the pause (issue 19, point 5).
func TestHealthNoticeSentOnce(t *testing.T) {
	const sandboxFrom = "Posthaste <onboarding@posthaste.test>"
	ctx := context.Background()

	t.Run("first send fails", func(t *testing.T) {
		f := newHealthFixture(t)
		team := f.team
		// A process evaluates, but its mailer fails (its sender's domain is
		// not verified): the crossing is stored, paused, with its notice.
		failing, _ := f.monitor(t, "Posthaste <alerts@unverified.test>")
		require.NoError(t, failing.check(ctx), "a failed send is logged, not returned")
		require.Empty(t, f.notices(t, team))
		require.Len(t, f.pending(t), 1)
		p, err := f.st.Insights.SendingPause(ctx, team)
		require.NoError(t, err)
		require.NotNil(t, p)

		// Another process (or the next interval) sends it, once.
		m, cfg := f.monitor(t, sandboxFrom)
		require.NoError(t, m.check(ctx))
		require.NoError(t, m.check(ctx))
		require.NoError(t, failing.check(ctx))
		got := f.notices(t, team)
		require.Len(t, got, 1, "one notice for one crossing, however many evaluations")
		require.Empty(t, f.pending(t))
		require.Equal(t, "Sending paused: your bounce rate is above 4.00 %", got[0].Subject)
		require.Equal(t, []string{"owner@member.test"}, got[0].To)
		full, err := f.st.Emails.GetEmail(ctx, team, got[0].ID)
		require.NoError(t, err)
		require.NotNil(t, full.Text)
		require.Contains(t, *full.Text, "bounce rate over the last 30 days is 10.00 % (10 of 100 emails bounced)")
		require.Contains(t, *full.Text, "Sending is paused for your team")
		require.Empty(t, f.notices(t, f.clean))

		var out bytes.Buffer
		require.NoError(t, adminHealth(ctx, f.st, cfg.Health, team, false, &out))
		var shown map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &shown))
		require.Equal(t, true, shown["paused"])
		require.Equal(t, 0.1, shown["bounce_rate"])
		require.True(t, strings.HasPrefix(shown["paused_reason"].(string), "Sending is paused for this team"))

		out.Reset()
		require.NoError(t, adminHealth(ctx, f.st, cfg.Health, team, true, &out))
		require.NoError(t, json.Unmarshal(out.Bytes(), &shown))
		require.Equal(t, false, shown["paused"])
		require.Equal(t, true, shown["resumed"])
		p, err = f.st.Insights.SendingPause(ctx, team)
		require.NoError(t, err)
		require.Nil(t, p)

		require.NoError(t, m.check(ctx))
		require.Len(t, f.notices(t, team), 1, "still above the threshold after the resume: no new crossing")
		h, err := f.st.Insights.TeamHealth(ctx, team)
		require.NoError(t, err)
		require.Contains(t, h.State.Warned, health.Bounce)
	})

	t.Run("sent but not marked", func(t *testing.T) {
		f := newHealthFixture(t)
		m, cfg := f.monitor(t, sandboxFrom)
		// The process evaluates and sends, then dies before marking the
		// notice sent.
		_, err := f.st.Insights.EvaluateHealth(ctx, time.Now(), cfg.Health.Window, cfg.Health.Pause)
		require.NoError(t, err)
		pending := f.pending(t)
		require.Len(t, pending, 1)
		id, err := m.h.Mail.HealthNotice(ctx, pending[0])
		require.NoError(t, err)
		require.NotNil(t, id)
		require.Len(t, f.notices(t, f.team), 1)

		// The next check sends it again with the same key: the first email
		// is replayed, not accepted a second time, and the notice is marked.
		require.NoError(t, m.check(ctx))
		got := f.notices(t, f.team)
		require.Len(t, got, 1)
		require.Equal(t, *id, got[0].ID)
		require.Empty(t, f.pending(t))
		require.NoError(t, m.check(ctx))
		require.Len(t, f.notices(t, f.team), 1)
	})

	t.Run("two processes at once", func(t *testing.T) {
		f := newHealthFixture(t)
		m1, _ := f.monitor(t, sandboxFrom)
		m2, _ := f.monitor(t, sandboxFrom)
		errs := make(chan error, 2)
		for _, m := range []*healthMonitor{m1, m2} {
			go func() { errs <- m.check(ctx) }()
		}
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		require.Len(t, f.notices(t, f.team), 1)
		require.Empty(t, f.pending(t), "one of them marked it sent")
	})
}
