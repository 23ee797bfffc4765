package main

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/client"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

// oldStepWindow is how long the workflows' database steps retried before
// they had a retry window of their own (one attempt's timeout): an outage
// longer than this stranded the emails in flight.
const oldStepWindow = 30 * time.Second

// TestDatabaseOutage stops PostgreSQL in the middle of a burst, for longer
// than the old step window, and starts it again: every accepted email is
// then delivered, and the MX receives each exactly once.
func TestDatabaseOutage(t *testing.T) {
	ctx := context.Background()
	dns, mx := memberMX(t)
	pgCfg := pgcluster.Config{Dir: filepath.Join(t.TempDir(), "pg"), NoSync: true, Port: freePort(t)}
	pg, err := pgcluster.Start(ctx, pgCfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pgcluster.Remove(context.Background(), pgCfg) })

	env := devEnv(t, pg.URL(), dns, mx)
	env["POSTHASTE_STEP_RETRY_MAX"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_INITIAL"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_MAX"] = "2s"
	dev := startDev(t, env)
	defer dev.stop(t)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	c := newClient(t, dev.base, creds.APIKey)

	// A burst: 100 keyed single sends from 8 clients and a batch of 100.
	const singles, batch = 100, 100
	ids := sendBurst(t, c, "outage", singles)
	reqs := make([]client.SendEmailRequest, batch)
	for i := range reqs {
		reqs[i] = client.SendEmailRequest{From: "onboarding@posthaste.test", To: []string{"owner@member.test"},
			Subject: fmt.Sprintf("outage batch %d", i), Text: ptr("batch")}
	}
	res, err := c.Emails.SendBatch(ctx, reqs, &client.BatchOptions{IdempotencyKey: "outage-batch"})
	require.NoError(t, err)
	for _, r := range res.Data {
		ids = append(ids, r.ID)
	}
	require.Len(t, ids, singles+batch)

	// PostgreSQL stops while the burst is being delivered.
	mx.WaitMessages(t, 1, 60*time.Second)
	require.NoError(t, pg.Stop(ctx))
	before := len(mx.Messages())
	require.Less(t, before, len(ids), "the outage began with deliveries still to make")
	t.Logf("PostgreSQL stopped after %d of %d deliveries", before, len(ids))
	// The outage itself is what this test is about: it has to last.
	time.Sleep(oldStepWindow + 5*time.Second)
	pg, err = pgcluster.Start(ctx, pgCfg)
	require.NoError(t, err)
	defer func() { _ = pg.Stop(context.Background()) }()

	waitDelivered(t, pg.URL(), ids, 120*time.Second)
	requireDeliveredOnce(t, mx, ids)
}

// sendBurst sends n keyed emails to the team member from 8 concurrent
// clients and returns their ids. Failures are reported by the test's
// goroutine.
func sendBurst(t *testing.T, c *client.Client, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := c.Emails.Send(context.Background(), &client.SendEmailRequest{
					From: "onboarding@posthaste.test", To: []string{"owner@member.test"},
					Subject: fmt.Sprintf("%s %d", prefix, i), Text: ptr("burst"),
				}, &client.SendOptions{IdempotencyKey: fmt.Sprintf("%s/%d", prefix, i)})
				if err == nil {
					ids[i] = res.ID
				}
				errs[i] = err
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "send %d", i)
	}
	return ids
}

// waitDelivered waits until every email of ids is delivered, reading
// PostgreSQL directly (the API may still be refusing while it reconnects).
func waitDelivered(t *testing.T, dbURL string, ids []string, timeout time.Duration) {
	t.Helper()
	require.NoError(t, awaitDelivered(dbURL, ids, timeout))
}

// awaitDelivered is waitDelivered for goroutines the test spawned: it
// returns the failure instead of failing the test.
func awaitDelivered(dbURL string, ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var delivered int
	for i := 0; ; i++ {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err == nil {
			err = conn.QueryRow(context.Background(),
				`SELECT count(*) FROM email WHERE id = ANY(@ids::uuid[]) AND last_event = 'delivered'`,
				pgx.NamedArgs{"ids": ids}).Scan(&delivered)
			conn.Close(context.Background())
		}
		if err == nil && delivered == len(ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d delivered after %v (last error: %v)", delivered, len(ids), timeout, err)
		}
		time.Sleep(pollPause(i))
	}
}

var messageIDHeader = regexp.MustCompile(`(?i)\r\nMessage-ID: <([0-9a-f-]{36})@`)

// requireDeliveredOnce checks that the MX received exactly one message
// for each email of ids, and none for any other.
func requireDeliveredOnce(t *testing.T, mx *smtptest.Server, ids []string) {
	t.Helper()
	got := map[string]int{}
	for _, m := range mx.Messages() {
		sub := messageIDHeader.FindSubmatch(m.Data)
		require.NotNil(t, sub, "a message without our Message-ID:\n%s", m.Data)
		got[string(sub[1])]++
	}
	var dup []string
	for id, n := range got {
		if n > 1 {
			dup = append(dup, id)
		}
	}
	require.Empty(t, dup, "delivered more than once")
	for _, id := range ids {
		require.Equal(t, 1, got[id], "email %s", id)
	}
	require.Len(t, got, len(ids))
}

