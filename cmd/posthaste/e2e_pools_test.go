package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIPPools runs `posthaste dev` with two IP pools on loopback
// addresses standing in for public ones: a team assigned the pool acme by
// `posthaste admin assign-pool` (a process of its own against the dev
// instance, finding its private PostgreSQL without DATABASE_URL) sends, and
// the recipient MX sees acme's address and EHLO name; another team's mail
// leaves from the shared pool.
func TestIPPools(t *testing.T) {
	requireLoopback(t, "127.0.0.8", "127.0.0.9")
	dns, mx := memberMX(t)
	env := devEnv(t, "", dns, mx)
	delete(env, "DATABASE_URL") // a private cluster, which admin finds
	dataDir := env["POSTHASTE_DATA_DIR"]
	env["POSTHASTE_IP_POOLS"] = "shared=127.0.0.8@mta8.test;acme=127.0.0.9@mta9.test"
	t.Cleanup(func() { removeRelocatedCluster(t, dataDir) })
	dev := startDev(t, env)
	defer dev.stop(t)
	owner := readCredentials(t, dataDir)

	admin := map[string]string{"POSTHASTE_DATA_DIR": dataDir} // no DATABASE_URL
	out, code := runProcess(t, admin, "admin create-team --name Acme --email acme@member.test")
	require.Equal(t, 0, code, out)
	var acme struct {
		APIKey string `json:"api_key"`
		TeamID string `json:"team_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &acme))

	out, code = runProcess(t, admin, "admin list-teams")
	require.Equal(t, 0, code, out)
	var teams []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "["):]), &teams))
	pools := map[string]any{}
	for _, tm := range teams {
		pools[tm["id"].(string)] = tm["ip_pool"]
	}
	require.Equal(t, "shared", pools[acme.TeamID], "a new team sends from the default pool")

	out, code = runProcess(t, admin, "admin create-pool --name bulk --address 127.0.0.10@mta10")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "fully qualified host name")
	out, code = runProcess(t, admin, "admin create-pool --name bulk --address 127.0.0.10@mta10.test")
	require.Equal(t, 0, code, out)
	out, code = runProcess(t, admin, "admin list-pools")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"ehlo_name": "mta9.test"`, "the pools of POSTHASTE_IP_POOLS were synced")
	require.Contains(t, out, `"ehlo_name": "mta10.test"`)

	out, code = runProcess(t, admin, "admin assign-pool --team "+acme.TeamID+" --pool nope")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `unknown IP pool "nope" (known: shared, acme, bulk`)
	out, code = runProcess(t, admin, "admin assign-pool --team "+acme.TeamID+" --pool acme")
	require.Equal(t, 0, code, out)

	fromAcme := apiClient{t: t, base: dev.base, key: acme.APIKey}
	id := fromAcme.send(map[string]any{"from": "onboarding@posthaste.test", "to": "acme@member.test",
		"subject": "From acme's pool", "text": "hi"})
	fromAcme.waitFor(id, map[string]string{"acme@member.test": "delivered"})
	fromOwner := apiClient{t: t, base: dev.base, key: owner.APIKey}
	id = fromOwner.send(map[string]any{"from": "onboarding@posthaste.test", "to": "owner@member.test",
		"subject": "From the shared pool", "text": "hi"})
	fromOwner.waitFor(id, map[string]string{"owner@member.test": "delivered"})

	seen := map[string]string{} // recipient → client address and EHLO name
	for _, m := range mx.Messages() {
		host, _, err := net.SplitHostPort(m.RemoteAddr)
		require.NoError(t, err)
		seen[strings.Join(m.To, ",")] = host + " " + m.Helo
	}
	require.Equal(t, map[string]string{
		"acme@member.test":  "127.0.0.9 mta9.test",
		"owner@member.test": "127.0.0.8 mta8.test",
	}, seen)
}

// requireLoopback fails the test unless this machine can bind to each of
// the loopback addresses, which stand in for the public addresses of IP
// pools (Linux routes all of 127.0.0.0/8 to lo).
func requireLoopback(t *testing.T, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		require.NoError(t, err, "this test needs %s on loopback", ip)
		_ = ln.Close()
	}
}
