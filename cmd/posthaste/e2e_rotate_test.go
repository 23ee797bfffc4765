package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/keyring"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestMasterKeyRotation rotates the master key of a running installation
// the way docs/operations.md tells operators to: `posthaste dev` runs under key A
// with a verified domain, a webhook and tracked mail already sent; it is
// restarted with B current and A previous; `admin rotate-master-key` runs
// as a separate process while dev keeps accepting mail; then dev runs on B
// alone. Mail still leaves DKIM-signed (verified at the MX), the webhook
// still signs with the secret its receiver has, and the tracked link and
// the return path of the mail sent under A still work.
func TestMasterKeyRotation(t *testing.T) {
	ctx := context.Background()
	dns := dnstest.NewServer(t)
	mx := recipientMX(t, dns)
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, mx.Port())
	env["POSTHASTE_TRACKING_HOST"] = "track.posthaste.example"
	env["POSTHASTE_INBOUND_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	keyA, err := seal.NewKey()
	require.NoError(t, err)
	keyB, err := seal.NewKey()
	require.NoError(t, err)
	env["POSTHASTE_MASTER_KEY"] = keyA

	dev := startDev(t, env)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}
	recv := newHookReceiver(t)
	status, hook := c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL,
		"events": []string{"email.delivered", "email.clicked", "email.bounced"}})
	require.Equal(t, 201, status, hook)
	recv.mu.Lock()
	recv.secret = hook["signing_secret"].(string)
	recv.mu.Unlock()
	status, d := c.do("POST", "/domains", map[string]any{"name": "shop.test", "click_tracking": true})
	require.Equal(t, 201, status, d)
	domainID := d["id"].(string)
	for _, r := range d["records"].([]any) {
		rm := r.(map[string]any)
		host := rm["name"].(string) + ".shop.test"
		switch rm["type"] {
		case "TXT":
			dns.AddTXT(host, rm["value"].(string))
		case "MX":
			dns.AddMX(host, rm["value"].(string), 10)
		case "CNAME":
			dns.AddCNAME(host, rm["value"].(string))
		}
	}
	status, _ = c.do("POST", "/domains/"+domainID+"/verify", nil)
	require.Equal(t, 200, status)
	c.waitDomain(domainID, "verified")
	send := func(subject string) string {
		t.Helper()
		return c.send(map[string]any{"from": "Shop <hello@shop.test>", "to": "ann@rcpt.test", "subject": subject,
			"html": `<p>Our <a href="https://shop.example/sale">sale</a></p>`})
	}
	first := send("under A")
	c.waitFor(first, map[string]string{"ann@rcpt.test": "delivered"})
	msgs := mx.Messages()
	require.Len(t, msgs, 1)
	requireAuthenticated(t, dns, msgs[0], "shop.test")
	click := regexp.MustCompile(`href="https://links\.shop\.test(/c/[A-Za-z0-9_-]+)"`).FindStringSubmatch(htmlPart(t, msgs[0].Data))
	require.NotNil(t, click)
	returnPath := msgs[0].From
	recv.waitFor(1)
	dev.stop(t)

	// Every process gets B as current and A as previous.
	env["POSTHASTE_MASTER_KEY"] = keyB
	env["POSTHASTE_MASTER_KEY_PREVIOUS"] = keyA
	dev = startDev(t, env)
	c.base = dev.base
	// rotate runs the command as its own process; the report is its
	// stdout, the logs go to stderr.
	rotate := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(processEnv(env, strings.TrimSpace("admin rotate-master-key "+strings.Join(args, " "))),
			"POSTHASTE_LOG_LEVEL=info")
		return cmd
	}
	report := func(cmd *exec.Cmd, stdout, all string) (keyring.Report, string, int) {
		t.Helper()
		code := cmd.ProcessState.ExitCode()
		var rep keyring.Report
		require.NoError(t, json.Unmarshal([]byte(stdout), &rep), all)
		return rep, all, code
	}
	check := func(args ...string) (keyring.Report, string, int) {
		t.Helper()
		cmd := rotate(args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return report(cmd, stdout.String(), stdout.String()+stderr.String())
	}
	rep, out, code := check("--check")
	require.Equal(t, 1, code, "values remain under A: %s", out)
	require.Positive(t, rep.Remaining)

	// The rotation runs beside dev, which keeps sending.
	cmd := rotate("--batch-size", "2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	during := send("during the rotation")
	_ = cmd.Wait()
	rep, out, code = report(cmd, stdout.String(), stdout.String()+stderr.String())
	require.Equal(t, 0, code, out)
	require.Contains(t, stderr.String(), "re-sealed a batch")
	require.True(t, rep.Complete)
	require.Zero(t, rep.Unopenable)
	byColumn := map[string]keyring.Column{}
	for _, col := range rep.Columns {
		byColumn[col.Column] = col
	}
	require.Len(t, byColumn, len(store.SealedColumns()))
	for _, col := range []string{"domain.dkim_private_key", "webhook.secret", "installation_key.sealed", "team_data_key.sealed_key", "subject_key.sealed_key"} {
		require.Positive(t, byColumn[col].Total, col)
	}
	require.Equal(t, len(tokenKeyPurposes()), int(byColumn["installation_key.sealed"].Total))
	c.waitFor(during, map[string]string{"ann@rcpt.test": "delivered"})
	// Anything the run skipped (rows the services held) goes on a rerun.
	if rep.Remaining > 0 {
		rep, out, code = check()
		require.Equal(t, 0, code, out)
	}
	rep, out, code = check()
	require.Equal(t, 0, code, out)
	require.Zero(t, rep.Resealed, "a second run changes nothing")
	rep, out, code = check("--check")
	require.Equal(t, 0, code, out)
	require.Zero(t, rep.Remaining)
	dev.stop(t)

	// The old key is gone.
	delete(env, "POSTHASTE_MASTER_KEY_PREVIOUS")
	dev = startDev(t, env)
	defer dev.stop(t)
	c.base = dev.base
	after := send("under B only")
	c.waitFor(after, map[string]string{"ann@rcpt.test": "delivered"})
	msgs = mx.Messages()
	require.Len(t, msgs, 3)
	for _, m := range msgs[1:] {
		requireAuthenticated(t, dns, m, "shop.test")
	}

	// A bounce to the return path of the mail sent under A is taken (a
	// return path whose signature does not verify is refused at RCPT).
	dsn := reportFixture(t, "postfix-failed.eml", first, returnPath, map[string]string{"nobody@example.org": "ann@rcpt.test"})
	require.NoError(t, sendInbound(t, env["POSTHASTE_INBOUND_LISTEN"], returnPath, dsn))
	c.waitFor(first, map[string]string{"ann@rcpt.test": "bounced"})

	// The tracked link of the mail sent under A still leads on (an
	// unreadable token is a 404).
	req, err := http.NewRequest("GET", dev.base+click[1], nil)
	require.NoError(t, err)
	req.Host = "links.shop.test"
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0")
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 302, res.StatusCode, "the link of mail sent under A still works")
	require.Equal(t, "https://shop.example/sale", res.Header.Get("Location"))

	// The body of the mail sent under A, sealed with the team's data key,
	// reads under B alone: the data key was re-sealed.
	status, e := c.do("GET", "/emails/"+first, nil)
	require.Equal(t, 200, status, e)
	require.Contains(t, e["html"], "sale")

	// Every webhook message verified with the secret made under A (the
	// receiver fails the test otherwise): three deliveries and the bounce.
	got := recv.waitFor(4)
	var types []string
	for _, h := range got {
		types = append(types, h.Type)
	}
	require.Subset(t, types, []string{"email.delivered", "email.bounced"})

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var audited int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_entry
		WHERE action = 'master_key.rotate' AND actor_type = 'admin' AND target_id = $1`,
		rep.CurrentKey).Scan(&audited))
	require.GreaterOrEqual(t, audited, 2, "every run is recorded")
}

// TestRotateMasterKeyDevKeyFile goes through the rotation of `./dev.sh`,
// whose keys live in <data dir>/master.key: --generate prepends a new key,
// dev restarted on the file opens with both, the rotation moves everything
// to the new key, and --drop-previous leaves the new key alone once
// nothing needs the old one. The token keys stay what they were.
func TestRotateMasterKeyDevKeyFile(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	dataDir := t.TempDir()
	env := map[string]string{"DATABASE_URL": url, "POSTHASTE_DATA_DIR": dataDir, "POSTHASTE_LOG_FORMAT": "text"}
	admin := func(args ...string) (int, map[string]any, string) {
		t.Helper()
		var out, errs bytes.Buffer
		code := run(ctx, append([]string{"admin", "rotate-master-key"}, args...), func(k string) string { return env[k] }, &out, &errs)
		var v map[string]any
		_ = json.Unmarshal(out.Bytes(), &v)
		return code, v, out.String() + errs.String()
	}
	code, _, out := admin("--generate")
	require.Equal(t, 1, code, "no key file yet: %s", out)

	st, err := store.Open(ctx, store.Config{URL: url})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Migrate(ctx))
	file := devKeyFile(dataDir)
	// What dev does on its first start.
	first, err := masterKey(ctx, config.Domains{}, st, file)
	require.NoError(t, err)
	a := first.CurrentID()
	secret, err := first.Seal([]byte("secret"), []byte("row"))
	require.NoError(t, err)

	code, gen, out := admin("--generate")
	require.Equal(t, 0, code, out)
	keys, err := seal.ReadKeyFile(file)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, seal.IDOf(keys[0]).String(), gen["current_key"])
	require.Equal(t, a, seal.IDOf(keys[1]))

	// dev restarted: both keys.
	second, err := masterKey(ctx, config.Domains{}, st, file)
	require.NoError(t, err)
	require.Equal(t, seal.IDOf(keys[0]), second.CurrentID())
	_, err = second.Open(secret, []byte("row"))
	require.NoError(t, err)
	code, _, out = admin("--drop-previous")
	require.Equal(t, 1, code, "the token keys are still under the old key: %s", out)
	code, rep, out := admin()
	require.Equal(t, 0, code, out)
	require.EqualValues(t, len(tokenKeyPurposes()), rep["resealed"])
	code, _, out = admin("--drop-previous")
	require.Equal(t, 0, code, out)
	keys, err = seal.ReadKeyFile(file)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, second.CurrentID(), seal.IDOf(keys[0]))

	third, err := masterKey(ctx, config.Domains{}, st, file)
	require.NoError(t, err)
	for _, p := range tokenKeyPurposes() {
		require.Equal(t, first.DeriveKey(p), third.DeriveKey(p), p)
	}
	_, err = third.Open(secret, []byte("row"))
	require.ErrorIs(t, err, seal.ErrOpen, "the old key is gone")
}
