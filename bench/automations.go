package main

// The automations step: on a fresh `posthaste dev`, n sandbox contacts
// delivered+<i>@posthaste.test (imported first, through the broadcast
// step's import) are each sent the event bench.signed_up (POST
// /events/send, c.conc concurrent clients), which starts one run each of an
// automation trigger -> delay D -> send_email (a published template from
// onboarding@posthaste.test, its variable from the event's payload). Every
// run waits on its delay's durable timer; the timers then fall due at the
// rate the runs were started, and each run sends its email. The step
// prints:
//
//   - runs started per second: n over the time from the first event send
//     to the moment the last run was waiting on its delay (the largest
//     started_at of the runs' delay steps, as dev recorded it; see
//     waitAllWaiting for how the step knows they all wait);
//   - the dev process's VmRSS (as the broadcast step reads /proc) when
//     idle before the events and with all n runs waiting, and the
//     difference (target: under 500 MB);
//   - the lag from each run's due time (its delay step's started_at + D)
//     to its email's acceptance (the email's created_at; the send_email
//     step's output names the email): p50, p99 and max;
//   - the finish: the last email's created_at minus the first due time,
//     beside the time the run's sandbox end-to-end rate needs for n emails
//     (target: at most 1.5 times that);
//   - the AutomationRun workflows started, and the histories of the
//     first run and of the run whose email was accepted last (a wake
//     that waited long shows its timed-out workflow tasks there).
//
// The sandbox end-to-end rate is the full run's (measure), or, with
// -automations, one measured by the same code (measureE2E) on the step's
// dev once its runs have ended and its memory was read.
//
//	GOTOOLCHAIN=local go run ./bench -automations                       # this step only, 10,000 runs
//	GOTOOLCHAIN=local go run ./bench -automations -automation-runs 500  # a smaller one

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/workflows"
)

const (
	// automationEvent starts the measured runs, automationPilotEvent the
	// pilot's.
	automationEvent      = "bench.signed_up"
	automationPilotEvent = "bench.pilot"
	// automationPoll is how often the step reads the runs' progress.
	automationPoll = 250 * time.Millisecond

	// The measured delay D (chooseAutomationDelay): automationDelaySafety
	// times the time the pilot's start rate needs for n runs, plus
	// automationDelayMargin and automationSweepPerRun per run (the time
	// to check every run waits and read the memory).
	automationDelaySafety = 2.0
	automationDelayMargin = 10 * time.Second
	automationSweepPerRun = 2 * time.Millisecond
)

// automationPilotSize is how many runs the pilot takes before n measured
// ones: a twentieth, between 50 and 500.
func automationPilotSize(n int) int {
	return max(50, min(n/20, 500))
}

// automationPilotDelay is the delay of the pilot's automation of n runs:
// 5 s and 40 ms a run, in whole seconds, so that its runs wait before its
// first timer falls due (at 25 runs started a second or more) and its
// start rate is measured as the measured runs' is, without its emails
// being sent meanwhile.
func automationPilotDelay(n int) time.Duration {
	return (5*time.Second + time.Duration(n)*40*time.Millisecond + time.Second - 1).Truncate(time.Second)
}

// chooseAutomationDelay is the delay D of the measured automation, chosen
// so that every event is sent, and every run waits on its delay, before
// the first timer falls due: the memory is then read with n runs waiting,
// and the timers fall due at the rate the runs were started (the delay is
// the same for all), not in a burst at the end of the sends nor mixed with
// them. D cannot change once the runs started (a run keeps the version of
// the automation it started with), so it is chosen beforehand from the
// pilot: the same automation with a shorter delay (automationPilotDelay)
// and a twentieth of the runs, measured the same way. Twice the time
// the pilot's start rate needs for n runs (a larger run may start more
// slowly: more rows, a larger heap),
// plus 10 s and 2 ms a run for the step to check that every run waits and
// read the memory, rounded up to whole seconds. The step
// checks afterwards that the last run waited, and the memory was read,
// before the first timer fell due, and fails otherwise. Without a pilot
// rate it returns 0.
func chooseAutomationDelay(n int, pilot rate) time.Duration {
	per := pilot.perSecond()
	if per <= 0 || n <= 0 {
		return 0
	}
	d := time.Duration(automationDelaySafety * float64(n) / per * float64(time.Second))
	d += automationDelayMargin + time.Duration(n)*automationSweepPerRun
	return (d + time.Second - 1).Truncate(time.Second)
}

