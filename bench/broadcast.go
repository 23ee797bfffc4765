package main

// The broadcast step: for each size (1,000 and 10,000 contacts) a fresh
// `posthaste dev`, started with POSTHASTE_BROADCAST_RATE far above what the
// pipeline can do so that the team's pace never binds (the step measures
// the pipeline's capacity), imports that many sandbox contacts
// delivered+<i>@posthaste.test into a new segment through POST
// /contacts/imports, then POST /broadcasts creates and sends a broadcast to
// the segment from the sandbox sender, its subject and HTML personalised
// per contact ({{{FIRST_NAME|there}}}; one contact in ten has no first
// name). The step polls GET /broadcasts/<id> until counts.delivered is the
// size and prints:
//
//   - emails per second from the send request to the poll that saw the
//     last delivered, and the machine's busy CPU time per email over that
//     time (cpu.go; the single-send run it is compared with prints its own);
//   - workflow starts per 100 emails: the SendBatch runs of the broadcast
//     (one per chunk of 100 contacts) and those plus the Broadcast
//     workflow's own runs (it continues as new every 100 chunks);
//   - the dev process's VmHWM, its peak RSS since it started, import and
//     broadcast included (each size has a dev of its own, so the peak is
//     that run's), and the ratio of the peaks at 10,000 and at 1,000.
//
// The broadcast's rate at 10,000 is compared with the single-send sandbox
// end-to-end rate of the same run: the full run's (measure), or, with
// -broadcast, one measured by the same code (measureE2E) on the 10,000
// dev right after its broadcast was delivered and its VmHWM read, so that
// the single sends do not count in that dev's peak.
//
//	GOTOOLCHAIN=local go run ./bench -broadcast    # this step only

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows"
)

// broadcastRateSetting is the POSTHASTE_BROADCAST_RATE (emails a second
// per team) of the step's devs: high enough that the pace never binds.
const broadcastRateSetting = 1_000_000

// broadcastSizes are the audiences of the step, smaller first; the rate
// and the starts are the larger one's, the memory aim compares the two.
var broadcastSizes = [2]int{1_000, 10_000}

// broadcastPoll is how often the step reads the broadcast's counts.
const broadcastPoll = 100 * time.Millisecond

// broadcastRun is one broadcast of the step, on a dev of its own.
type broadcastRun struct {
	n         int
	imported  time.Duration // the import of the n contacts, upload to completed
	sent      rate          // n delivered, send request to the poll that saw the last
	batches   int64         // SendBatch workflows started for it
	runs      int64         // runs of its Broadcast workflow
	hwmReady  int64         // dev's VmHWM when it was ready, bytes
	hwm       int64         // dev's VmHWM once the broadcast was delivered, bytes
	countedBy string        // where batches and runs come from
}

// startsPer100 are the SendBatch starts and all the starts (the
// Broadcast workflow's runs included) per 100 emails.
func (r broadcastRun) startsPer100() (batches, all float64) {
	if r.n == 0 {
		return 0, 0
	}
	return float64(r.batches) * 100 / float64(r.n), float64(r.batches+r.runs) * 100 / float64(r.n)
}

// broadcastResult is the step's measurements.
type broadcastResult struct {
	setting int          // POSTHASTE_BROADCAST_RATE of the devs
	small   broadcastRun // at broadcastSizes[0]
	large   broadcastRun // at broadcastSizes[1]
	e2e     rate         // the single-send sandbox end-to-end rate of the same run
	e2eFrom string       // which dev measured e2e
}

// memoryRatio is the peak at the larger size over the peak at the smaller.
func (b broadcastResult) memoryRatio() float64 {
	if b.small.hwm == 0 {
		return 0
	}
	return float64(b.large.hwm) / float64(b.small.hwm)
}

// runBroadcastOnly runs only the broadcast step, the single-send sandbox
// end-to-end rate it is compared with measured on its larger dev.
func runBroadcastOnly(ctx context.Context, bin string, c counts, out, progress io.Writer) error {
	return inRoot(ctx, bin, "posthaste bench -broadcast", out, progress,
		func(p, logf func(string, ...any), root, bin string) error {
			res, err := measureBroadcasts(ctx, bin, root, &c, p, logf)
			if err != nil {
				return err
			}
			printBroadcast(p, res)
			printTargets(p, broadcastTargets(res))
			return nil
		})
}

