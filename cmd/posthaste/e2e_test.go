package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/logtest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/worker"
	"github.com/posthaste/posthaste/workflows"
)

// The test binary doubles as the posthaste binary: with POSTHASTE_E2E_ARGS
// set it runs those arguments as the command, so the multi-process tests
// need no second link of the embedded Temporal server.
func TestMain(m *testing.M) {
	if args := os.Getenv("POSTHASTE_E2E_ARGS"); args != "" {
		main2(strings.Fields(args))
	}
	os.Exit(stopSharedDevs(pgtest.Run(m)))
}

func main2(args []string) {
	os.Args = append([]string{"posthaste"}, args...)
	main()
}

// freePort returns a port of 127.0.0.1 that nothing listens on, below the
// kernel's ephemeral range (32768 and up on Linux). A process restarted by
// a test binds its ports again; an ephemeral port could meanwhile have
// become the local end of some outgoing connection, and the restart would
// fail with "address already in use". Ports are handed out once per test
// binary.
func freePort(t testing.TB) int {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
	}
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if ports.given[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		ports.given[p] = true
		return p
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

// ports are the ports freePort handed out.
var ports struct {
	mu    sync.Mutex
	given map[int]bool
}

// dbDevEnv is the environment of a `posthaste dev` on the database dbURL,
// with a data dir and ports of its own, no Temporal UI and warnings only.
func dbDevEnv(t testing.TB, dbURL string) map[string]string {
	return map[string]string{
		"DATABASE_URL":               dbURL,
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
}

// devProcess is `posthaste dev` run in-process.
type devProcess struct {
	base   string
	cancel context.CancelFunc
	done   chan int
	out    *logtest.Buffer
}

func startDev(t testing.TB, env map[string]string) *devProcess {
	t.Helper()
	smtpListen(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	out := &logtest.Buffer{}
	p := &devProcess{base: "http://" + env["POSTHASTE_HTTP_ADDR"], cancel: cancel, done: make(chan int, 1), out: out}
	go func() { p.done <- run(ctx, []string{"dev"}, func(k string) string { return env[k] }, out, out) }()
	eventually(t, 90*time.Second, func() error {
		select {
		case code := <-p.done:
			t.Fatalf("dev exited with %d before it was ready:\n%s", code, out.String())
		default:
		}
		res, err := http.Get(p.base + "/readyz")
		if err != nil {
			return fmt.Errorf("dev not ready: %v\n%s", err, out.String())
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("dev not ready: /readyz answered %d\n%s", res.StatusCode, out.String())
		}
		return nil
	})
	return p
}

// stop sends the equivalent of SIGTERM and checks the shutdown is clean and quick.
func (p *devProcess) stop(t *testing.T) {
	t.Helper()
	start := time.Now()
	code, err := p.shutdown(20 * time.Second)
	require.NoError(t, err, p.out.String())
	require.Equal(t, 0, code, p.out.String())
	t.Logf("dev stopped in %v", time.Since(start))
}

// shutdown sends the equivalent of SIGTERM and returns the exit code, or
// an error when the process does not stop within timeout.
func (p *devProcess) shutdown(timeout time.Duration) (int, error) {
	p.cancel()
	select {
	case code := <-p.done:
		return code, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("dev did not stop within %v", timeout)
	}
}

type apiClient struct {
	t    *testing.T
	base string
	key  string
}

func (c apiClient) do(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		r = bytes.NewReader(b)
	}
	res, raw := c.raw(method, path, r)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// raw sends a request as a well-behaved client does: a 429
// rate_limit_exceeded is retried after its Retry-After (the tests poll
// faster than the default 10 requests per second).
func (c apiClient) raw(method, path string, body io.Reader) (*http.Response, []byte) {
	c.t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = io.ReadAll(body)
		require.NoError(c.t, err)
	}
	for {
		req, err := http.NewRequest(method, c.base+path, bytes.NewReader(b))
		require.NoError(c.t, err)
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(c.t, err)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests && strings.Contains(string(raw), "rate_limit_exceeded") {
			wait, err := strconv.Atoi(res.Header.Get("Retry-After"))
			require.NoError(c.t, err, "a 429 carries Retry-After")
			time.Sleep(time.Duration(wait) * time.Second)
			continue
		}
		return res, raw
	}
}

func (c apiClient) send(body map[string]any) string {
	c.t.Helper()
	status, out := c.do("POST", "/emails", body)
	require.Equal(c.t, 200, status, out)
	return out["id"].(string)
}

// waitFor polls an email until its recipients all reach a final state.
// pollPause is the pause before poll number i of a condition read through
// the API: it doubles from 20 ms to half a second, so a wait answers fast
// when the condition comes soon and otherwise leaves most of the team's
// rate limit (POSTHASTE_DEFAULT_RATE_LIMIT, 10/s) to the test's own sends,
// SMTP transactions included: a MAIL FROM refused with 451 for the rate
// limit made smtplib fail later with "503 Missing RCPT TO".
func pollPause(i int) time.Duration {
	if i >= 5 {
		return 500 * time.Millisecond
	}
	return 20 * time.Millisecond << i
}

// eventually calls cond until it returns nil, pausing pollPause(i) before
// poll i+1, and fails the test with cond's last error once timeout has
// passed. It is the one way the end-to-end tests wait for a condition
// (TestWaitsGoThroughEventually). cond runs on the test's goroutine, so it
// may fail the test itself.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("not within %v: %v", timeout, err)
	}
}