// delayWords is d as a delay step's duration, in whole seconds.
func delayWords(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s == 1 {
		return "1 second"
	}
	return strconv.FormatInt(s, 10) + " seconds"
}

// runTiming is what the step reads of one finished run.
type runTiming struct {
	id           string
	delayStarted time.Time // its delay step's started_at: when it began to wait
	emailID      string    // the email its send_email step sent
	accepted     time.Time // that email's created_at
}

// automationTimes is what the timings of a set of runs say.
type automationTimes struct {
	started           rate            // the runs, from the first event send to the last delay's start
	firstDue, lastDue time.Time       // the earliest and the latest due time (delay start + D)
	lastAccepted      time.Time       // the last email's created_at
	lastRun           string          // the run whose email was accepted last
	lags              []time.Duration // due time to acceptance, sorted
	finish            time.Duration   // the first due time to the last acceptance
}

// summarizeRuns reads the runs' timings: sendStart is the first event
// send, d the delay of their automation.
func summarizeRuns(sendStart time.Time, d time.Duration, runs []runTiming) automationTimes {
	var t automationTimes
	if len(runs) == 0 {
		return t
	}
	var lastWait time.Time
	t.lags = make([]time.Duration, 0, len(runs))
	for i, r := range runs {
		due := r.delayStarted.Add(d)
		if i == 0 || due.Before(t.firstDue) {
			t.firstDue = due
		}
		if i == 0 || due.After(t.lastDue) {
			t.lastDue = due
		}
		if i == 0 || r.delayStarted.After(lastWait) {
			lastWait = r.delayStarted
		}
		if i == 0 || r.accepted.After(t.lastAccepted) {
			t.lastAccepted, t.lastRun = r.accepted, r.id
		}
		t.lags = append(t.lags, r.accepted.Sub(due))
	}
	slices.Sort(t.lags)
	t.started = rate{n: len(runs), elapsed: lastWait.Sub(sendStart)}
	t.finish = t.lastAccepted.Sub(t.firstDue)
	return t
}

// lag returns the lag at quantile q (nearest rank).
func (t automationTimes) lag(q float64) time.Duration { return quantile(t.lags, q) }

// lastWaiting is when the last run began to wait.
func (t automationTimes) lastWaiting(sendStart time.Time) time.Time {
	return sendStart.Add(t.started.elapsed)
}

// eventSends is a run of POST /events/send.
type eventSends struct {
	sent      rate            // the events, first request to last answer
	latencies []time.Duration // of every request, sorted
	runs      []string        // the run each event started, by contact
}

// automationResult is the step's measurements.
type automationResult struct {
	n, conc  int
	imported time.Duration // the import of the n contacts

	pilotN     int
	pilotDelay time.Duration   // the pilot automation's delay
	pilotStart time.Time       // the pilot's first event send
	pilot      automationTimes // the pilot's runs
	delay      time.Duration   // D of the measured automation
	sendStart  time.Time       // the first event send
	events     eventSends
	times      automationTimes
	memoryRead time.Time // when the memory with every run waiting was read

	rssReady, rssIdle, rssWaiting, hwmWaiting int64 // dev's VmRSS (and VmHWM), bytes

	workflows int64   // AutomationRun workflows started since the first event (Temporal visibility)
	history   history // of the first measured run's workflow
	lastHist  history // of the workflow of the run whose email was accepted last

	e2e     rate   // the single-send sandbox end-to-end rate of the same run
	e2eFrom string // which dev measured e2e
}

// memoryGrowth is dev's VmRSS with every run waiting minus when idle.
func (r automationResult) memoryGrowth() int64 { return r.rssWaiting - r.rssIdle }

