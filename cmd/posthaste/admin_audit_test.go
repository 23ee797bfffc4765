package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestAdminActionsAreAuditedAndVerified runs admin commands against a real
// PostgreSQL, checks their audit entries, and that `admin audit verify`
// exits 1 once an entry was changed behind its back.
func TestAdminActionsAreAuditedAndVerified(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": url, "POSTHASTE_LOG_FORMAT": "text"}
	admin := func(args ...string) (int, map[string]any) {
		t.Helper()
		var out, errs bytes.Buffer
		code := run(ctx, args, func(k string) string { return env[k] }, &out, &errs)
		var v map[string]any
		_ = json.Unmarshal(out.Bytes(), &v)
		return code, v
	}
	code, _ := admin("migrate")
	require.Equal(t, 0, code)
	code, team := admin("admin", "create-team", "--name", "A", "--email", "owner@example.com")
	require.Equal(t, 0, code)
	teamID := team["team_id"].(string)
	code, key := admin("admin", "create-key", "--team", teamID, "--name", "ci")
	require.Equal(t, 0, code)
	code, _ = admin("admin", "revoke-key", "--team", teamID, "--id", key["id"].(string))
	require.Equal(t, 0, code)
	code, _ = admin("admin", "set-rate-limit", "--team", teamID, "--rate", "5")
	require.Equal(t, 0, code)
	code, _ = admin("admin", "set-plan", "--team", teamID, "--plan", "50k")
	require.Equal(t, 0, code)

	st, err := store.Open(ctx, store.Config{URL: url})
	require.NoError(t, err)
	defer st.Close()
	rows, _, err := st.Privacy.ListAudit(ctx, uuid.MustParse(teamID), audit.Filter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	var got []string
	for _, e := range rows {
		require.Equal(t, "admin", string(e.ActorType))
		require.Nil(t, e.ActorID)
		got = append(got, string(e.Action)+" "+e.TargetID)
	}
	require.Equal(t, []string{"team.set_plan " + teamID, "team.set_rate_limit " + teamID,
		"api_key.revoke " + key["id"].(string), "api_key.create " + key["id"].(string),
		"team.create " + teamID}, got)

	code, verified := admin("admin", "audit", "verify")
	require.Equal(t, 0, code)
	require.Equal(t, true, verified["verified"])
	require.EqualValues(t, 5, verified["entries"])

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	// The operator's keys, like the team's Default key, are the owner's.
	owner, err := st.Accounts.UserByEmail(ctx, "owner@example.com")
	require.NoError(t, err)
	var keys, owners int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE created_by = $2) FROM api_key
		WHERE team_id = $1`, teamID, owner.ID).Scan(&keys, &owners))
	require.Equal(t, 2, keys)
	require.Equal(t, 2, owners)
	_, err = conn.Exec(ctx, `UPDATE audit_entry SET detail = '{"plan":"free"}' WHERE action = 'team.set_plan'`)
	require.NoError(t, err)
	code, _ = admin("admin", "audit", "verify")
	require.Equal(t, 1, code)
	code, _ = admin("admin", "audit", "check")
	require.Equal(t, 2, code)
}