// poll is eventually for a goroutine the test started: it returns cond's
// last error instead of failing the test.
func poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		err := cond()
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(pollPause(i))
	}
}

func (c apiClient) waitFor(id string, want map[string]string) map[string]any {
	c.t.Helper()
	var last map[string]any
	eventually(c.t, 60*time.Second, func() error {
		status, e := c.do("GET", "/emails/"+id, nil)
		require.Equal(c.t, 200, status, e)
		last = e
		got := map[string]string{}
		for _, r := range e["recipients"].([]any) {
			rm := r.(map[string]any)
			got[rm["email"].(string)] = rm["status"].(string)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("email %s did not reach %v; last: %v", id, want, e)
		}
		return nil
	})
	return last
}

type credentials struct {
	APIKey   string `json:"api_key"`
	Email    string `json:"email"`
	Password string `json:"password"`
	TeamID   string `json:"team_id"` // in `admin create-team`'s output
}

func readCredentials(t *testing.T, dir string) credentials {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
	require.NoError(t, err)
	var c credentials
	require.NoError(t, json.Unmarshal(b, &c))
	require.NotEmpty(t, c.APIKey)
	require.NotEmpty(t, c.Password)
	st, err := os.Stat(filepath.Join(dir, "credentials.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	return c
}

// TestDev runs `posthaste dev` the way a newcomer does: no DATABASE_URL
// (a private PostgreSQL cluster), embedded Temporal with its UI, sandbox
// sends through the real workflow, a real SMTP delivery to a team member,
// a clean stop, and a restart that keeps everything.
func TestDev(t *testing.T) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{STARTTLS: true})
	dns.AddMX("member.test", "mx.member.test", 10)
	dns.AddA("mx.member.test", "127.0.0.1")

	dataDir := t.TempDir()
	env := map[string]string{
		"POSTHASTE_DATA_DIR":         dataDir,
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT": fmt.Sprint(freePort(t)),
		"POSTHASTE_DNS_SERVER":       dns.Addr(),
		"POSTHASTE_MX_PORT":          fmt.Sprint(mx.Port()),
		"POSTHASTE_HOSTNAME":         "posthaste.example",
		"POSTHASTE_ADMIN_EMAIL":      "Owner@member.test",
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
	t.Cleanup(func() { removeRelocatedCluster(t, dataDir) })
	dev := startDev(t, env)
	creds := readCredentials(t, dataDir)
	require.Equal(t, "owner@member.test", creds.Email)
	require.Contains(t, dev.out.String(), creds.APIKey, "first run prints the key")
	c := apiClient{t: t, base: dev.base, key: creds.APIKey}

	// The Temporal UI is served in-process.
	res, err := http.Get("http://127.0.0.1:" + env["POSTHASTE_TEMPORAL_UI_PORT"] + "/")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)

	// Sandbox outcomes through the whole pipeline.
	id := c.send(map[string]any{
		"from":    "Acme <onboarding@posthaste.test>",
		"to":      []string{"delivered@posthaste.test", "bounced+x@posthaste.test"},
		"cc":      "complained@posthaste.test",
		"bcc":     "suppressed@posthaste.test",
		"subject": "Sandbox",
		"html":    "<p>Hello <b>sandbox</b></p>",
	})
	e := c.waitFor(id, map[string]string{
		"delivered@posthaste.test":  "delivered",
		"bounced+x@posthaste.test":  "bounced",
		"complained@posthaste.test": "complained",
		"suppressed@posthaste.test": "suppressed",
	})
	require.Regexp(t, `^<`+id+`@posthaste.test>$`, e["message_id"])
	dbURL, err := pgcluster.RunningURL(devClusterDir(dataDir))
	require.NoError(t, err)
	pc := devCodec(t, dbURL, dataDir)
	saveDecodedHistory(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"], pc, id, "sendemail_sandbox.json")

	// A team member gets a real message over SMTP, with STARTTLS.
	mid := c.send(map[string]any{
		"from":    "onboarding@posthaste.test",
		"to":      "owner@member.test",
		"subject": "Welcome ✓",
		"html":    "<p>It works</p>",
		"headers": map[string]string{"X-Entity-Ref-ID": "42"},
	})
	c.waitFor(mid, map[string]string{"owner@member.test": "delivered"})
	h := saveDecodedHistory(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"], pc, mid, "sendemail_smtp.json")
	// Local-first delivery is decided by Prepare's recorded result, not
	// by a GetVersion marker and its search-attribute upsert, which cost
	// two events and a visibility write per email.
	for _, ev := range h.Events {
		require.NotEqual(t, enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, ev.GetEventType())
		require.NotEqual(t, "Version", ev.GetMarkerRecordedEventAttributes().GetMarkerName())
	}
	msgs := mx.WaitMessages(t, 1, 10*time.Second)
	require.Equal(t, "bounces+"+mid+"@posthaste.example", msgs[0].From)
	require.Equal(t, []string{"owner@member.test"}, msgs[0].To)
	require.True(t, msgs[0].TLS)
	require.Equal(t, "posthaste.example", msgs[0].Helo)
	mr, err := mail.CreateReader(bytes.NewReader(msgs[0].Data))
	require.NoError(t, err)
	subject, err := mr.Header.Subject()
	require.NoError(t, err)
	require.Equal(t, "Welcome ✓", subject)
	require.Equal(t, "42", mr.Header.Get("X-Entity-Ref-ID"))
	msgID, err := mr.Header.MessageID()
	require.NoError(t, err)
	require.Equal(t, mid+"@posthaste.test", msgID)

	// Listing shows both, newest first.
	status, list := c.do("GET", "/emails", nil)
	require.Equal(t, 200, status)
	data := list["data"].([]any)
	require.Len(t, data, 2)
	require.Equal(t, mid, data[0].(map[string]any)["id"])

	// The dashboard shows the history with no setup: sign in with the
	// printed credentials.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	page := func(res *http.Response, err error) string {
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, 200, res.StatusCode)
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return string(b)
	}
	login := page(browser.Get(dev.base + "/"))
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(login)
	require.NotNil(t, token, login)
	emails := page(browser.PostForm(dev.base+"/dashboard/login", url.Values{
		"csrf": {token[1]}, "email": {creds.Email}, "password": {creds.Password}}))
	require.Contains(t, emails, "Sandbox")
	require.Contains(t, emails, "Welcome ✓")

	// SMTP clients submit through the gateway into the same pipeline.
	checkSMTPClients(t, c, env, dataDir, mx)

	// The worker created the daily retention schedule.
	requireRetentionSchedule(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"])

	// A request answered just before the stop is still buffered in the
	// request log writer (it writes every second): the graceful stop
	// writes it out.
	lastPath := "/emails/" + uuid.NewString()
	status, _ = c.do("GET", lastPath, nil)
	require.Equal(t, 404, status)
	dev.stop(t)

	// A restart reuses the state: same key, same emails.
	dev = startDev(t, env)
	require.NotContains(t, dev.out.String(), "First run")
	c.waitFor(id, map[string]string{
		"delivered@posthaste.test":  "delivered",
		"bounced+x@posthaste.test":  "bounced",
		"complained@posthaste.test": "complained",
		"suppressed@posthaste.test": "suppressed",
	})
	status, logs := c.do("GET", "/logs?path="+lastPath, nil)
	require.Equal(t, 200, status, logs)
	require.Len(t, logs["data"], 1, "the request log was written out at shutdown")
	require.EqualValues(t, 404, logs["data"].([]any)[0].(map[string]any)["response_status"])
	requireRetentionSchedule(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"]) // created again: harmless
	id2 := c.send(map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test", "subject": "again", "text": "t"})
	c.waitFor(id2, map[string]string{"delivered@posthaste.test": "delivered"})
	dev.stop(t)
}

// requireRetentionSchedule checks that the retention Schedule exists and
// starts the Retention workflow daily.
func requireRetentionSchedule(t *testing.T, hostPort string) {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	d, err := tc.ScheduleClient().GetHandle(context.Background(), workflows.RetentionScheduleID).
		Describe(context.Background())
	require.NoError(t, err)
	a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	require.True(t, ok)
	require.Equal(t, workflows.RetentionName, a.Workflow)
	require.Equal(t, workflows.TaskQueue, a.TaskQueue)
	require.NotEmpty(t, d.Schedule.Spec.Calendars, "daily")
	require.NotEmpty(t, d.Info.NextActionTimes)
	require.WithinDuration(t, time.Now(), d.Info.NextActionTimes[0], 25*time.Hour)
}

// saveScheduledRun waits for the latest run of the workflow a Schedule
// started (trigger: started now) to complete, and records its history
// (recordHistory) under name.
func saveScheduledRun(t *testing.T, hostPort, scheduleID string, trigger bool, name string) {
	t.Helper()
	ctx := context.Background()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	h := tc.ScheduleClient().GetHandle(ctx, scheduleID)
	before := 0
	if trigger {
		d, err := h.Describe(ctx)
		require.NoError(t, err)
		before = d.Info.NumActions
		require.NoError(t, h.Trigger(ctx, client.ScheduleTriggerOptions{}))
	}
	var run *client.ScheduleWorkflowExecution
	eventually(t, 30*time.Second, func() error {
		d, err := h.Describe(ctx)
		if err != nil {
			return err
		}
		if d.Info.NumActions <= before || len(d.Info.RecentActions) == 0 {
			return fmt.Errorf("schedule %s has not started its workflow", scheduleID)
		}
		run = d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult
		if run == nil {
			return fmt.Errorf("schedule %s has not started its workflow", scheduleID)
		}
		return nil
	})
	require.NoError(t, tc.GetWorkflow(ctx, run.WorkflowID, run.FirstExecutionRunID).Get(ctx, nil))
	recordHistory(t, tc, run.WorkflowID, name, 40)
}

// saveHistory is saveWorkflowHistory for the SendEmail workflow of an
// email, with at most 20 events, and returns the history.
func saveHistory(t *testing.T, hostPort, emailID, name string) *historypb.History {
	t.Helper()
	return saveWorkflowHistory(t, hostPort, workflows.EmailWorkflowID(emailID), name, 20)
}

// saveDecodedHistory is saveHistory for a dev that encrypts payloads,
// which pc decodes (devCodec).
func saveDecodedHistory(t *testing.T, hostPort string, pc *codec.Codec, emailID, name string) *historypb.History {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	return recordDecodedHistory(t, tc, pc, workflows.EmailWorkflowID(emailID), name, 20)
}

// saveWorkflowHistory dials Temporal at hostPort and records the history
// of workflowID (recordHistory): at most maxEvents events, written for the
// replay tests when POSTHASTE_WRITE_HISTORIES is set. It returns the
// history.
func saveWorkflowHistory(t *testing.T, hostPort, workflowID, name string, maxEvents int) *historypb.History {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	return recordHistory(t, tc, workflowID, name, maxEvents)
}

// removeRelocatedCluster deletes a private cluster that pgcluster kept
// outside the data dir (as root, the data dir is out of postgres's reach).
func removeRelocatedCluster(t *testing.T, dataDir string) {
	require.NoError(t, removeClusterOutside(dataDir))
}

// removeClusterOutside is removeRelocatedCluster for callers without a test.
func removeClusterOutside(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "location"))
	if err != nil {
		return nil
	}
	loc := strings.TrimSpace(string(b))
	if strings.HasPrefix(loc, "/var/lib/posthaste/") {
		return os.RemoveAll(loc)
	}
	return nil
}

// TestOutboxExactlyOnce checks the two halves of "never lost, never started
// twice": an accepted email whose process died before its workflow started
// is picked up by the next dev, and starting the same outbox entry again
// does not start a second workflow run.
func TestOutboxExactlyOnce(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Migrate(ctx))
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "orphan"}))
	// An email accepted by a process that died before dispatching it.
	orphan := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "left behind",
		LastEvent: store.EventQueued, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "delivered@posthaste.test", Kind: "to", Domain: "posthaste.test", Status: "queued"}}}
	text := "t"
	orphan.Text = &text
	_, err = storetest.InsertEmail(ctx, st, orphan)
	require.NoError(t, err)

	env := dbDevEnv(t, dbURL)
	dev := startDev(t, env)
	defer dev.stop(t)
	eventually(t, 60*time.Second, func() error {
		e, err := st.Emails.GetEmail(ctx, team, orphan.ID)
		if err != nil {
			return err
		}
		if e.LastEvent != store.EventDelivered {
			return fmt.Errorf("the orphan is %s, not delivered", e.LastEvent)
		}
		return nil
	})

	tc, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer tc.Close()
	// The email's run has completed; starting its entry again starts none:
	// the latest run of the ID (read from the history store, not the
	// eventually consistent visibility) is still the first.
	wfID := workflows.EmailWorkflowID(orphan.ID.String())
	latestRun := func() *workflowpb.WorkflowExecutionInfo {
		d, err := tc.DescribeWorkflowExecution(ctx, wfID, "")
		require.NoError(t, err)
		return d.WorkflowExecutionInfo
	}
	eventually(t, 10*time.Second, func() error {
		if st := latestRun().Status; st != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return fmt.Errorf("the run is %v", st)
		}
		return nil
	})
	first := latestRun().Execution.RunId
	starter := worker.NewStarter(tc, workflows.DefaultDeliveryPolicy)
	item := store.OutboxItem{Kind: "send_email", TeamID: team, Ref: orphan.ID}
	require.NoError(t, starter.Start(ctx, item), "a repeated start is not an error")
	require.NoError(t, starter.Start(ctx, item))
	require.Equal(t, first, latestRun().Execution.RunId, "one run for one email")

	evs, err := st.Emails.Events(ctx, orphan.ID)
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{"queued", "sent", "delivered"}, types)
}

