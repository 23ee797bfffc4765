package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/client"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/logtest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows"
)

// memberMX serves member.test's MX on loopback; owner@member.test is the
// team member the sandbox sender may write to, so what arrives there is a
// real SMTP delivery that can be counted.
func memberMX(t testing.TB) (*dnstest.Server, *smtptest.Server) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{STARTTLS: true})
	dns.AddMX("member.test", "mx.member.test", 10)
	dns.AddA("mx.member.test", "127.0.0.1")
	return dns, mx
}

func devEnv(t testing.TB, dbURL string, dns *dnstest.Server, mx *smtptest.Server) map[string]string {
	return map[string]string{
		"DATABASE_URL":               dbURL,
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"POSTHASTE_DNS_SERVER":       dns.Addr(),
		"POSTHASTE_MX_PORT":          fmt.Sprint(mx.Port()),
		"POSTHASTE_HOSTNAME":         "posthaste.example",
		"POSTHASTE_ADMIN_EMAIL":      "owner@member.test",
		"POSTHASTE_LOG_LEVEL":        "warn",
		// Bursts of 200 requests test idempotency, not the rate limit.
		"POSTHASTE_DEFAULT_RATE_LIMIT": "100000",
	}
}

func newClient(t *testing.T, base, key string) *client.Client {
	c, err := client.New(client.Config{BaseURL: base, APIKey: key})
	require.NoError(t, err)
	return c
}

// waitEvent polls an email until its last_event is want.
func waitEvent(t *testing.T, c *client.Client, id, want string, timeout time.Duration) *client.Email {
	t.Helper()
	var last *client.Email
	eventually(t, timeout, func() error {
		e, err := c.Emails.Get(context.Background(), id)
		require.NoError(t, err)
		if last = e; e.LastEvent != want {
			return fmt.Errorf("email %s did not reach %s; last: %+v", id, want, e)
		}
		return nil
	})
	return last
}

// waitAll polls the newest emails until n of them are delivered.
func waitAll(t *testing.T, c *client.Client, ids []string, timeout time.Duration) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	eventually(t, timeout, func() error {
		l, err := c.Emails.List(context.Background(), &client.ListOptions{Limit: 100})
		require.NoError(t, err)
		n := 0
		for _, e := range l.Data {
			if want[e.ID] && e.LastEvent == "delivered" {
				n++
			}
		}
		if n != len(ids) {
			return fmt.Errorf("%d of %d emails delivered", n, len(ids))
		}
		return nil
	})
}

func sandboxEmail(subject string, to string) *client.SendEmailRequest {
	return &client.SendEmailRequest{From: "Acme <onboarding@posthaste.test>", To: []string{to}, Subject: subject, HTML: "<p>" + subject + "</p>"}
}

func workflowRuns(t *testing.T, tc tclient.Client, id string) []enums.WorkflowExecutionStatus {
	t.Helper()
	res, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: "WorkflowId = '" + id + "'"})
	require.NoError(t, err)
	var out []enums.WorkflowExecutionStatus
	for _, e := range res.Executions {
		out = append(out, e.Status)
	}
	return out
}