// e2eTime is how long n emails take at the sandbox end-to-end rate; 0
// without one.
func (r automationResult) e2eTime() time.Duration {
	per := r.e2e.perSecond()
	if per <= 0 {
		return 0
	}
	return time.Duration(float64(r.n) / per * float64(time.Second))
}

// runAutomationsOnly runs only the automations step, the single-send
// sandbox end-to-end rate it is compared with measured on its dev.
func runAutomationsOnly(ctx context.Context, bin string, c counts, out, progress io.Writer) error {
	return inRoot(ctx, bin, "posthaste bench -automations", out, progress,
		func(p, logf func(string, ...any), root, bin string) error {
			res, err := measureAutomations(ctx, bin, root, c, true, p, logf)
			if err != nil {
				return err
			}
			printAutomations(p, res)
			printTargets(p, automationTargets(res))
			return nil
		})
}

// measureAutomations runs the step with c.automations runs and c.conc
// clients on a fresh dev under root. With e2e it also measures the
// single-send sandbox end-to-end rate with c's counts on that dev once the
// runs ended; otherwise the caller sets res.e2e from its own run.
func measureAutomations(ctx context.Context, bin, root string, c counts, e2e bool, p func(string, ...any),
	logf func(string, ...any)) (automationResult, error) {
	n := c.automations
	dir := filepath.Join(root, "automations-"+strconv.Itoa(n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return automationResult{}, err
	}
	logf("automations: starting a fresh posthaste dev for %d runs", n)
	dev, err := startDev(ctx, bin, dir, logf)
	if err != nil {
		return automationResult{}, err
	}
	res, err := measureAutomationRuns(ctx, dev, n, c.conc, logf)
	if err == nil && e2e {
		api := newAPIClient(dev.base, dev.creds.APIKey)
		res.e2e, _, err = measureE2E(ctx, api, newScraper(api.http, dev.base), c, p, logf)
		res.e2eFrom = fmt.Sprintf("the automations dev, after its %d runs", n)
	}
	logf("automations: stopping the dev of %d runs", n)
	if serr := dev.stop(); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return res, fmt.Errorf("automations with %d runs: %w", n, err)
	}
	return res, nil
}