// measureBroadcasts runs the step at both sizes, each on a fresh dev under
// root. With e2e set it also measures the single-send sandbox end-to-end
// rate with its counts on the larger dev, after that dev's peak memory was
// read; otherwise the caller sets res.e2e from its own run.
func measureBroadcasts(ctx context.Context, bin, root string, e2e *counts, p func(string, ...any),
	logf func(string, ...any)) (broadcastResult, error) {
	res := broadcastResult{setting: broadcastRateSetting}
	for i, n := range broadcastSizes {
		dir := filepath.Join(root, "broadcast-"+strconv.Itoa(n))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return res, err
		}
		logf("broadcast: starting a fresh posthaste dev for %d contacts", n)
		dev, err := startDev(ctx, bin, dir, logf, "POSTHASTE_BROADCAST_RATE="+strconv.Itoa(broadcastRateSetting))
		if err != nil {
			return res, err
		}
		run, err := measureBroadcast(ctx, dev, n, logf)
		if err == nil && i == len(broadcastSizes)-1 && e2e != nil {
			api := newAPIClient(dev.base, dev.creds.APIKey)
			res.e2e, _, err = measureE2E(ctx, api, newScraper(api.http, dev.base), *e2e, p, logf)
			res.e2eFrom = fmt.Sprintf("the %d-contact dev, after its broadcast", n)
		}
		logf("broadcast: stopping the dev of %d contacts", n)
		if serr := dev.stop(); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			return res, fmt.Errorf("broadcast to %d contacts: %w", n, err)
		}
		if i == 0 {
			res.small = run
		} else {
			res.large = run
		}
	}
	return res, nil
}

// measureBroadcast imports n contacts into a new segment of dev, sends a
// broadcast to it and waits until every email was delivered.
func measureBroadcast(ctx context.Context, dev *devProcess, n int, logf func(string, ...any)) (broadcastRun, error) {
	run := broadcastRun{n: n}
	pid := dev.cmd.Process.Pid
	var err error
	if _, run.hwmReady, err = readMemory(pid); err != nil {
		return run, fmt.Errorf("reading dev's memory: %w", err)
	}
	api := &benchAPI{hc: &http.Client{Timeout: 2 * time.Minute}, base: dev.base, key: dev.creds.APIKey}

	segment, imported, err := importContacts(ctx, api, n, "broadcast", logf)
	if err != nil {
		return run, err
	}
	run.imported = imported

	body, err := json.Marshal(map[string]any{
		"name":       fmt.Sprintf("bench %d", n),
		"segment_id": segment,
		"from":       "Posthaste bench <onboarding@posthaste.test>",
		"subject":    "News for {{{FIRST_NAME|there}}}",
		"html": `<p>Hi {{{FIRST_NAME|there}}},</p><p>a broadcast sent by go run ./bench.</p>` +
			`<p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>`,
		"send": true,
	})
	if err != nil {
		return run, err
	}
	logf("broadcast: sending to %d contacts", n)
	var b struct{ ID string }
	sendStart, cpu := time.Now(), startCPU()
	if err := api.call(ctx, "POST", "/broadcasts", "application/json", strings.NewReader(string(body)), &b); err != nil {
		return run, err
	}
	done, err := waitBroadcastDelivered(ctx, api, b.ID, n, broadcastTimeout(n), logf)
	if err != nil {
		return run, err
	}
	run.sent = rate{n: n, elapsed: done.Sub(sendStart), busy: cpu.used()}
	if _, run.hwm, err = readMemory(pid); err != nil {
		return run, fmt.Errorf("reading dev's memory: %w", err)
	}

	tc, err := dialTemporal(ctx, dev.temporal)
	if err != nil {
		return run, err
	}
	defer tc.Close()
	run.batches, run.runs, err = countBroadcastStarts(ctx, tc, b.ID, n, sendStart, done)
	run.countedBy = "Temporal visibility"
	return run, err
}

// broadcastTimeout is how long the step waits for n emails to be
// delivered: generous, 2 minutes plus 50 ms an email.
func broadcastTimeout(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*50*time.Millisecond
}