// TestCrashAnywhere kills `posthaste dev` (a SIGKILL from inside, at a
// chosen point of the send path: after an acceptance committed, inside
// Prepare, inside Deliver before and after the MX's answer) while a client
// sends keyed emails one after the other and retries whatever fails, and
// while the MX defers the first two attempts; then it starts dev again.
// Every email ends delivered, the MX received each once, and the client
// got an id for each.
func TestCrashAnywhere(t *testing.T) {
	for _, p := range faults.Points {
		t.Run(string(p), func(t *testing.T) { crashAt(t, p) })
	}
}

func crashAt(t *testing.T, point faults.Point) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{STARTTLS: true, Rcpt: func(_ string, n int) error {
		if n <= 2 {
			return smtptest.Reply(451, "4.7.1 Try again later")
		}
		return nil
	}})
	dns.AddMX("member.test", "mx.member.test", 10)
	dns.AddA("mx.member.test", "127.0.0.1")
	dbURL := pgtest.NewDatabase(t)
	env := devEnv(t, dbURL, dns, mx)
	smtpListen(t, env)
	env["POSTHASTE_STEP_RETRY_MAX"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_INITIAL"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_MAX"] = "2s"
	env["POSTHASTE_DELIVERY_HEARTBEAT"] = "3s"
	crashing := maps.Clone(env)
	crashing["POSTHASTE_TEST_CRASH_AT"] = string(point) + ":3"

	dev := spawn(t, crashing, "dev", `"msg":"ready"`)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	c := newClient(t, "http://"+env["POSTHASTE_HTTP_ADDR"], creds.APIKey)
	// One email at a time, each waited for until delivered, so that the
	// crash meets one delivery in flight: a SIGKILL that lands between
	// another delivery's MX answer and its heartbeat would send that one
	// again (SMTP's own at-least-once window, which `go run ./bench -chaos`
	// measures under load).
	const n = 8
	sent := make(chan []retriedSend, 1)
	go func() {
		var out []retriedSend
		for i := range n {
			r := sendRetrying(c, fmt.Sprintf("crash/%d", i), 90*time.Second)
			if r.err == nil {
				r.err = awaitDelivered(dbURL, []string{r.id}, 90*time.Second)
			}
			out = append(out, r)
			if r.err != nil {
				break
			}
		}
		sent <- out
	}()

	requireKilled(t, dev, 90*time.Second, string(point))
	spawn(t, env, "dev", `"msg":"ready"`)

	var ids []string
	var waited time.Duration
	for _, r := range <-sent {
		require.NoError(t, r.err)
		ids = append(ids, r.id)
		waited = max(waited, r.waited)
	}
	require.Len(t, ids, n)
	t.Logf("crash at %s: the longest a client retried was %v", point, waited.Round(time.Millisecond))
	requireDeliveredOnce(t, mx, ids)
}

// requireKilled waits up to timeout for a process started with a crash
// point (POSTHASTE_TEST_CRASH_AT) to SIGKILL itself there, and fails the
// test if it does not, or ends otherwise.
func requireKilled(t *testing.T, p *exec.Cmd, timeout time.Duration, point string) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- p.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		status, ok := exit.Sys().(syscall.WaitStatus)
		require.True(t, ok && status.Signaled() && status.Signal() == syscall.SIGKILL, "dev died by SIGKILL: %v", err)
	case <-time.After(timeout):
		t.Fatalf("dev did not reach the crash point %s", point)
	}
}

// retriedSend is what a retrying client ends with.
type retriedSend struct {
	id     string
	err    error
	waited time.Duration // from the first failure to the answer
}

// sendRetrying sends one keyed email to the team member as a well-behaved
// client does: any failure (the process is gone, 409 for a claim still
// held, a 5xx) is retried with the same key until timeout.
func sendRetrying(c *client.Client, key string, timeout time.Duration) retriedSend {
	req := &client.SendEmailRequest{From: "onboarding@posthaste.test", To: []string{"owner@member.test"},
		Subject: "crash " + key, Text: ptr("crash")}
	var firstFailure time.Time
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		res, err := c.Emails.Send(context.Background(), req, &client.SendOptions{IdempotencyKey: key})
		if err == nil {
			r := retriedSend{id: res.ID}
			if !firstFailure.IsZero() {
				r.waited = time.Since(firstFailure)
			}
			return r
		}
		if firstFailure.IsZero() {
			firstFailure = time.Now()
		}
		if time.Now().After(deadline) {
			return retriedSend{err: fmt.Errorf("%s: still failing: %w", key, err)}
		}
		time.Sleep(pollPause(min(i, 3)))
	}
}