// measureAutomationRuns is the step on dev: the template, the contacts,
// the pilot, then the measured automation, its n events and runs.
func measureAutomationRuns(ctx context.Context, dev *devProcess, n, conc int, logf func(string, ...any)) (automationResult, error) {
	res := automationResult{n: n, conc: conc, pilotN: automationPilotSize(n)}
	res.pilotDelay = automationPilotDelay(res.pilotN)
	pid := dev.cmd.Process.Pid
	var err error
	if res.rssReady, _, err = readMemory(pid); err != nil {
		return res, fmt.Errorf("reading dev's memory: %w", err)
	}
	// The load client's transport: keep-alive connections for every client.
	hc := newAPIClient(dev.base, dev.creds.APIKey).http
	api := &benchAPI{hc: hc, base: dev.base, key: dev.creds.APIKey}

	template, err := createAutomationTemplate(ctx, api)
	if err != nil {
		return res, err
	}
	if _, res.imported, err = importContacts(ctx, api, n, "automations", logf); err != nil {
		return res, err
	}

	// The pilot, which also warms the path up.
	logf("automations: pilot, %d runs with a %s delay", res.pilotN, delayWords(res.pilotDelay))
	pilot, err := createBenchAutomation(ctx, api, "bench pilot", automationPilotEvent, res.pilotDelay, template)
	if err != nil {
		return res, err
	}
	res.pilotStart = time.Now()
	ps, err := sendEvents(ctx, api, automationPilotEvent, res.pilotN, conc)
	if err != nil {
		return res, fmt.Errorf("pilot: %w", err)
	}
	if err := waitRunsCompleted(ctx, api, pilot, res.pilotN, res.pilotStart.Add(res.pilotDelay),
		automationTimeout(res.pilotN, res.pilotDelay), logf); err != nil {
		return res, fmt.Errorf("pilot: %w", err)
	}
	pruns, err := collectRunTimings(ctx, api, pilot, ps.runs, conc)
	if err != nil {
		return res, fmt.Errorf("pilot: %w", err)
	}
	res.pilot = summarizeRuns(res.pilotStart, res.pilotDelay, pruns)
	if res.delay = chooseAutomationDelay(n, res.pilot.started); res.delay == 0 {
		return res, fmt.Errorf("pilot: no start rate (%d runs in %s)", res.pilot.started.n, res.pilot.started.elapsed)
	}
	logf("automations: pilot started %.1f runs/s; the measured delay is %s", res.pilot.started.perSecond(), delayWords(res.delay))
	auto, err := createBenchAutomation(ctx, api, "bench signup", automationEvent, res.delay, template)
	if err != nil {
		return res, err
	}

	// Idle: everything the pilot sent delivered, then a moment's rest.
	m := newScraper(hc, dev.base)
	s, err := m.scrape(ctx)
	if err != nil {
		return res, err
	}
	if _, err := m.waitDelivered(ctx, s.accepted, 100*time.Millisecond, logf); err != nil {
		return res, fmt.Errorf("waiting for the pilot's emails: %w", err)
	}
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return res, err
	}
	if res.rssIdle, _, err = readMemory(pid); err != nil {
		return res, fmt.Errorf("reading dev's memory: %w", err)
	}

	logf("automations: %d events at concurrency %d", n, conc)
	res.sendStart = time.Now()
	if res.events, err = sendEvents(ctx, api, automationEvent, n, conc); err != nil {
		return res, err
	}
	// No run's timer falls due before sendStart + D.
	if err := waitAllWaiting(ctx, api, auto, res.events.runs, conc, res.sendStart.Add(res.delay), logf); err != nil {
		return res, err
	}
	if res.rssWaiting, res.hwmWaiting, err = readMemory(pid); err != nil {
		return res, fmt.Errorf("reading dev's memory: %w", err)
	}
	res.memoryRead = time.Now()
	logf("automations: all %d runs wait; %.0f MB (idle %.0f MB); the first timer falls due in %s", n,
		mb(res.rssWaiting), mb(res.rssIdle), fmtDur(time.Until(res.sendStart.Add(res.delay))))

	if err := waitRunsCompleted(ctx, api, auto, n, res.sendStart.Add(res.delay), automationTimeout(n, res.delay), logf); err != nil {
		return res, err
	}
	logf("automations: reading the %d runs and their emails", n)
	runs, err := collectRunTimings(ctx, api, auto, res.events.runs, conc)
	if err != nil {
		return res, err
	}
	res.times = summarizeRuns(res.sendStart, res.delay, runs)
	if err := checkWaitedBeforeDue(res); err != nil {
		return res, err
	}

	tc, err := dialTemporal(ctx, dev.temporal)
	if err != nil {
		return res, err
	}
	defer tc.Close()
	if res.workflows, err = countAutomationRuns(ctx, tc, res.sendStart, n); err != nil {
		return res, err
	}
	if res.history, err = workflowHistory(ctx, tc, workflows.AutomationRunWorkflowID(res.events.runs[0])); err != nil {
		return res, err
	}
	res.lastHist, err = workflowHistory(ctx, tc, workflows.AutomationRunWorkflowID(res.times.lastRun))
	return res, err
}

// checkWaitedBeforeDue fails when the measured delay was too short: the
// last run began to wait, or the memory was read, after the first timer
// fell due.
func checkWaitedBeforeDue(r automationResult) error {
	last := r.times.lastWaiting(r.sendStart)
	switch {
	case !last.Before(r.times.firstDue):
		return fmt.Errorf("the last run began to wait %s after the first timer fell due: the delay (%s) is too short",
			fmtDur(last.Sub(r.times.firstDue)), delayWords(r.delay))
	case !r.memoryRead.Before(r.times.firstDue):
		return fmt.Errorf("the memory was read %s after the first timer fell due: the delay (%s) is too short",
			fmtDur(r.memoryRead.Sub(r.times.firstDue)), delayWords(r.delay))
	}
	return nil
}

// automationTimeout bounds the wait for n runs with delay d to complete:
// generous, the delay plus 2 minutes plus 50 ms a run.
func automationTimeout(n int, d time.Duration) time.Duration {
	return d + 2*time.Minute + time.Duration(n)*50*time.Millisecond
}