// importContacts imports n sandbox contacts (writeBroadcastAudience) into
// a new segment through POST /contacts/imports and waits until the import
// completed; it returns the segment's id and how long the import took,
// upload to completed. step names the caller in the progress lines.
func importContacts(ctx context.Context, api *benchAPI, n int, step string, logf func(string, ...any)) (string, time.Duration, error) {
	var seg struct{ ID string }
	if err := api.call(ctx, "POST", "/segments", "application/json",
		strings.NewReader(`{"name":"bench readers"}`), &seg); err != nil {
		return "", 0, err
	}
	logf("%s: importing %d contacts into segment %s", step, n, seg.ID)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeBroadcastImportForm(mw, n, seg.ID)) }()
	start := time.Now()
	var imp struct {
		ID     string
		Status string
		Error  any
		Counts map[string]any
	}
	if err := api.call(ctx, "POST", "/contacts/imports", mw.FormDataContentType(), pr, &imp); err != nil {
		return "", 0, err
	}
	for imp.Status != store.ImportCompleted {
		if imp.Status == store.ImportFailed {
			return "", 0, fmt.Errorf("import %s failed: %v", imp.ID, imp.Error)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return "", 0, err
		}
		if err := api.call(ctx, "GET", "/contacts/imports/"+imp.ID, "", nil, &imp); err != nil {
			return "", 0, err
		}
	}
	took := time.Since(start)
	if created := imp.Counts["created"]; created != float64(n) {
		return "", 0, fmt.Errorf("import %s created %v contacts of %d: %v", imp.ID, created, n, imp.Counts)
	}
	return seg.ID, took, nil
}

// broadcastCounts is the part of GET /broadcasts/<id> the step reads.
type broadcastCounts struct {
	Status       string
	StatusReason *string `json:"status_reason"`
	Counts       struct {
		Recipients, Queued, Sent, Delivered, Failed, Suppressed, Canceled, Bounced int64
	}
}

func (b broadcastCounts) String() string {
	s := fmt.Sprintf("status %s, recipients %d, queued %d, sent %d, delivered %d, failed %d, suppressed %d, "+
		"bounced %d, canceled %d", b.Status, b.Counts.Recipients, b.Counts.Queued, b.Counts.Sent, b.Counts.Delivered,
		b.Counts.Failed, b.Counts.Suppressed, b.Counts.Bounced, b.Counts.Canceled)
	if b.StatusReason != nil {
		s += " (" + *b.StatusReason + ")"
	}
	return s
}

// waitBroadcastDelivered polls the broadcast until n of its emails were
// delivered and returns when the poll that saw it was answered. It fails
// when the broadcast can no longer get there (canceled, or every email
// final with fewer delivered), is paused, or makes no progress for two
// minutes, or after timeout.
func waitBroadcastDelivered(ctx context.Context, api *benchAPI, id string, n int, timeout time.Duration,
	logf func(string, ...any)) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last broadcastCounts
	progressed, lastLog := time.Now(), time.Now()
	for {
		var b broadcastCounts
		if err := api.call(ctx, "GET", "/broadcasts/"+id, "", nil, &b); err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		if b.Counts.Delivered >= int64(n) {
			return now, nil
		}
		final := b.Counts.Delivered + b.Counts.Failed + b.Counts.Suppressed + b.Counts.Bounced + b.Counts.Canceled
		switch {
		case b.Status == store.BroadcastCanceled, b.Status == store.BroadcastPaused:
			return time.Time{}, fmt.Errorf("broadcast %s stopped: %s", id, b)
		case b.Status == store.BroadcastSent && final == b.Counts.Recipients:
			return time.Time{}, fmt.Errorf("broadcast %s ended with %d of %d delivered: %s", id, b.Counts.Delivered, n, b)
		}
		if b.Counts != last.Counts || b.Status != last.Status {
			progressed = now
		}
		last = b
		if now.Sub(progressed) > 2*time.Minute {
			return time.Time{}, fmt.Errorf("broadcast %s made no progress for 2m: %s", id, b)
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("broadcast %s not delivered after %s: %s", id, timeout, b)
		}
		if now.Sub(lastLog) >= 5*time.Second {
			logf("broadcast: %s", b)
			lastLog = now
		}
		if err := sleepCtx(ctx, broadcastPoll); err != nil {
			return time.Time{}, err
		}
	}
}

