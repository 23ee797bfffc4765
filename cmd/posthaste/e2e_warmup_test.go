package main

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestIPWarmup runs `posthaste dev` with a default pool of two loopback
// addresses and a warm-up of two messages a day: of five emails sent at
// once, the MX gets two from each address and the fifth waits, deferred
// with the warm-up's reply; `posthaste admin warmup --done` on one
// address (another process, on the same database) lets the retry leave
// from it.
func TestIPWarmup(t *testing.T) {
	requireLoopback(t, "127.0.0.21", "127.0.0.22")
	dns, mx := memberMX(t)
	dbURL := pgtest.NewDatabase(t)
	env := devEnv(t, dbURL, dns, mx)
	env["POSTHASTE_IP_POOLS"] = "shared=127.0.0.21@mta21.test,127.0.0.22@mta22.test"
	env["POSTHASTE_WARMUP_SCHEDULE"] = "2"
	env["POSTHASTE_DELIVERY_RETRY_INITIAL"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_MAX"] = "1s"
	dev := startDev(t, env)
	defer dev.stop(t)
	owner := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	c := apiClient{t: t, base: dev.base, key: owner.APIKey}

	ids := make([]string, 5)
	for i := range ids {
		ids[i] = c.send(map[string]any{"from": "onboarding@posthaste.test", "to": "owner@member.test",
			"subject": fmt.Sprintf("Warm-up %d", i), "text": "hi"})
	}
	byID := waitEvents(t, c, ids, "delivered", "delivered", "delivered", "delivered", "delivery_delayed")
	var late string
	for id, ev := range byID {
		if ev == "delivery_delayed" {
			late = id
		}
	}
	require.NotEmpty(t, late)
	sources := func() map[string]int {
		out := map[string]int{}
		for _, m := range mx.Messages() {
			host, _, err := net.SplitHostPort(m.RemoteAddr)
			require.NoError(t, err)
			out[host+" "+m.Helo]++
		}
		return out
	}
	require.Equal(t, map[string]int{"127.0.0.21 mta21.test": 2, "127.0.0.22 mta22.test": 2}, sources(),
		"two a day from each address")

	admin := map[string]string{"DATABASE_URL": dbURL}
	out, code := runProcess(t, admin, "admin warmup --ip 127.0.0.99 --done")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "no IP pool has the address 127.0.0.99")
	out, code = runProcess(t, admin, "admin warmup --ip 127.0.0.21")
	require.Equal(t, 2, code, out)
	out, code = runProcess(t, admin, "admin warmup --ip 127.0.0.21 --done")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"warmup": "done"`)

	waitEvents(t, c, ids, "delivered", "delivered", "delivered", "delivered", "delivered")
	require.Equal(t, map[string]int{"127.0.0.21 mta21.test": 3, "127.0.0.22 mta22.test": 2}, sources())
}

// TestIPWarmupSpill runs `posthaste dev` with POSTHASTE_WARMUP_OVERFLOW=spill
// and a warm-up of two a day: a team of the pool bulk sends three emails,
// two leave from bulk's address and the third from the default pool's;
// of two more, one takes the default pool's last message of the day and
// the other waits.
func TestIPWarmupSpill(t *testing.T) {
	requireLoopback(t, "127.0.0.24", "127.0.0.25")
	dns, mx := memberMX(t)
	dbURL := pgtest.NewDatabase(t)
	env := devEnv(t, dbURL, dns, mx)
	env["POSTHASTE_IP_POOLS"] = "shared=127.0.0.24@mta24.test;bulk=127.0.0.25@mta25.test"
	env["POSTHASTE_WARMUP_SCHEDULE"] = "2"
	env["POSTHASTE_WARMUP_OVERFLOW"] = "spill"
	dev := startDev(t, env)
	defer dev.stop(t)

	admin := map[string]string{"DATABASE_URL": dbURL}
	out, code := runProcess(t, admin, "admin create-team --name Bulk --email bulk@member.test")
	require.Equal(t, 0, code, out)
	var team struct {
		APIKey string `json:"api_key"`
		TeamID string `json:"team_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &team))
	out, code = runProcess(t, admin, "admin assign-pool --team "+team.TeamID+" --pool bulk")
	require.Equal(t, 0, code, out)
	c := apiClient{t: t, base: dev.base, key: team.APIKey}

	send := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = c.send(map[string]any{"from": "onboarding@posthaste.test", "to": "bulk@member.test",
				"subject": fmt.Sprintf("Bulk %d", i), "text": "hi"})
		}
		return ids
	}
	sources := func() map[string]int {
		out := map[string]int{}
		for _, m := range mx.Messages() {
			host, _, err := net.SplitHostPort(m.RemoteAddr)
			require.NoError(t, err)
			out[host+" "+m.Helo]++
		}
		return out
	}
	waitEvents(t, c, send(3), "delivered", "delivered", "delivered")
	require.Equal(t, map[string]int{"127.0.0.25 mta25.test": 2, "127.0.0.24 mta24.test": 1}, sources(),
		"the third spilled to the default pool")
	waitEvents(t, c, send(2), "delivered", "delivery_delayed")
	require.Equal(t, map[string]int{"127.0.0.25 mta25.test": 2, "127.0.0.24 mta24.test": 2}, sources())
}

// waitEvents polls the emails until their last events, sorted, are want,
// and returns each email's.
func waitEvents(t *testing.T, c apiClient, ids []string, want ...string) map[string]string {
	t.Helper()
	var got []string
	byID := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		got = got[:0]
		for _, id := range ids {
			status, e := c.do("GET", "/emails/"+id, nil)
			require.Equal(t, 200, status, e)
			got = append(got, e["last_event"].(string))
			byID[id] = e["last_event"].(string)
		}
		sort.Strings(got)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return byID
		}
		time.Sleep(pollPause(i))
	}
	t.Fatalf("last events %v, want %v", got, want)
	return nil
}