// createAutomationTemplate creates and publishes the template the runs
// send, and returns its id.
func createAutomationTemplate(ctx context.Context, api *benchAPI) (string, error) {
	body, err := json.Marshal(map[string]any{
		"name": "bench welcome", "alias": "bench-welcome", "from": "Posthaste bench <onboarding@posthaste.test>",
		"subject": "Welcome, reader {{{N}}}", "html": "<p>Welcome, reader {{{N}}}.</p><p>Sent by go run ./bench.</p>",
		"text":      "Welcome, reader {{{N}}}. Sent by go run ./bench.",
		"variables": []map[string]any{{"key": "N", "type": "string"}},
	})
	if err != nil {
		return "", err
	}
	var t struct{ ID string }
	if err := api.call(ctx, "POST", "/templates", "application/json", strings.NewReader(string(body)), &t); err != nil {
		return "", err
	}
	var published map[string]any
	if err := api.call(ctx, "POST", "/templates/"+t.ID+"/publish", "", nil, &published); err != nil {
		return "", err
	}
	return t.ID, nil
}

// automationBody is the POST /automations body of an enabled automation:
// trigger on event -> delay d -> send_email of template, its variable N
// from the event's payload.
func automationBody(name, event string, d time.Duration, template string) ([]byte, error) {
	return json.Marshal(map[string]any{"name": name, "status": "enabled",
		"steps": []map[string]any{
			{"key": "start", "type": "trigger", "config": map[string]any{"event_name": event}},
			{"key": "wait", "type": "delay", "config": map[string]any{"duration": delayWords(d)}},
			{"key": "welcome", "type": "send_email", "config": map[string]any{
				"template": map[string]any{"id": template, "variables": map[string]any{"N": map[string]any{"var": "event.n"}}}}},
		},
		"connections": []map[string]any{{"from": "start", "to": "wait"}, {"from": "wait", "to": "welcome"}},
	})
}

// createBenchAutomation creates the automation automationBody describes
// and returns its id.
func createBenchAutomation(ctx context.Context, api *benchAPI, name, event string, d time.Duration, template string) (string, error) {
	body, err := automationBody(name, event, d, template)
	if err != nil {
		return "", err
	}
	var a struct{ ID string }
	if err := api.call(ctx, "POST", "/automations", "application/json", strings.NewReader(string(body)), &a); err != nil {
		return "", err
	}
	return a.ID, nil
}