// TestDevIdempotencyBatchesAndSchedules runs `posthaste dev` and drives it
// through the Go client: a burst of identical keyed sends, batches against
// single sends, rescheduling and canceling right after the POST, and a
// scheduled email that outlives a restart.
func TestDevIdempotencyBatchesAndSchedules(t *testing.T) {
	ctx := context.Background()
	dns, mx := memberMX(t)
	dbURL := pgtest.NewDatabase(t)
	env := devEnv(t, dbURL, dns, mx)
	st := devStore(t, dbURL, env["POSTHASTE_DATA_DIR"])
	dev := startDev(t, env)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	c := newClient(t, dev.base, creds.APIKey)
	tc, err := tclient.Dial(tclient.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer tc.Close()

	// 200 identical requests with one key at once: one email, one
	// workflow, one delivery; every answer is its id or "in flight".
	const burst = 200
	ids := make([]string, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	welcome := &client.SendEmailRequest{From: "onboarding@posthaste.test", To: []string{"owner@member.test"},
		Subject: "Welcome once", Text: ptr("once")}
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			res, err := c.Emails.Send(ctx, welcome, &client.SendOptions{IdempotencyKey: "welcome/owner"})
			if err == nil {
				ids[i] = res.ID
			}
			errs[i] = err
		}()
	}
	close(gate)
	wg.Wait()
	var id string
	concurrent := 0
	for i := range burst {
		if errs[i] != nil {
			var apiErr *client.Error
			require.True(t, errors.As(errs[i], &apiErr), "%v", errs[i])
			require.Equal(t, client.ErrConcurrentIdempotentRequests, apiErr.Name)
			concurrent++
			continue
		}
		if id == "" {
			id = ids[i]
		}
		require.Equal(t, id, ids[i])
	}
	t.Logf("burst of %d: %d answered the id, %d in flight", burst, burst-concurrent, concurrent)
	require.NotEmpty(t, id)
	waitEvent(t, c, id, "delivered", 30*time.Second)
	row, err := storetest.EmailForBuild(ctx, st, uuid.MustParse(id))
	require.NoError(t, err)
	wfID := workflows.KeyedEmailWorkflowID(row.TeamID.String(), "welcome/owner", id)
	eventually(t, 10*time.Second, func() error {
		s := workflowRuns(t, tc, wfID)
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
			return fmt.Errorf("one workflow for the key: runs %v", s)
		}
		return nil
	})
	// The key's only run has completed: nothing can deliver any more, so
	// the count at the MX is final.
	require.Len(t, mx.Messages(), 1, "one delivery")
	list, err := c.Emails.List(ctx, nil)
	require.NoError(t, err)
	require.Len(t, list.Data, 1, "one email row")

	// 100 single sends against one batch of 100, each until all are delivered.
	start := time.Now()
	var singles []string
	for i := range 100 {
		res, err := c.Emails.Send(ctx, sandboxEmail(fmt.Sprintf("single %d", i), fmt.Sprintf("delivered+s%d@posthaste.test", i)), nil)
		require.NoError(t, err)
		singles = append(singles, res.ID)
	}
	acceptedSingles := time.Since(start)
	waitAll(t, c, singles, 60*time.Second)
	singleTime := time.Since(start)

	batch := make([]client.SendEmailRequest, 100)
	for i := range batch {
		batch[i] = *sandboxEmail(fmt.Sprintf("batch %d", i), fmt.Sprintf("delivered+b%d@posthaste.test", i))
	}
	start = time.Now()
	res, err := c.Emails.SendBatch(ctx, batch, &client.BatchOptions{IdempotencyKey: "digest/1"})
	require.NoError(t, err)
	acceptedBatch := time.Since(start)
	require.Len(t, res.Data, 100)
	var batchIDs []string
	for _, d := range res.Data {
		batchIDs = append(batchIDs, d.ID)
	}
	waitAll(t, c, batchIDs, 60*time.Second)
	batchTime := time.Since(start)
	// Timings are reported, not asserted (go run ./bench measures them):
	// what makes a batch cheaper is checked below, one workflow and a few
	// history events per email.
	t.Logf("100 single sends: accepted in %v, delivered in %v; one batch of 100: accepted in %v, delivered in %v",
		acceptedSingles, singleTime, acceptedBatch, batchTime)
	again, err := c.Emails.SendBatch(ctx, batch, &client.BatchOptions{IdempotencyKey: "digest/1"})
	require.NoError(t, err)
	require.Equal(t, res.Data, again.Data, "the same key gives the same batch")
	brow, err := storetest.EmailForBuild(ctx, st, uuid.MustParse(batchIDs[0]))
	require.NoError(t, err)
	bwf := workflows.KeyedBatchWorkflowID(brow.TeamID.String(), "digest/1", brow.BatchID.String())
	eventually(t, 10*time.Second, func() error {
		s := workflowRuns(t, tc, bwf)
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
			return fmt.Errorf("one SendBatch run for the batch: runs %v", s)
		}
		return nil
	})
	hist := tc.GetWorkflowHistory(ctx, bwf, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for hist.HasNext() {
		_, err := hist.Next()
		require.NoError(t, err)
		events++
	}
	t.Logf("SendBatch of 100 sandbox emails: %d history events", events)
	require.Less(t, events, 400, "a few history events per email")

	// Moved earlier right after the POST (before or just after its
	// workflow started): it leaves at the new time.
	req := sandboxEmail("moved", "delivered@posthaste.test")
	req.ScheduledAt = "in 1 hour"
	moved, err := c.Emails.Send(ctx, req, nil)
	require.NoError(t, err)
	_, err = c.Emails.Update(ctx, moved.ID, &client.UpdateEmailRequest{ScheduledAt: "in 2 seconds"})
	require.NoError(t, err)
	e, err := c.Emails.Get(ctx, moved.ID)
	require.NoError(t, err)
	require.Equal(t, "scheduled", e.LastEvent)
	waitEvent(t, c, moved.ID, "delivered", 30*time.Second)
	eventually(t, 10*time.Second, func() error {
		s := workflowRuns(t, tc, workflows.EmailWorkflowID(moved.ID))
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
			return fmt.Errorf("workflow runs: %v", s)
		}
		return nil
	})
	// The histories' personal data is encrypted (internal/codec): the
	// fixtures are written decoded.
	dc := devCodec(t, dbURL, env["POSTHASTE_DATA_DIR"])
	recordDecodedHistory(t, tc, dc, workflows.EmailWorkflowID(moved.ID), "sendemail_rescheduled.json", 20)

	// Canceled right after the POST: never sent; a workflow, if one
	// started, ends without waiting for the hour.
	req = sandboxEmail("canceled", "delivered@posthaste.test")
	req.ScheduledAt = "in 1 hour"
	canceled, err := c.Emails.Send(ctx, req, nil)
	require.NoError(t, err)
	_, err = c.Emails.Cancel(ctx, canceled.ID)
	require.NoError(t, err)
	e, err = c.Emails.Get(ctx, canceled.ID)
	require.NoError(t, err)
	require.Equal(t, "canceled", e.LastEvent)
	_, err = c.Emails.Update(ctx, canceled.ID, &client.UpdateEmailRequest{ScheduledAt: "in 2 hours"})
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, client.ErrValidation, apiErr.Name)
	eventually(t, 20*time.Second, func() error {
		s := workflowRuns(t, tc, workflows.EmailWorkflowID(canceled.ID))
		if !(len(s) == 0 || (len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED)) {
			return fmt.Errorf("workflow runs: %v", s)
		}
		return nil
	})

	// Canceled while its workflow waits on its timer: woken, it ends.
	waiting, err := c.Emails.Send(ctx, req, nil)
	require.NoError(t, err)
	eventually(t, 20*time.Second, func() error {
		s := workflowRuns(t, tc, workflows.EmailWorkflowID(waiting.ID))
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_RUNNING) {
			return fmt.Errorf("workflow runs: %v", s)
		}
		return nil
	})
	_, err = c.Emails.Cancel(ctx, waiting.ID)
	require.NoError(t, err)
	eventually(t, 20*time.Second, func() error {
		s := workflowRuns(t, tc, workflows.EmailWorkflowID(waiting.ID))
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
			return fmt.Errorf("workflow runs: %v", s)
		}
		return nil
	})
	require.Equal(t, "canceled", waitEvent(t, c, waiting.ID, "canceled", time.Second).LastEvent)
	recordDecodedHistory(t, tc, dc, workflows.EmailWorkflowID(waiting.ID), "sendemail_canceled.json", 20)

	_, err = c.Emails.Cancel(ctx, moved.ID)
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, client.ErrValidation, apiErr.Name, "an email that left cannot be canceled")

	// One email of a batch moved earlier: the batch's workflow routes the wake.
	sb := []client.SendEmailRequest{*sandboxEmail("now", "delivered@posthaste.test"), *sandboxEmail("later", "delivered+l@posthaste.test")}
	sb[1].ScheduledAt = "in 1 hour"
	bres, err := c.Emails.SendBatch(ctx, sb, nil)
	require.NoError(t, err)
	waitEvent(t, c, bres.Data[0].ID, "delivered", 30*time.Second)
	waitEvent(t, c, bres.Data[1].ID, "scheduled", time.Second)
	_, err = c.Emails.Update(ctx, bres.Data[1].ID, &client.UpdateEmailRequest{ScheduledAt: "in 1 second"})
	require.NoError(t, err)
	waitEvent(t, c, bres.Data[1].ID, "delivered", 30*time.Second)
	sbRow, err := storetest.EmailForBuild(ctx, st, uuid.MustParse(bres.Data[1].ID))
	require.NoError(t, err)
	sbWF := workflows.BatchWorkflowID(sbRow.BatchID.String())
	eventually(t, 10*time.Second, func() error {
		s := workflowRuns(t, tc, sbWF)
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
			return fmt.Errorf("workflow runs: %v", s)
		}
		return nil
	})
	// Its due email was prepared with PrepareBatch (sendbatch_rescheduled.json
	// is the same batch recorded before).
	recordDecodedHistory(t, tc, dc, sbWF, "sendbatch_rescheduled_together.json", 40)

	// A scheduled email survives a restart and leaves on time.
	at := time.Now().Add(8 * time.Second).UTC()
	req = sandboxEmail("after restart", "delivered@posthaste.test")
	req.ScheduledAt = at.Format(time.RFC3339Nano)
	later, err := c.Emails.Send(ctx, req, nil)
	require.NoError(t, err)
	waitEvent(t, c, later.ID, "scheduled", time.Second)
	dev.stop(t)
	dev = startDev(t, env)
	defer dev.stop(t)
	waitEvent(t, c, later.ID, "delivered", 60*time.Second)
	evs, err := st.Emails.Events(ctx, uuid.MustParse(later.ID))
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == "sent" {
			require.False(t, ev.CreatedAt.Before(at.Add(-2*time.Second)), "sent at %v, scheduled for %v", ev.CreatedAt, at)
			require.Less(t, ev.CreatedAt.Sub(at), 10*time.Second, "sent on time")
		}
	}
	require.Equal(t, []string{"scheduled", "sent", "delivered"}, types)
}

