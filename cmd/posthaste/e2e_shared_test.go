package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

// A shared dev is one `posthaste dev` that the tests of one configuration
// use in turn, each with a team of its own (newTeam), instead of booting
// a process per test. It starts when the first of them asks for it and
// stops after the last test (stopSharedDevs, in TestMain). A test that
// needs a process of its own (a restart, a kill, a database outage, a
// setting of its own) keeps calling startDev.
//
// Shared devs run on a private PostgreSQL cluster in their data directory,
// as `posthaste dev` does without DATABASE_URL, so they outlive the
// databases of pgtest, which stop when the tests end.
type sharedDev struct {
	*devProcess
	env map[string]string
	// dns and mx are the shared dev's DNS server and every recipient's MX
	// (POSTHASTE_DNS_SERVER, POSTHASTE_MX_PORT), nil when its configuration
	// has none.
	dns *dnstest.Server
	mx  *smtptest.Server
}

// sharedConfig is one configuration of shared dev, started once.
type sharedConfig struct {
	once  sync.Once
	start func(tb testing.TB) *sharedDev
	dev   *sharedDev
}

// sharedConfigs are the configurations tests share a dev of.
var sharedConfigs = map[string]*sharedConfig{
	// browser is browserDevEnv's: defaults, with the Temporal UI.
	"browser": {start: func(tb testing.TB) *sharedDev {
		env := sharedEnv(tb)
		env["POSTHASTE_TEMPORAL_UI_PORT"] = fmt.Sprint(freePort(tb))
		return &sharedDev{devProcess: startDev(tb, env), env: env}
	}},
	// member is devEnv's: member.test's MX on loopback (memberMX), so
	// a sandbox send to a team member is a real SMTP delivery.
	"member": {start: func(tb testing.TB) *sharedDev {
		dns, mx := memberMX(tb)
		env := sharedEnv(tb)
		for k, v := range devEnv(tb, "", dns, mx) {
			if _, ok := env[k]; !ok {
				env[k] = v
			}
		}
		delete(env, "DATABASE_URL")
		return &sharedDev{devProcess: startDev(tb, env), env: env, dns: dns, mx: mx}
	}},
	// domain is domainDevEnv's, with recipientMX: domains a test verifies
	// on the shared DNS server (named with uniqueDomain), every MX on
	// recipientMX's port, and the inbound MX.
	"domain": {start: func(tb testing.TB) *sharedDev {
		dns := dnstest.NewServer(tb)
		mx := recipientMX(tb, dns)
		env := sharedEnv(tb)
		for k, v := range domainDevEnv(tb, "", dns, mx.Port()) {
			if _, ok := env[k]; !ok {
				env[k] = v
			}
		}
		delete(env, "DATABASE_URL")
		return &sharedDev{devProcess: startDev(tb, env), env: env, dns: dns, mx: mx}
	}},
}

// uniqueDomain is a domain name of its own for a test on a shared dev
// (a domain belongs to one team): label-<random>.test.
func uniqueDomain(label string) string {
	return label + "-" + strings.ReplaceAll(uuid.NewString()[:8], "-", "") + ".test"
}

// databaseURL is the URL of the shared dev's private cluster.
func (d *sharedDev) databaseURL(t *testing.T) string {
	t.Helper()
	u, err := pgcluster.RunningURL(devClusterDir(d.env["POSTHASTE_DATA_DIR"]))
	require.NoError(t, err)
	return u
}

// sharedEnv is the environment every shared dev starts from: a private
// cluster in its data directory, ports of its own, warnings only.
func sharedEnv(tb testing.TB) map[string]string {
	return map[string]string{
		"POSTHASTE_DATA_DIR":         tb.TempDir(),
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(tb)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(tb)),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
}

// shared returns the shared dev of configuration name, started on first
// use. A test that got it must not stop it.
func shared(t *testing.T, name string) *sharedDev {
	t.Helper()
	c, ok := sharedConfigs[name]
	require.True(t, ok, "no shared dev configuration %q", name)
	c.once.Do(func() {
		tb := &processTB{TB: t, name: name}
		sharedLife.mu.Lock()
		sharedLife.tbs = append(sharedLife.tbs, tb)
		sharedLife.mu.Unlock()
		dev := c.start(tb)
		dataDir := dev.env["POSTHASTE_DATA_DIR"]
		tb.Cleanup(func() {
			if err := removeClusterOutside(dataDir); err != nil {
				tb.fail("%v", err)
			}
		})
		tb.Cleanup(func() {
			if code, err := dev.shutdown(20 * time.Second); err != nil || code != 0 {
				tb.fail("dev exited with %d (%v):\n%s", code, err, dev.out.String())
			}
		})
		c.dev = dev
	})
	if c.dev == nil {
		t.Fatalf("the shared dev %q did not start: see the first test that asked for it", name)
	}
	return c.dev
}