// TestSplitTopology runs `temporal`, `api` and `worker` as three OS
// processes against one PostgreSQL and sends an email through them.
func TestSplitTopology(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	tport, apiPort, metricsPort := freePort(t), freePort(t), freePort(t)
	base := map[string]string{
		"DATABASE_URL":               dbURL,
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(tport),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", apiPort),
		"TEMPORAL_ADDRESS":           fmt.Sprintf("127.0.0.1:%d", tport),
		"POSTHASTE_METRICS_ADDR":     fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"POSTHASTE_LOG_LEVEL":        "warn",
		// Every process of an installation shares the master key: the mx
		// seals what it receives, the worker opens it.
		"POSTHASTE_MASTER_KEY": newMasterKey(t),
	}
	out, code := runProcess(t, base, "migrate")
	require.Equal(t, 0, code, out)
	out, code = runProcess(t, base, "admin create-team --name Split --email split@example.com")
	require.Equal(t, 0, code, out)
	var creds credentials
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &creds))

	var team struct {
		TeamID string `json:"team_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &team))
	out, code = runProcess(t, base, "admin set-plan --team "+team.TeamID+" --plan 50k")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"monthly_emails": 50000`)
	out, code = runProcess(t, base, "admin set-plan --team "+team.TeamID+" --plan gold")
	require.Equal(t, 2, code, out)
	out, code = runProcess(t, base, "admin set-rate-limit --team "+team.TeamID+" --rate 4")
	require.Equal(t, 0, code, out)

	startProcess(t, base, "temporal", "Temporal is ready")
	startProcess(t, base, "worker", `"msg":"ready"`)
	startProcess(t, base, "api", `"msg":"ready"`)
	requireRetentionSchedule(t, base["TEMPORAL_ADDRESS"])
	c := apiClient{t: t, base: "http://" + base["POSTHASTE_HTTP_ADDR"], key: creds.APIKey}
	res, _ := c.raw("POST", "/emails", strings.NewReader(
		`{"from":"onboarding@posthaste.test","to":"delivered@posthaste.test","subject":"split","text":"t"}`))
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "4", res.Header.Get("RateLimit-Limit"), "the team's own limit")
	require.Equal(t, "1", res.Header.Get("X-Posthaste-Monthly-Quota"))
	status, list := c.do("GET", "/emails", nil)
	require.Equal(t, 200, status, list)
	id := list["data"].([]any)[0].(map[string]any)["id"].(string)
	c.waitFor(id, map[string]string{"delivered@posthaste.test": "delivered"})

	// The API's public port serves no /metrics without
	// POSTHASTE_METRICS_TOKEN.
	res, _ = c.raw("GET", "/metrics", nil)
	require.Equal(t, 404, res.StatusCode)

	// The worker reports what it did on its own metrics endpoint.
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `posthaste_email_events_total{type="delivered"} 1`)

	checkSMTPProcess(t, base, c)
	checkMXProcess(t, base, team.TeamID)
}