func ptr[T any](v T) *T { return &v }

// scanFor reads lines until one contains s, closes found, and keeps
// draining so the process never blocks on a full pipe.
func scanFor(r io.Reader, s string, found chan struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if found != nil && strings.Contains(sc.Text(), s) {
			close(found)
			found = nil
		}
	}
}

// jsonTail decodes the JSON object that ends a command's output.
func jsonTail(out string, v any) error {
	i := strings.Index(out, "{")
	if i < 0 {
		return fmt.Errorf("no JSON in %q", out)
	}
	return json.Unmarshal([]byte(out[i:]), v)
}

// spawn starts a subcommand of the test binary, waits for a line with
// ready and kills it at cleanup if it still runs. Its output is kept and
// shown when it does not get ready.
func spawn(t *testing.T, env map[string]string, args, ready string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(processEnv(env, args), "POSTHASTE_LOG_LEVEL=info")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	found := make(chan struct{})
	closed := make(chan struct{}) // the output ended: the process exited
	log := &logtest.Buffer{}
	go func() { scanFor(io.TeeReader(out, log), ready, found); close(closed) }()
	select {
	case <-found:
	case <-closed:
		select {
		case <-found: // ready, then gone: the caller checks how it ended
			return cmd
		default:
		}
		_ = cmd.Wait()
		t.Fatalf("%s exited before it was ready (%v):\n%s", args, cmd.ProcessState, lastLines(log.String(), 40))
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s not ready:\n%s", args, lastLines(log.String(), 40))
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// lastLines is the end of a log, n lines at most.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestAcceptedThenKilledIsDeliveredOnce accepts a keyed email on an `api`
// process whose dispatcher cannot reach Temporal, SIGKILLs it between the
// commit and the workflow start, and restarts on `posthaste dev`: the
// email is delivered exactly once, under its keyed workflow ID, and the
// key still answers with the same id.
func TestAcceptedThenKilledIsDeliveredOnce(t *testing.T) {
	ctx := context.Background()
	dns, mx := memberMX(t)
	dbURL := pgtest.NewDatabase(t)
	tport := freePort(t)
	base := map[string]string{
		"DATABASE_URL":               dbURL,
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(tport),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"TEMPORAL_ADDRESS":           fmt.Sprintf("127.0.0.1:%d", tport),
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
	out, code := runProcess(t, base, "migrate")
	require.Equal(t, 0, code, out)
	out, code = runProcess(t, base, "admin create-team --name Kill --email owner@member.test")
	require.Equal(t, 0, code, out)
	var creds credentials
	require.NoError(t, jsonTail(out, &creds))

	temporal := spawn(t, base, "temporal", "Temporal is ready")
	api := spawn(t, base, "api", `"msg":"ready"`)
	// Temporal goes away: the dispatcher can no longer start workflows.
	require.NoError(t, temporal.Process.Signal(syscall.SIGKILL))
	_ = temporal.Wait()

	c := newClient(t, "http://"+base["POSTHASTE_HTTP_ADDR"], creds.APIKey)
	req := &client.SendEmailRequest{From: "onboarding@posthaste.test", To: []string{"owner@member.test"},
		Subject: "Exactly once", Text: ptr("once")}
	opts := &client.SendOptions{IdempotencyKey: "order/42"}
	res, err := c.Emails.Send(ctx, req, opts)
	require.NoError(t, err)
	st := storetest.Open(t, store.Config{URL: dbURL})
	n, err := storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 1, n, "accepted, not started")
	require.NoError(t, api.Process.Signal(syscall.SIGKILL))
	_ = api.Wait()

	env := devEnv(t, dbURL, dns, mx)
	st = devStore(t, dbURL, env["POSTHASTE_DATA_DIR"])
	dev := startDev(t, env)
	defer dev.stop(t)
	c = newClient(t, dev.base, creds.APIKey)
	waitEvent(t, c, res.ID, "delivered", 60*time.Second)
	again, err := c.Emails.Send(ctx, req, opts)
	require.NoError(t, err)
	require.Equal(t, res.ID, again.ID, "the key still answers with the first email")
	row, err := storetest.EmailForBuild(ctx, st, uuid.MustParse(res.ID))
	require.NoError(t, err)
	tc, err := tclient.Dial(tclient.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer tc.Close()
	eventually(t, 10*time.Second, func() error {
		s := workflowRuns(t, tc, workflows.KeyedEmailWorkflowID(row.TeamID.String(), "order/42", res.ID))
		if !(len(s) == 1 && s[0] == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
			return fmt.Errorf("one workflow, under the keyed ID: runs %v", s)
		}
		return nil
	})
	// Its only run has completed: the count at the MX is final.
	require.Len(t, mx.Messages(), 1, "delivered exactly once")
	n, err = storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Zero(t, n)
}
