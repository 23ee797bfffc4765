package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/storetest"
)

// TestHealthNoticeSentOnce: the monitor tells a team's owners once when
// its bounce rate crosses the threshold and pauses it, not at every
// evaluation; `admin health --resume` lifts the pause (issue 19, point 5).
func TestHealthNoticeSentOnce(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	creds, err := account.NewTeam(ctx, st, "Bouncy", "owner@member.test")
	require.NoError(t, err)
	team := uuid.MustParse(creds.TeamID)
	clean, err := account.NewTeam(ctx, st, "Clean", "clean@member.test")
	require.NoError(t, err)
	cleanTeam := uuid.MustParse(clean.TeamID)
	seed := func(team uuid.UUID, states map[string]int) {
		require.NoError(t, st.SetPlan(ctx, team, "50k"))
		for status, n := range states {
			e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
				FromDomain: "posthaste.test", Subject: "seed", LastEvent: status, CreatedAt: time.Now().Add(-time.Hour)}
			for j := range n {
				addr := fmt.Sprintf("r%d-%s@dest.test", j, status)
				e.To = append(e.To, addr)
				e.Recipients = append(e.Recipients, store.Recipient{Address: addr, Kind: "to", Domain: "dest.test", Status: status})
			}
			text := "hi"
			e.Text = &text
			_, err := st.Accept(ctx, store.Acceptance{Emails: []store.Email{e}})
			require.NoError(t, err)
		}
	}
	seed(team, map[string]int{"delivered": 45, "bounced": 5})
	seed(team, map[string]int{"delivered": 45, "bounced": 5})
	seed(cleanTeam, map[string]int{"delivered": 50})
	seed(cleanTeam, map[string]int{"delivered": 50})

	cfg, err := config.Load(func(k string) string {
		return map[string]string{"POSTHASTE_SYSTEM_FROM": "Posthaste <onboarding@posthaste.test>",
			"POSTHASTE_HEALTH_PAUSE": "true"}[k]
	})
	require.NoError(t, err)
	m, err := newHealthMonitor(cfg, st, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, m.check(ctx))
	require.NoError(t, m.check(ctx))

	notices := func(team uuid.UUID) []store.Email {
		list, _, err := st.ListEmails(ctx, team, store.Page{Limit: 100})
		require.NoError(t, err)
		var out []store.Email
		for _, e := range list {
			if e.Subject != "seed" {
				out = append(out, e)
			}
		}
		return out
	}
	got := notices(team)
	require.Len(t, got, 1, "one notice for one crossing, however many evaluations")
	require.Equal(t, "Sending paused: your bounce rate is above 4.00 %", got[0].Subject)
	require.Equal(t, []string{"owner@member.test"}, got[0].To)
	full, err := st.GetEmail(ctx, team, got[0].ID)
	require.NoError(t, err)
	require.NotNil(t, full.Text)
	require.Contains(t, *full.Text, "bounce rate over the last 30 days is 10.00 % (10 of 100 emails bounced)")
	require.Contains(t, *full.Text, "Sending is paused for your team")
	require.Empty(t, notices(cleanTeam))

	var out bytes.Buffer
	require.NoError(t, adminHealth(ctx, st, cfg.Health, team, false, &out))
	var shown map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &shown))
	require.Equal(t, true, shown["paused"])
	require.Equal(t, 0.1, shown["bounce_rate"])
	require.True(t, strings.HasPrefix(shown["paused_reason"].(string), "Sending is paused for this team"))

	out.Reset()
	require.NoError(t, adminHealth(ctx, st, cfg.Health, team, true, &out))
	require.NoError(t, json.Unmarshal(out.Bytes(), &shown))
	require.Equal(t, false, shown["paused"])
	require.Equal(t, true, shown["resumed"])
	p, err := st.SendingPause(ctx, team)
	require.NoError(t, err)
	require.Nil(t, p)

	require.NoError(t, m.check(ctx))
	require.Len(t, notices(team), 1, "still above the threshold after the resume: no new crossing")
	h, err := st.TeamHealth(ctx, team)
	require.NoError(t, err)
	require.Contains(t, h.State.Warned, health.Bounce)
}