// forEach calls fn for every i in [0, n) from conc goroutines. The first
// error cancels the context fn gets, stops the calls not yet made and is
// returned.
func forEach(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range max(1, min(conc, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// automationContact is the address of contact i.
func automationContact(i int) string { return "delivered+" + strconv.Itoa(i) + "@posthaste.test" }

// sendEvents sends event for the contacts 0..n-1 from conc clients, each
// with the payload {"n": "<i>"}, and checks that each started one run.
func sendEvents(ctx context.Context, api *benchAPI, event string, n, conc int) (eventSends, error) {
	res := eventSends{runs: make([]string, n), latencies: make([]time.Duration, n)}
	start := time.Now()
	err := forEach(ctx, n, conc, func(ctx context.Context, i int) error {
		body, err := json.Marshal(map[string]any{"event": event, "email": automationContact(i),
			"payload": map[string]any{"n": strconv.Itoa(i)}})
		if err != nil {
			return err
		}
		var sent struct{ Runs []string }
		t0 := time.Now()
		if err := api.call(ctx, "POST", "/events/send", "application/json", strings.NewReader(string(body)), &sent); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		res.latencies[i] = time.Since(t0)
		if len(sent.Runs) != 1 {
			return fmt.Errorf("event %s for %s started %d runs, want 1", event, automationContact(i), len(sent.Runs))
		}
		res.runs[i] = sent.Runs[0]
		return nil
	})
	if err != nil {
		return res, err
	}
	res.sent = rate{n: n, elapsed: time.Since(start)}
	slices.Sort(res.latencies)
	return res, nil
}

// runDetail is the part of GET /automations/<id>/runs/<run_id> the step
// reads.
type runDetail struct {
	ID     string
	Status string
	Error  *string
	Steps  []struct {
		Key       string
		Type      string
		Status    string
		Output    json.RawMessage
		StartedAt *string `json:"started_at"`
	}
}

// step returns the status, output and start of the run's first step of
// type typ ("" when it has none yet).
func (r runDetail) step(typ string) (status string, output json.RawMessage, started *string) {
	for _, s := range r.Steps {
		if s.Type == typ {
			return s.Status, s.Output, s.StartedAt
		}
	}
	return "", nil, nil
}

// timing reads a completed run: when its delay began and the email its
// send_email step sent.
func (r runDetail) timing() (runTiming, error) {
	t := runTiming{id: r.ID}
	status, _, started := r.step("delay")
	if status != "completed" || started == nil {
		return t, fmt.Errorf("run %s: its delay step is %q (started %v)", r.ID, status, started)
	}
	var err error
	if t.delayStarted, err = time.Parse(time.RFC3339Nano, *started); err != nil {
		return t, fmt.Errorf("run %s: its delay's started_at: %w", r.ID, err)
	}
	status, output, _ := r.step("send_email")
	var out struct {
		EmailID *string `json:"email_id"`
	}
	_ = json.Unmarshal(output, &out)
	if status != "completed" || out.EmailID == nil || *out.EmailID == "" {
		return t, fmt.Errorf("run %s: its send_email step is %q with output %s", r.ID, status, output)
	}
	t.emailID = *out.EmailID
	return t, nil
}

func getRun(ctx context.Context, api *benchAPI, automation, run string) (runDetail, error) {
	var r runDetail
	err := api.call(ctx, "GET", "/automations/"+automation+"/runs/"+run, "", nil, &r)
	return r, err
}

// collectRunTimings reads every run (completed) and its email's created_at,
// from conc clients.
func collectRunTimings(ctx context.Context, api *benchAPI, automation string, runs []string, conc int) ([]runTiming, error) {
	out := make([]runTiming, len(runs))
	err := forEach(ctx, len(runs), conc, func(ctx context.Context, i int) error {
		r, err := getRun(ctx, api, automation, runs[i])
		if err != nil {
			return err
		}
		t, err := r.timing()
		if err != nil {
			return err
		}
		var email struct {
			CreatedAt string `json:"created_at"`
		}
		if err := api.call(ctx, "GET", "/emails/"+t.emailID, "", nil, &email); err != nil {
			return err
		}
		if t.accepted, err = time.Parse(time.RFC3339Nano, email.CreatedAt); err != nil {
			return fmt.Errorf("email %s's created_at: %w", t.emailID, err)
		}
		out[i] = t
		return nil
	})
	return out, err
}

// waitAllWaiting returns once every run waits on its delay. The runs'
// rows exist, status running, as soon as each event send answers (the
// send records them; the outbox starts their workflows after), so GET
// /automations/<id>'s runs.running says nothing about the timers; a run
// waits once its delay step is recorded "waiting", which only GET
// /automations/<id>/runs/<run_id> shows. So the step first polls the last
// conc runs sent (their workflows start last, about) until they wait, then
// reads every run from conc clients, and again the ones that did not wait
// yet until none is left. When the last run began to wait is taken from
// dev's records afterwards (summarizeRuns), not from these reads, so their
// time does not count in the start rate. A run that ended, or whose delay
// completed (its timer fell due: the delay is too short), or still not
// waiting at due (the earliest a timer falls due) fails the step.
func waitAllWaiting(ctx context.Context, api *benchAPI, automation string, runs []string, conc int, due time.Time,
	logf func(string, ...any)) error {
	check := func(ctx context.Context, run string) (bool, error) {
		r, err := getRun(ctx, api, automation, run)
		if err != nil {
			return false, err
		}
		status, _, _ := r.step("delay")
		switch {
		case r.Status != "running":
			return false, fmt.Errorf("run %s is %s before its delay ended (error %v)", run, r.Status, r.Error)
		case status == "waiting":
			return true, nil
		case status != "":
			return false, fmt.Errorf("run %s's delay step is already %s: the delay is too short", run, status)
		}
		return false, nil
	}
	sweep := func(pending []string) ([]string, error) {
		var (
			mu    sync.Mutex
			still []string
		)
		err := forEach(ctx, len(pending), conc, func(ctx context.Context, i int) error {
			ok, err := check(ctx, pending[i])
			if err == nil && !ok {
				mu.Lock()
				still = append(still, pending[i])
				mu.Unlock()
			}
			return err
		})
		return still, err
	}
	pending := runs[max(0, len(runs)-conc):]
	gate := true
	lastLog := time.Now()
	for {
		still, err := sweep(pending)
		if err != nil {
			return err
		}
		switch {
		case gate && len(still) == 0:
			gate, pending = false, runs
			continue
		case !gate && len(still) == 0:
			return nil
		case time.Now().After(due):
			return fmt.Errorf("%d of the %d runs checked do not wait on their delay yet, and the first timer falls due: "+
				"the delay is too short", len(still), len(pending))
		}
		if !gate {
			pending = still
		}
		if time.Since(lastLog) >= 5*time.Second {
			logf("automations: %d of %d runs checked do not wait yet", len(still), len(pending))
			lastLog = time.Now()
		}
		if err := sleepCtx(ctx, automationPoll); err != nil {
			return err
		}
	}
}

// waitRunsCompleted polls GET /automations/<id> until n runs completed.
// It fails when a run failed or was cancelled, when the completed count
// holds still for 2 minutes after quietUntil (the first due time: nothing
// completes before it), or after timeout.
func waitRunsCompleted(ctx context.Context, api *benchAPI, automation string, n int, quietUntil time.Time,
	timeout time.Duration, logf func(string, ...any)) error {
	deadline := time.Now().Add(timeout)
	last, progressed, lastLog := -1, time.Now(), time.Now()
	for {
		var a struct{ Runs map[string]int }
		if err := api.call(ctx, "GET", "/automations/"+automation, "", nil, &a); err != nil {
			return err
		}
		now := time.Now()
		done := a.Runs["completed"]
		switch {
		case a.Runs["failed"] > 0 || a.Runs["cancelled"] > 0:
			return fmt.Errorf("automation %s: runs %v", automation, a.Runs)
		case done >= n:
			return nil
		case now.After(deadline):
			return fmt.Errorf("automation %s: runs %v after %s", automation, a.Runs, timeout)
		}
		if done != last || now.Before(quietUntil) {
			last, progressed = done, now
		}
		if now.Sub(progressed) > 2*time.Minute {
			return fmt.Errorf("automation %s made no progress for 2m: runs %v", automation, a.Runs)
		}
		if now.Sub(lastLog) >= 5*time.Second {
			logf("automations: runs %v", a.Runs)
			lastLog = now
		}
		if err := sleepCtx(ctx, automationPoll); err != nil {
			return err
		}
	}
}

// countAutomationRuns counts the AutomationRun workflows started since
// from through Temporal's visibility on dev's embedded server, which is
// written a moment after a start: it counts until at least n are seen and
// the count holds still for a second, for up to 30 seconds.
func countAutomationRuns(ctx context.Context, tc client.Client, from time.Time, n int) (int64, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", workflows.AutomationRunName,
		from.UTC().Format(time.RFC3339Nano))
	deadline := time.Now().Add(30 * time.Second)
	prev := int64(-1)
	for {
		r, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: q})
		if err != nil {
			return 0, fmt.Errorf("counting workflows (%s): %w", q, err)
		}
		count := r.GetCount()
		if (count >= int64(n) && count == prev) || time.Now().After(deadline) {
			return count, nil
		}
		prev = count
		if err := sleepCtx(ctx, time.Second); err != nil {
			return 0, err
		}
	}
}