// newTeam makes a team of the test's own on the shared dev, owned by a
// new user at an address of domain (owner-<random>@domain), and returns
// the owner's credentials: the test's data is isolated by team, whatever
// ran before it.
func (d *sharedDev) newTeam(t *testing.T, domain string) credentials {
	t.Helper()
	owner := "owner-" + strings.ReplaceAll(uuid.NewString()[:13], "-", "") + "@" + domain
	var out, errs bytes.Buffer
	env := map[string]string{"POSTHASTE_DATA_DIR": d.env["POSTHASTE_DATA_DIR"], "POSTHASTE_LOG_LEVEL": "warn"}
	code := run(context.Background(), []string{"admin", "create-team", "--name", t.Name(), "--email", owner},
		func(k string) string { return env[k] }, &out, &errs)
	require.Equal(t, 0, code, "%s%s", out.String(), errs.String())
	var c credentials
	require.NoError(t, json.Unmarshal(out.Bytes(), &c), out.String())
	require.Equal(t, owner, c.Email)
	require.NotEmpty(t, c.APIKey)
	require.NotEmpty(t, c.Password)
	return c
}

// messagesTo waits until the shared MX has n messages to rcpt and returns
// them (other tests' messages are there too).
func (d *sharedDev) messagesTo(t *testing.T, rcpt string, n int, timeout time.Duration) []smtptest.Message {
	t.Helper()
	var got []smtptest.Message
	eventually(t, timeout, func() error {
		got = got[:0]
		for _, m := range d.mx.Messages() {
			for _, to := range m.To {
				if strings.EqualFold(to, rcpt) {
					got = append(got, m)
					break
				}
			}
		}
		if len(got) < n {
			return fmt.Errorf("%d messages to %s, want %d", len(got), rcpt, n)
		}
		return nil
	})
	return got
}

// messagesAbout returns the messages the shared MX got that mention
// name (a test's own unique domain), in the order they came.
func (d *sharedDev) messagesAbout(name string) []smtptest.Message {
	var got []smtptest.Message
	for _, m := range d.mx.Messages() {
		if bytes.Contains(m.Data, []byte(name)) || strings.Contains(m.From, name) {
			got = append(got, m)
		}
	}
	return got
}

// sharedLife holds what the shared devs must release after the tests.
var sharedLife struct {
	mu  sync.Mutex
	tbs []*processTB
}

// stopSharedDevs stops the shared devs and releases what they used, last
// started first; it returns code, or 1 when a stop failed.
func stopSharedDevs(code int) int {
	sharedLife.mu.Lock()
	defer sharedLife.mu.Unlock()
	for i := len(sharedLife.tbs) - 1; i >= 0; i-- {
		tb := sharedLife.tbs[i]
		for j := len(tb.cleanups) - 1; j >= 0; j-- {
			tb.cleanups[j]()
		}
		if tb.failed && code == 0 {
			code = 1
		}
	}
	sharedLife.tbs = nil
	return code
}

// processTB is the testing.TB of what a shared dev uses (its data
// directory, ports, DNS server and MX): it lives as long as the test
// binary. Failures while it starts are those of the test that started it;
// its Cleanup functions run in stopSharedDevs.
type processTB struct {
	testing.TB // the test that started the shared dev, while it starts
	name       string
	cleanups   []func()
	failed     bool
}

func (p *processTB) Name() string { return "shared-" + p.name }

func (p *processTB) Cleanup(f func()) { p.cleanups = append(p.cleanups, f) }

func (p *processTB) TempDir() string {
	dir, err := os.MkdirTemp("", "posthaste-shared-"+p.name+"-")
	if err != nil {
		p.TB.Fatalf("shared dev: %v", err)
	}
	p.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			p.fail("removing %s: %v", dir, err)
		}
	})
	return dir
}

// fail reports a failure after the tests, when no test is there to fail.
func (p *processTB) fail(format string, args ...any) {
	p.failed = true
	fmt.Fprintf(os.Stderr, "shared dev %s: "+format+"\n", append([]any{p.name}, args...)...)
}