func processEnv(env map[string]string, args string) []string {
	out := []string{"POSTHASTE_E2E_ARGS=" + args, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func runProcess(t *testing.T, env map[string]string, args string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(processEnv(env, args), "POSTHASTE_LOG_LEVEL=info")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// testProcess is a long-running subcommand started by startProcess; the
// test may stop it before its end.
type testProcess struct {
	args  string
	env   map[string]string
	cmd   *exec.Cmd
	out   *readyWriter
	done  chan error // Wait's result, once
	ended bool
}

// startProcess starts args with env, waits for an output line that
// contains ready, and stops the process at cleanup unless the test did.
func startProcess(t *testing.T, env map[string]string, args, ready string) *testProcess {
	t.Helper()
	p := &testProcess{args: args, env: env, out: &readyWriter{want: ready, ready: make(chan struct{})},
		done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(processEnv(env, args), "POSTHASTE_LOG_LEVEL=info")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	select {
	case <-p.out.ready:
	case err := <-p.done:
		t.Fatalf("%s exited before it was ready (%v):\n%s", args, err, p.out.String())
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s not ready within 60 s:\n%s", args, p.out.String())
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and checks that the process exits 0 within 15 s.
// Stopping a stopped process does nothing.
func (p *testProcess) stop(t *testing.T) {
	t.Helper()
	if p.ended {
		return
	}
	p.ended = true
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "%s did not exit cleanly:\n%s", p.args, p.out.String())
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s did not stop within 15 s:\n%s", p.args, p.out.String())
	}
}

// readyWriter keeps a process's output and closes ready once the output
// contains want.
type readyWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	want  string
	ready chan struct{}
	seen  bool
}

var _ io.Writer = (*readyWriter)(nil)

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if !w.seen && strings.Contains(w.b.String(), w.want) {
		w.seen = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