// typeCounts lists the event types of a history with how often each
// occurs, in the order each first occurs.
func typeCounts(types []string) string {
	counts := map[string]int{}
	var order []string
	for _, t := range types {
		if counts[t] == 0 {
			order = append(order, t)
		}
		counts[t]++
	}
	parts := make([]string, len(order))
	for i, t := range order {
		parts[i] = fmt.Sprintf("%s %d", strings.TrimPrefix(t, "EVENT_TYPE_"), counts[t])
	}
	return strings.Join(parts, ", ")
}

// printAutomations prints the step's results.
func printAutomations(p func(string, ...any), r automationResult) {
	p("")
	p("automations: %d sandbox contacts delivered+<i>@posthaste.test (imported in %s) each sent the event %s "+
		"(POST /events/send, %d clients), each starting a run of trigger -> delay -> send_email "+
		"(a published template from onboarding@posthaste.test); a fresh posthaste dev",
		r.n, fmtDur(r.imported), automationEvent, r.conc)
	p("  pilot: %d runs with a %s delay: %.1f runs started/s (all waiting before its first timer fell due: %s), "+
		"lag p50 %s p99 %s", r.pilotN, fmtDur(r.pilotDelay), r.pilot.started.perSecond(),
		yesNo(r.pilot.lastWaiting(r.pilotStart).Before(r.pilot.firstDue)),
		fmtDur(r.pilot.lag(0.5)), fmtDur(r.pilot.lag(0.99)))
	p("  measured delay D = %s: %.0f x the time the pilot's rate needs for %d runs, + %s + %s a run",
		delayWords(r.delay), automationDelaySafety, r.n, automationDelayMargin, automationSweepPerRun)
	p("  events: %d sent in %s: %.1f/s, latency p50 %s p99 %s max %s", r.events.sent.n, fmtDur(r.events.sent.elapsed),
		r.events.sent.perSecond(), fmtDur(quantile(r.events.latencies, 0.5)), fmtDur(quantile(r.events.latencies, 0.99)),
		fmtDur(quantile(r.events.latencies, 1)))
	p("  runs started: all %d waiting on the delay %s after the first event: %.1f runs/s (%.2f x the sandbox e2e emails/s)",
		r.times.started.n, fmtDur(r.times.started.elapsed), r.times.started.perSecond(), ratio(r.times.started, r.e2e))
	p("  posthaste dev VmRSS: %.0f MB when ready, %.0f MB idle before the events, %.0f MB with %d runs waiting: %+.0f MB "+
		"(VmHWM then %.0f MB)", mb(r.rssReady), mb(r.rssIdle), mb(r.rssWaiting), r.n, mb(r.memoryGrowth()), mb(r.hwmWaiting))
	if len(r.times.lags) == 0 {
		return
	}
	p("  timers: the first fell due %s after the first event, the last %s later; the last run began to wait %s before the first fell due",
		fmtDur(r.times.firstDue.Sub(r.sendStart)), fmtDur(r.times.lastDue.Sub(r.times.firstDue)),
		fmtDur(r.times.firstDue.Sub(r.times.lastWaiting(r.sendStart))))
	p("  lag from due time to email accepted: p50 %s p99 %s max %s", fmtDur(r.times.lag(0.5)), fmtDur(r.times.lag(0.99)),
		fmtDur(r.times.lag(1)))
	e2e := "no sandbox end-to-end rate"
	if t := r.e2eTime(); t > 0 {
		e2e = fmt.Sprintf("%d emails at the sandbox end-to-end rate (%.1f/s, %s) take %s: %.2f x", r.n, r.e2e.perSecond(),
			r.e2eFrom, fmtDur(t), r.times.finish.Seconds()/t.Seconds())
	}
	p("  last email accepted %s after the first timer fell due (%.1f emails/s); %s", fmtDur(r.times.finish),
		rate{n: len(r.times.lags), elapsed: r.times.finish}.perSecond(), e2e)
	p("  workflows: %d AutomationRun started since the first event (Temporal visibility); each email has its SendEmail",
		r.workflows)
	if len(r.history.types) > 0 {
		p("  history of %s: %d events: %s", r.history.workflowID, len(r.history.types), typeCounts(r.history.types))
	}
	if len(r.lastHist.types) > 0 {
		p("  history of the last accepted, %s: %d events: %s", r.lastHist.workflowID, len(r.lastHist.types),
			typeCounts(r.lastHist.types))
	}
}