// countBroadcastStarts counts the workflows started for the broadcast
// through Temporal's visibility on dev's embedded server, whose SQLite
// visibility store answers CountWorkflowExecutions with queries on
// WorkflowType, WorkflowId and StartTime: the SendBatch workflows
// started from the send request until the last email was delivered (the
// dev is the step's own and nothing else sends batches on it meanwhile, so
// they are the broadcast's chunks; the emails' batch_id in PostgreSQL
// would say the same but dev's private cluster has no address the bench
// knows) and the runs of workflow broadcast/<id>, continue-as-new runs
// included. Visibility is written a moment after a start, so it counts
// until at least one batch per 100 emails is seen and the two counts hold
// still for a second, for up to 30 seconds.
func countBroadcastStarts(ctx context.Context, tc client.Client, id string, n int, from, to time.Time) (batches, runs int64, err error) {
	count := func(q string) (int64, error) {
		r, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: q})
		if err != nil {
			return 0, fmt.Errorf("counting workflows (%s): %w", q, err)
		}
		return r.GetCount(), nil
	}
	batchQ := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s' AND StartTime <= '%s'", workflows.SendBatchName,
		from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	runQ := fmt.Sprintf("WorkflowId = '%s'", workflows.BroadcastWorkflowID(id))
	want := int64(math.Ceil(float64(n) / 100))
	deadline := time.Now().Add(30 * time.Second)
	var prevB, prevR int64 = -1, -1
	for {
		if batches, err = count(batchQ); err != nil {
			return 0, 0, err
		}
		if runs, err = count(runQ); err != nil {
			return 0, 0, err
		}
		if (batches >= want && runs >= 1 && batches == prevB && runs == prevR) || time.Now().After(deadline) {
			return batches, runs, nil
		}
		prevB, prevR = batches, runs
		if err := sleepCtx(ctx, time.Second); err != nil {
			return 0, 0, err
		}
	}
}

// printBroadcast prints the step's results.
func printBroadcast(p func(string, ...any), res broadcastResult) {
	p("")
	p("broadcast: POST /broadcasts send=true to a segment of sandbox contacts delivered+<i>@posthaste.test, "+
		"personalised subject and HTML, a fresh posthaste dev per size, POSTHASTE_BROADCAST_RATE=%d (the pace does not bind)",
		res.setting)
	for _, r := range []broadcastRun{res.small, res.large} {
		b, all := r.startsPer100()
		p("  %6d contacts: imported in %s; send request to last delivered %s: %.1f emails/s",
			r.n, fmtDur(r.imported), fmtDur(r.sent.elapsed), r.sent.perSecond())
		if t := r.sent.cpuText("email"); t != "" {
			p("         %s", t)
		}
		p("         workflow starts (%s): %d SendBatch, %d Broadcast run(s)", r.countedBy, r.batches, r.runs)
		p("         SendBatch starts per 100 emails: %.2f; all starts per 100 emails (incl. the broadcast's own): %.2f",
			b, all)
		p("         posthaste dev VmHWM (peak RSS since it started): %.0f MB when ready, %.0f MB after the broadcast",
			mb(r.hwmReady), mb(r.hwm))
	}
	p("  peak memory %d / %d contacts: %.0f / %.0f MB = %.2f", res.large.n, res.small.n, mb(res.large.hwm),
		mb(res.small.hwm), res.memoryRatio())
	p("  single-send sandbox end to end (%s): %.1f emails/s; broadcast %d / single send: %.2f",
		res.e2eFrom, res.e2e.perSecond(), res.large.n, ratio(res.large.sent, res.e2e))
	if res.large.sent.perItem() > 0 && res.e2e.perItem() > 0 {
		p("  machine CPU per email, broadcast %d / single send: %s / %s = %.2f", res.large.n,
			fmtDur(res.large.sent.perItem()), fmtDur(res.e2e.perItem()),
			res.large.sent.perItem().Seconds()/res.e2e.perItem().Seconds())
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// benchAPI calls dev's API with JSON answers.
type benchAPI struct {
	hc        *http.Client
	base, key string
}

// call sends a request and decodes a 2xx answer into out.
func (a *benchAPI) call(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("reading the answer to %s %s: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %.300s", method, path, res.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
	}
	return nil
}

// writeBroadcastImportForm writes the multipart form of an import of n
// contacts into segment, then closes it.
func writeBroadcastImportForm(mw *multipart.Writer, n int, segment string) error {
	seg, err := json.Marshal([]string{segment})
	if err != nil {
		return err
	}
	if err := mw.WriteField("segments", string(seg)); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("file", "readers.csv")
	if err != nil {
		return err
	}
	if err := writeBroadcastAudience(fw, n); err != nil {
		return err
	}
	return mw.Close()
}

// writeBroadcastAudience writes a CSV of n sandbox contacts,
// delivered+<i>@posthaste.test with first name Reader<i>, except every
// tenth (i%10 == 9), who has none and gets the fallback.
func writeBroadcastAudience(w io.Writer, n int) error {
	if n < 0 {
		return errors.New("negative audience")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString("email,first_name\n"); err != nil {
		return err
	}
	var line []byte
	for i := range n {
		line = append(line[:0], "delivered+"...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, "@posthaste.test,"...)
		if i%10 != 9 {
			line = append(line, "Reader"...)
			line = strconv.AppendInt(line, int64(i), 10)
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
