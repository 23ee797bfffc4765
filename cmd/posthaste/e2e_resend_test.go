package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

// TestDevResendTestAddresses sends Resend's test emails through
// `posthaste dev` with Resend's Node SDK, unchanged
// (api/testdata/resend-node/sandbox.cjs): from onboarding@resend.dev,
// delivered@resend.dev ends delivered and bounced+signup@resend.dev
// bounced, as the SDK's emails.get shows, simulated like posthaste.test's
// addresses: nothing reaches the MX that resend.dev's lookups lead to.
func TestDevResendTestAddresses(t *testing.T) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("resend.dev", "mx.resend.test", 10)
	dns.AddA("mx.resend.test", "127.0.0.1")
	env := devEnv(t, pgtest.NewDatabase(t), dns, mx)
	dev := startDev(t, env)
	defer dev.stop(t)
	key := readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey
	c := apiClient{t: t, base: dev.base, key: key}

	var sent struct{ Delivered, Bounced string }
	out := runResendNode(t, "sandbox.cjs", "RESEND_BASE_URL="+dev.base, "RESEND_API_KEY="+key)
	require.NoError(t, json.Unmarshal(out, &sent), string(out))
	c.waitFor(sent.Delivered, map[string]string{"delivered@resend.dev": "delivered"})
	c.waitFor(sent.Bounced, map[string]string{"bounced+signup@resend.dev": "bounced"})

	out = runResendNode(t, "sandbox.cjs", "RESEND_BASE_URL="+dev.base, "RESEND_API_KEY="+key,
		"IDS="+sent.Delivered+","+sent.Bounced)
	var got struct {
		Emails []struct {
			ID        string   `json:"id"`
			To        []string `json:"to"`
			LastEvent string   `json:"last_event"`
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Len(t, got.Emails, 2)
	require.Equal(t, "delivered", got.Emails[0].LastEvent)
	require.Equal(t, []string{"delivered@resend.dev"}, got.Emails[0].To)
	require.Equal(t, "bounced", got.Emails[1].LastEvent)
	require.Empty(t, mx.Messages(), "sandbox mail is never sent over the network")
}

// runResendNode runs a script of api/testdata/resend-node with node and
// env added, and returns its standard output.
func runResendNode(t *testing.T, script string, env ...string) []byte {
	t.Helper()
	dir, err := filepath.Abs("../../api/testdata/resend-node")
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "the Node SDK test needs node: apt-get install nodejs npm")
	_, err = os.Stat(filepath.Join(dir, "node_modules", "resend"))
	require.NoError(t, err, "the Node SDK test needs the SDK: npm ci --prefix api/testdata/resend-node")
	cmd := exec.Command(node, filepath.Join(dir, script))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s\n%s", out, strings.TrimSpace(stderr.String()))
	return out
}
