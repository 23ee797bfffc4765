package main

import (
	"context"
	"github.com/google/uuid"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestBatchBench runs BatchBench briefly against the real API on
// PostgreSQL (acceptance needs no Temporal) and checks that batches
// accept more emails per second than single sends.
func TestBatchBench(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: storetest.NewDatabase(t), MaxConns: 16})
	require.NoError(t, err)
	defer st.Close()
	h, err := api.New(api.Config{Auth: auth.NewAuthenticator(st.Accounts, time.Second),
		Submit: submit.New(submit.Config{Store: submit.StoreOf(st)}), Emails: submit.NewEmails(st.Emails),
		Usage: usage.New(st.Insights, st.Accounts)})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	team, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "Bench", "bench@example.com")
	require.NoError(t, err)
	require.NoError(t, st.Accounts.SetPlan(ctx, uuid.MustParse(team.TeamID), "2.5m"), "the bench sends more than the free plan")
	res, err := BatchBench(ctx, BatchBenchConfig{BaseURL: srv.URL, APIKey: team.APIKey, Concurrency: 4, Duration: time.Second})
	require.NoError(t, err)
	var out strings.Builder
	res.Print(&out)
	t.Log("\n" + out.String())
	require.Greater(t, res.Ratio(), 1.0)
}
