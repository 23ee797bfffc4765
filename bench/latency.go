package main

// The latency step, time to inbox: how long one email takes from the
// start of its request until the bench's MX has read it whole (its DATA,
// delivery.go), sent from the verified sender.test (DKIM-signed) through
// the bench's DNS server, like the real delivery step. Each email has a
// recipient of its own (lat-<row>-<i>@rcpt.test), by which the MX times
// it (arrivals); each row starts once dev has delivered everything
// accepted before it, so that no row shares dev with another's mail.
//
// Rows, each with its p50, p90, p99 and max:
//
//   - the API one at a time (POST /emails on a kept-alive connection,
//     the next request once the previous email reached the MX);
//   - the API in two open-loop streams, at 25 % and 50 % of a real
//     delivery rate measured in the same run (the pairs' median; with
//     -latency a real delivery run of its own): emails sent on a fixed
//     schedule whatever the answers, each in a goroutine of its own,
//     timed from its scheduled send time;
//   - the same three through a throwaway Postfix that relays to the same
//     MX (postfix.go; TOOLS.md's latency reference), submitted over
//     SMTP connections kept open, timed from MAIL FROM (one at a time) or
//     from the scheduled time (streams); skipped, saying why, where
//     Postfix cannot run;
//   - the engine's floor: the bare one-activity workflow (bare.go),
//     started eagerly from this process, whose worker runs on the same
//     client, from the start request to its result;
//   - SMTP submission one at a time through dev's gateway (implicit TLS,
//     AUTH once), from MAIL FROM;
//   - a probe during a burst: -latency-burst emails to one bulk recipient
//     at concurrency 16 and, once half of them were accepted, one probe
//     email, with how much of the burst had reached the MX by then and
//     when its last email did;
//   - reported, not judged: open and click tracking on for the domain
//     (PATCH /domains/{id}, restored afterwards) with an HTML body and a
//     link, a 1 MB attachment, and one POST /emails/batch of 100 emails
//     timed from the batch request's start.
//
// The targets (targets.go) compare the API's and the gateway's idle p50
// with Postfix's and with the bare workflow's, the idle p50 with the
// loaded ones, and the p99 at 50 % with Postfix's at 50 %.
//
//	GOTOOLCHAIN=local go run ./bench -latency    # this step only

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/smtp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// latencyKey is the value of chaosKeyHeader in every message of the
	// step, so that the MX counts them as the bench's.
	latencyKey  = "bench/latency"
	latencyFrom = "bench@" + chaosSenderDomain
	// latencyWarmup emails (or workflows) go first, unmeasured, in each
	// one-at-a-time row: the connection is open and the paths are warm.
	latencyWarmup = 5
	// latencyAttachment is the size of the attachment row's attachment.
	latencyAttachment = 1 << 20
	// latencyBatch is the size of the batch row's batch.
	latencyBatch = 100
)

// latencyLoads are the streams' rates as fractions of the reference rate.
var latencyLoads = [2]float64{0.25, 0.50}

// latencyStream is one open-loop stream: n emails at perSec.
type latencyStream struct {
	load   float64 // fraction of the reference rate
	perSec float64
	n      int
}

func (s latencyStream) percent() int { return int(math.Round(s.load * 100)) }

// latencyStreams derives the streams from the reference rate (emails/s):
// each sends n emails, or when n is 0 as many as its rate sends in d.
func latencyStreams(reference float64, n int, d time.Duration) ([2]latencyStream, error) {
	var out [2]latencyStream
	if reference <= 0 || math.IsNaN(reference) || math.IsInf(reference, 0) {
		return out, fmt.Errorf("no real delivery rate to derive the streams' rates from (%v emails/s)", reference)
	}
	for i, load := range latencyLoads {
		per := load * reference
		count := n
		if count <= 0 {
			count = max(1, int(math.Round(per*d.Seconds())))
		}
		out[i] = latencyStream{load: load, perSec: per, n: count}
	}
	return out, nil
}

// scheduledAt is when email i of an open-loop stream that began at start
// is due: i / perSec later.
func scheduledAt(start time.Time, i int, perSec float64) time.Time {
	return start.Add(time.Duration(float64(i) / perSec * float64(time.Second)))
}

// latencyStats are a row's latencies, sorted.
type latencyStats struct{ sorted []time.Duration }

// statsOf sorts a copy of lat.
func statsOf(lat []time.Duration) latencyStats {
	return latencyStats{sorted: slices.Sorted(slices.Values(lat))}
}

func (s latencyStats) n() int                     { return len(s.sorted) }
func (s latencyStats) at(q float64) time.Duration { return percentile(s.sorted, q) }

// latencyRow is one row of the step.
type latencyRow struct {
	name    string
	offered float64 // emails/s of an open-loop stream; 0 one at a time
	stats   latencyStats
	// signed and copies count what reached the MX: copies DKIM-signed
	// d=chaosSenderDomain and all copies (n when each arrived once; 0
	// for the bare workflows, which send nothing).
	signed, copies int
	signing        bool   // dev's mail, which must arrive signed; not Postfix's
	note           string // printed below the row
}

// probeResult is the probe row: one email sent halfway through a burst.
type probeResult struct {
	burst    int           // emails of the burst
	conc     int           // its concurrency
	sentAt   time.Duration // the probe's request, after the burst's first
	accepted int           // burst emails accepted when the probe was sent
	// atMXSent and atMXArrived are the burst emails at the MX when the
	// probe was sent and when it arrived.
	atMXSent, atMXArrived int
	latency               time.Duration // the probe's, request to MX
	signed                bool
	burstAccepted         time.Duration // first request to the burst's last answer (or to its first failure)
	burstLast             time.Duration // first request to the burst's last email at the MX
}

// latencyReference is what the step's streams derive from, and the
// verified sender domain it sends from.
type latencyReference struct {
	real     rate   // real delivery
	from     string // which run measured it, for the output
	domainID string // chaosSenderDomain's
}

// latencyResult is the step's measurements.
type latencyResult struct {
	ref         latencyReference
	streams     [2]latencyStream
	apiIdle     latencyRow
	apiLoad     [2]latencyRow
	postfixIdle latencyRow
	postfixLoad [2]latencyRow
	postfixSkip string // why the Postfix rows did not run
	bare        latencyRow
	smtpIdle    latencyRow
	probe       probeResult
	reported    []latencyRow // not judged
}

// arrivals records, per recipient, when its email started (its request,
// its MAIL FROM or its scheduled send time) and when each copy reached
// the bench's MX. It is safe for concurrent use.
type arrivals struct {
	mu     sync.Mutex
	byRcpt map[string]*arrival
}

type arrival struct {
	start  time.Time
	at     []time.Time   // each copy's arrival, in order
	signed int           // copies DKIM-signed d=chaosSenderDomain
	first  chan struct{} // closed at the first copy
}

func newArrivals() *arrivals { return &arrivals{byRcpt: map[string]*arrival{}} }

// entry returns rcpt's record, made on first use; a.mu is held.
func (a *arrivals) entry(rcpt string) *arrival {
	rcpt = strings.ToLower(rcpt)
	e, ok := a.byRcpt[rcpt]
	if !ok {
		e = &arrival{first: make(chan struct{})}
		a.byRcpt[rcpt] = e
	}
	return e
}

// start records when rcpt's email started.
func (a *arrivals) start(rcpt string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entry(rcpt).start = t
}

// arrived records a message that reached the MX for rcpts at at.
func (a *arrivals) arrived(rcpts []string, at time.Time, signed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range rcpts {
		e := a.entry(r)
		e.at = append(e.at, at)
		if signed {
			e.signed++
		}
		if len(e.at) == 1 {
			close(e.first)
		}
	}
}

// count returns the copies that reached rcpt, and how many of them had
// arrived by t (all of them for the zero t).
func (a *arrivals) count(rcpt string, t time.Time) (all, by int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(rcpt)
	if t.IsZero() {
		return len(e.at), len(e.at)
	}
	for _, at := range e.at {
		if !at.After(t) {
			by++
		}
	}
	return len(e.at), by
}

// times returns when rcpt's email started and when its first and last
// copies arrived (zero when none did).
func (a *arrivals) times(rcpt string) (start, first, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(rcpt)
	if len(e.at) == 0 {
		return e.start, time.Time{}, time.Time{}
	}
	return e.start, e.at[0], slices.MaxFunc(e.at, time.Time.Compare)
}

// wait returns once a copy of each of rcpts' emails has arrived, in
// order; it fails when one does not arrive within stall of the previous
// one (or of the call).
func (a *arrivals) wait(ctx context.Context, rcpts []string, stall time.Duration) error {
	for _, r := range rcpts {
		a.mu.Lock()
		first := a.entry(r).first
		a.mu.Unlock()
		t := time.NewTimer(stall)
		select {
		case <-first:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
			got := 0
			for _, r := range rcpts {
				if n, _ := a.count(r, time.Time{}); n > 0 {
					got++
				}
			}
			return fmt.Errorf("no email to %s at the MX within %s (%d of %d arrived)", r, stall, got, len(rcpts))
		}
	}
	return nil
}

// waitCount polls until n copies reached rcpt; it fails when the count
// does not move for stall.
func (a *arrivals) waitCount(ctx context.Context, rcpt string, n int, stall time.Duration) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last, lastMove := -1, time.Now()
	for {
		got, _ := a.count(rcpt, time.Time{})
		now := time.Now()
		switch {
		case got >= n:
			return nil
		case got != last:
			last, lastMove = got, now
		case now.Sub(lastMove) > stall:
			return fmt.Errorf("%d of %d emails to %s at the MX, none more for %s", got, n, rcpt, stall)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// row returns the row name of rcpts' emails: each one's latency from its
// start to its first copy's arrival, and what reached the MX.
func (a *arrivals) row(name string, offered float64, rcpts []string) latencyRow {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := latencyRow{name: name, offered: offered, signing: true}
	lat := make([]time.Duration, 0, len(rcpts))
	for _, rcpt := range rcpts {
		e := a.entry(rcpt)
		if len(e.at) > 0 {
			lat = append(lat, e.at[0].Sub(e.start))
		}
		r.signed += e.signed
		r.copies += len(e.at)
	}
	r.stats = statsOf(lat)
	return r
}

// latencyRcpts returns n recipients of row tag: lat-<tag>-<i>@rcpt.test.
func latencyRcpts(tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("lat-%s-%d@%s", tag, i+1, deliveryRcptDomain)
	}
	return out
}

// latencyEmail is the POST /emails body of an email to rcpt, with the
// fields of extra added or replacing the defaults.
func latencyEmail(rcpt string, extra map[string]any) map[string]any {
	m := map[string]any{
		"from":    "Bench <" + latencyFrom + ">",
		"to":      rcpt,
		"subject": "posthaste bench, latency",
		"text":    "An email timed by go run ./bench from its request to a loopback MX.",
		"headers": map[string]string{chaosKeyHeader: latencyKey},
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// latencyMessage is the SMTP message of an email to rcpt.
func latencyMessage(rcpt string) []byte {
	return []byte("From: Bench <" + latencyFrom + ">\r\nTo: <" + rcpt + ">\r\nSubject: posthaste bench, latency\r\n" +
		chaosKeyHeader + ": " + latencyKey + "\r\n\r\nAn email timed by go run ./bench from its MAIL FROM to a loopback MX.\r\n")
}

// latencySend sends one email to rcpt, calling begin just before its
// request (or MAIL FROM) goes out, and returns once it was accepted.
type latencySend func(ctx context.Context, rcpt string, begin func()) error

// latencyStep is the step on one dev.
type latencyStep struct {
	dev      *devProcess
	side     *deliverySide
	c        counts
	domainID string // chaosSenderDomain's
	api      *chaosClient
	m        *scraper
	rec      *arrivals
	p, logf  func(string, ...any)
}

// runLatencyOnly runs only the latency step: a real delivery run of
// c.latencyReal emails first, whose rate the streams derive from.
func runLatencyOnly(ctx context.Context, bin string, c counts, out, progress io.Writer) error {
	return inRoot(ctx, bin, "posthaste bench -latency", out, progress, func(p, logf func(string, ...any), root, bin string) error {
		return withDeliveryDev(ctx, bin, root, p, logf, func(dev *devProcess, side *deliverySide) error {
			api := newAPIClient(dev.base, dev.creds.APIKey)
			rr, err := measureRealDelivery(ctx, api, dev, side, c.latencyReal, c.conc, p, logf)
			if err != nil {
				return fmt.Errorf("real delivery: %w", err)
			}
			ref := latencyReference{real: rr.rate, domainID: rr.domainID,
				from: fmt.Sprintf("this mode's own real delivery run of %d emails at c=%d, above", c.latencyReal, c.conc)}
			res, err := measureLatency(ctx, dev, side, c, ref, p, logf)
			if err != nil {
				return fmt.Errorf("latency: %w", err)
			}
			printLatency(p, res)
			printTargets(p, latencyTargets(res))
			return nil
		})
	})
}

// measureLatency runs the step's rows on dev, one after the other.
func measureLatency(ctx context.Context, dev *devProcess, side *deliverySide, c counts, ref latencyReference,
	p, logf func(string, ...any)) (latencyResult, error) {
	res := latencyResult{ref: ref}
	var err error
	if res.streams, err = latencyStreams(ref.real.perSecond(), c.latencyStream, c.latencyStreamFor); err != nil {
		return res, err
	}
	api := newChaosClient(dev.base, dev.creds.APIKey)
	s := &latencyStep{dev: dev, side: side, c: c, domainID: ref.domainID, api: api, m: newScraper(api.http, dev.base), rec: newArrivals(), p: p, logf: logf}
	side.watcher.Store(s.rec)
	defer side.watcher.Store(nil)

	// The API, idle and in two streams.
	if res.apiIdle, err = s.oneAtATime(ctx, "api, one at a time", "api", c.latencySerial, s.postEmail(nil)); err != nil {
		return res, err
	}
	for i, st := range res.streams {
		name := fmt.Sprintf("api, open loop at %d %%", st.percent())
		if res.apiLoad[i], err = s.openLoop(ctx, name, fmt.Sprintf("api%d", st.percent()), st, s.postEmail(nil)); err != nil {
			return res, err
		}
	}

	// Postfix relaying to the same MX.
	if why := postfixUnavailable(); why != "" {
		res.postfixSkip = why
	} else if err := s.postfixRows(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.postfixSkip = err.Error()
		res.postfixIdle, res.postfixLoad = latencyRow{}, [2]latencyRow{}
	}

	if res.bare, err = s.bareRow(ctx); err != nil {
		return res, err
	}
	if res.smtpIdle, err = s.smtpRow(ctx); err != nil {
		return res, err
	}
	if res.probe, err = s.probeRow(ctx); err != nil {
		return res, err
	}
	if res.reported, err = s.reportedRows(ctx); err != nil {
		return res, err
	}
	return res, s.quiet(ctx)
}

// quiet waits until dev has delivered every email it accepted so far.
func (s *latencyStep) quiet(ctx context.Context) error {
	cur, err := s.m.scrape(ctx)
	if err != nil {
		return err
	}
	if _, err := s.m.waitDelivered(ctx, cur.accepted, 50*time.Millisecond, s.logf); err != nil {
		return fmt.Errorf("waiting for dev to deliver what it accepted: %w", err)
	}
	return nil
}

// post sends body to the API and fails unless the answer is 200.
func (s *latencyStep) post(ctx context.Context, path string, body []byte) (apiAnswer, error) {
	a, err := s.api.do(ctx, http.MethodPost, path, body, nil)
	if err != nil {
		return a, fmt.Errorf("POST %s: %w", path, err)
	}
	if a.status != http.StatusOK {
		return a, fmt.Errorf("POST %s: status %d: %.300s", path, a.status, a.body)
	}
	return a, nil
}

// postEmail sends emails through POST /emails, with extra's fields.
func (s *latencyStep) postEmail(extra map[string]any) latencySend {
	return func(ctx context.Context, rcpt string, begin func()) error {
		body, err := json.Marshal(latencyEmail(rcpt, extra))
		if err != nil {
			return err
		}
		begin()
		_, err = s.post(ctx, "/emails", body)
		return err
	}
}

// oneAtATime is a row of n emails sent one after the other through send,
// each once the previous one reached the MX, after latencyWarmup
// unmeasured ones.
func (s *latencyStep) oneAtATime(ctx context.Context, name, tag string, n int, send latencySend) (latencyRow, error) {
	if err := s.quiet(ctx); err != nil {
		return latencyRow{}, err
	}
	s.logf("latency: %s, %d emails", name, n)
	if _, err := s.serial(ctx, tag+"-warm", latencyWarmup, send); err != nil {
		return latencyRow{}, fmt.Errorf("%s: warming up: %w", name, err)
	}
	rcpts, err := s.serial(ctx, tag, n, send)
	if err != nil {
		return latencyRow{}, fmt.Errorf("%s: %w", name, err)
	}
	return s.rec.row(name, 0, rcpts), nil
}

// serial sends n emails of row tag through send, each once the previous
// one reached the MX, timed from begin; it returns their recipients.
func (s *latencyStep) serial(ctx context.Context, tag string, n int, send latencySend) ([]string, error) {
	rcpts := latencyRcpts(tag, n)
	for _, rcpt := range rcpts {
		if err := send(ctx, rcpt, func() { s.rec.start(rcpt, time.Now()) }); err != nil {
			return nil, err
		}
		if err := s.rec.wait(ctx, []string{rcpt}, stallTimeout); err != nil {
			return nil, err
		}
	}
	return rcpts, nil
}

// openLoop is a row of st.n emails sent through send on a fixed schedule
// of st.perSec, each in a goroutine of its own whatever the answers to
// the others, and timed from its scheduled send time.
func (s *latencyStep) openLoop(ctx context.Context, name, tag string, st latencyStream, send latencySend) (latencyRow, error) {
	if err := s.quiet(ctx); err != nil {
		return latencyRow{}, err
	}
	s.logf("latency: %s, %d emails at %.1f/s", name, st.n, st.perSec)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	rcpts := latencyRcpts(tag, st.n)
	start := time.Now()
	for i, rcpt := range rcpts {
		due := scheduledAt(start, i, st.perSec)
		if err := sleepCtx(ctx, time.Until(due)); err != nil {
			fail(err)
			break
		}
		s.rec.start(rcpt, due)
		wg.Go(func() {
			if err := send(ctx, rcpt, func() {}); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return latencyRow{}, fmt.Errorf("%s: %w", name, firstErr)
	}
	if err := s.rec.wait(ctx, rcpts, stallTimeout); err != nil {
		return latencyRow{}, fmt.Errorf("%s: %w", name, err)
	}
	return s.rec.row(name, st.perSec, rcpts), nil
}

// smtpPool keeps connections to one SMTP server open between messages: a
// sender takes an idle one or dials a new one, and puts it back after its
// transaction. It is safe for concurrent use.
type smtpPool struct {
	dial func(ctx context.Context) (*smtp.Client, error)
	mu   sync.Mutex
	idle []*smtp.Client
}

// send is a latencySend: latencyMessage to rcpt from latencyFrom, begin
// called just before MAIL FROM.
func (pl *smtpPool) send(ctx context.Context, rcpt string, begin func()) error {
	msg := latencyMessage(rcpt)
	pl.mu.Lock()
	var c *smtp.Client
	if n := len(pl.idle); n > 0 {
		c, pl.idle = pl.idle[n-1], pl.idle[:n-1]
	}
	pl.mu.Unlock()
	if c == nil {
		var err error
		if c, err = pl.dial(ctx); err != nil {
			return err
		}
	}
	begin()
	if err := submitOne(c, latencyFrom, rcpt, msg); err != nil {
		c.Close()
		return err
	}
	pl.mu.Lock()
	pl.idle = append(pl.idle, c)
	pl.mu.Unlock()
	return nil
}

// dialPlain connects to the SMTP server at addr in plain text and says
// EHLO. The caller closes the client.
func dialPlain(ctx context.Context, addr string) (*smtp.Client, error) {
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c, err := smtp.NewClient(conn, "localhost")
	if err == nil {
		err = c.Hello("localhost")
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("smtp at %s: %w", addr, err)
	}
	return c, nil
}

// close ends every idle connection.
func (pl *smtpPool) close() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, c := range pl.idle {
		_ = c.Quit()
		c.Close()
	}
	pl.idle = nil
}

// postfixRows measures the Postfix rows: one at a time and the two
// streams, through a throwaway instance relaying to the bench's MX.
func (s *latencyStep) postfixRows(ctx context.Context, res *latencyResult) (err error) {
	s.logf("latency: starting a throwaway Postfix relaying to the MX on port %d", s.side.mx.port())
	pf, err := startRelayPostfix(ctx, s.side.mx.port())
	if err != nil {
		return err
	}
	defer func() {
		if serr := pf.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	pool := &smtpPool{dial: func(ctx context.Context) (*smtp.Client, error) { return dialPlain(ctx, pf.Addr()) }}
	defer pool.close()
	tail := func(err error) error { return fmt.Errorf("%w\n%s", err, pf.Tail(10)) }
	if res.postfixIdle, err = s.oneAtATime(ctx, "postfix relay, one at a time", "pf", s.c.latencySerial, pool.send); err != nil {
		return tail(err)
	}
	res.postfixIdle.signing = false
	for i, st := range res.streams {
		name := fmt.Sprintf("postfix relay, open loop at %d %%", st.percent())
		if res.postfixLoad[i], err = s.openLoop(ctx, name, fmt.Sprintf("pf%d", st.percent()), st, pool.send); err != nil {
			return tail(err)
		}
		res.postfixLoad[i].signing = false
	}
	return nil
}

// bareRow is the bare one-activity workflow one at a time, started
// eagerly by a client whose worker runs in this process.
func (s *latencyStep) bareRow(ctx context.Context) (latencyRow, error) {
	const name = "bare Temporal one activity, eager start"
	if err := s.quiet(ctx); err != nil {
		return latencyRow{}, err
	}
	s.logf("latency: %s, %d workflows", name, s.c.latencySerial)
	tc, stop, err := connectBare(ctx, s.dev.temporal)
	if err != nil {
		return latencyRow{}, err
	}
	defer stop()
	if _, _, err := runBareEager(ctx, tc, latencyWarmup); err != nil {
		return latencyRow{}, fmt.Errorf("warming up the bare workflow: %w", err)
	}
	lat, last, err := runBareEager(ctx, tc, s.c.latencySerial)
	if err != nil {
		return latencyRow{}, err
	}
	eager, err := eagerAccepted(ctx, tc, last)
	if err != nil {
		return latencyRow{}, err
	}
	return latencyRow{name: name, stats: statsOf(lat),
		note: fmt.Sprintf("eager start accepted by the server (the history of %s): %s", last, yesNo(eager))}, nil
}

// smtpRow is SMTP submission one at a time through dev's gateway, over
// one connection authenticated once.
func (s *latencyStep) smtpRow(ctx context.Context) (latencyRow, error) {
	roots, err := smtpRoots(s.dev)
	if err != nil {
		return latencyRow{}, err
	}
	pool := &smtpPool{dial: func(ctx context.Context) (*smtp.Client, error) {
		return dialSubmission(ctx, s.dev.smtp, s.dev.creds.APIKey, roots)
	}}
	defer pool.close()
	return s.oneAtATime(ctx, "smtp gateway (dev's), one at a time", "smtp", s.c.latencySerial, pool.send)
}

// probeRow sends c.latencyBurst emails to one bulk recipient at
// concurrency c.conc and, once half of them were accepted, one probe
// email, and times the probe and the burst.
func (s *latencyStep) probeRow(ctx context.Context) (probeResult, error) {
	n, conc := s.c.latencyBurst, s.c.conc
	res := probeResult{burst: n, conc: conc}
	if err := s.quiet(ctx); err != nil {
		return res, err
	}
	bulk := fmt.Sprintf("lat-bulk@%s", deliveryRcptDomain)
	probe := latencyRcpts("probe", 1)[0]
	body, err := json.Marshal(latencyEmail(bulk, nil))
	if err != nil {
		return res, err
	}
	s.logf("latency: probe during a burst of %d emails at c=%d", n, conc)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, accepted atomic.Int64
		wg             sync.WaitGroup
		errOnce        sync.Once
		firstErr       error
		halfway        = make(chan struct{})
		done           = make(chan struct{})
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				if i := next.Add(1); i > int64(n) || ctx.Err() != nil {
					return
				}
				if _, err := s.post(ctx, "/emails", body); err != nil {
					fail(err)
					return
				}
				if accepted.Add(1) == int64(max(1, n/2)) {
					close(halfway)
				}
			}
		})
	}
	go func() {
		wg.Wait()
		res.burstAccepted = time.Since(start) // read after done
		close(done)
	}()
	select {
	case <-halfway:
	case <-done:
	}
	if ctx.Err() == nil { // fail cancels ctx; firstErr is read once the burst is done
		begin := func() {
			sent := time.Now()
			s.rec.start(probe, sent)
			res.accepted, res.sentAt = int(accepted.Load()), sent.Sub(start)
			_, res.atMXSent = s.rec.count(bulk, sent)
		}
		if err := s.postEmail(nil)(ctx, probe, begin); err != nil {
			fail(fmt.Errorf("the probe: %w", err))
		} else if err := s.rec.wait(ctx, []string{probe}, stallTimeout); err != nil {
			fail(fmt.Errorf("the probe: %w", err))
		}
	}
	<-done
	if firstErr != nil {
		return res, firstErr
	}
	if err := s.rec.waitCount(ctx, bulk, n, stallTimeout); err != nil {
		return res, err
	}
	pr := s.rec.row("probe", 0, []string{probe})
	res.latency, res.signed = pr.stats.at(1), pr.signed == 1
	_, arrived, _ := s.rec.times(probe)
	_, res.atMXArrived = s.rec.count(bulk, arrived)
	_, _, last := s.rec.times(bulk)
	res.burstLast = last.Sub(start)
	return res, nil
}

// reportedRows are the rows reported but not judged: tracking on, a 1 MB
// attachment, a batch of 100.
func (s *latencyStep) reportedRows(ctx context.Context) ([]latencyRow, error) {
	n := s.c.latencyExtra
	tracked, err := s.trackingRow(ctx, n)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, latencyAttachment)
	_, _ = rand.Read(raw)
	attachment := map[string]any{"attachments": []map[string]string{{
		"filename": "bench.bin", "content_type": "application/octet-stream",
		"content": base64.StdEncoding.EncodeToString(raw),
	}}}
	attached, err := s.oneAtATime(ctx, "api, 1 MB attachment, one at a time", "attach", n, s.postEmail(attachment))
	if err != nil {
		return nil, err
	}
	batch, err := s.batchRow(ctx)
	if err != nil {
		return nil, err
	}
	return []latencyRow{tracked, attached, batch}, nil
}

// trackingRow turns open and click tracking on for the sender domain,
// sends n HTML emails with a link one at a time, and restores the
// domain's settings.
func (s *latencyStep) trackingRow(ctx context.Context, n int) (row latencyRow, err error) {
	path := "/domains/" + s.domainID
	var before struct {
		Open  bool `json:"open_tracking"`
		Click bool `json:"click_tracking"`
	}
	if err := s.api.getRetrying(ctx, path, &before); err != nil {
		return row, err
	}
	set := func(open, click bool) error {
		a, err := s.api.do(ctx, http.MethodPatch, path, map[string]bool{"open_tracking": open, "click_tracking": click}, nil)
		if err == nil && a.status != http.StatusOK {
			err = fmt.Errorf("status %d: %.300s", a.status, a.body)
		}
		if err != nil {
			return fmt.Errorf("PATCH %s: %w", path, err)
		}
		return nil
	}
	if err := set(true, true); err != nil {
		return row, err
	}
	defer func() {
		if rerr := set(before.Open, before.Click); rerr != nil && err == nil {
			err = rerr
		}
	}()
	html := map[string]any{"html": `<p>An email timed by go run ./bench, with open and click tracking.</p>` +
		`<p><a href="https://example.com/bench">A link</a></p>`}
	return s.oneAtATime(ctx, "api, open and click tracking, one at a time", "track", n, s.postEmail(html))
}

// batchRow sends one POST /emails/batch of latencyBatch emails to
// recipients of their own, each timed from the batch request's start.
func (s *latencyStep) batchRow(ctx context.Context) (latencyRow, error) {
	name := fmt.Sprintf("api, one batch of %d", latencyBatch)
	if err := s.quiet(ctx); err != nil {
		return latencyRow{}, err
	}
	s.logf("latency: %s", name)
	rcpts := latencyRcpts("batch", latencyBatch)
	emails := make([]map[string]any, len(rcpts))
	for i, r := range rcpts {
		emails[i] = latencyEmail(r, nil)
	}
	body, err := json.Marshal(emails)
	if err != nil {
		return latencyRow{}, err
	}
	start := time.Now()
	for _, r := range rcpts {
		s.rec.start(r, start)
	}
	a, err := s.post(ctx, "/emails/batch", body)
	answered := time.Since(start)
	if err != nil {
		return latencyRow{}, err
	}
	var got struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil || len(got.Data) != len(rcpts) {
		return latencyRow{}, fmt.Errorf("POST /emails/batch: %d ids for %d emails (%v): %.300s", len(got.Data), len(rcpts), err, a.body)
	}
	if err := s.rec.wait(ctx, rcpts, stallTimeout); err != nil {
		return latencyRow{}, fmt.Errorf("%s: %w", name, err)
	}
	row := s.rec.row(name, 0, rcpts)
	row.note = fmt.Sprintf("answered in %s; the last of the %d at the MX %s after the request started",
		fmtDur(answered), latencyBatch, fmtDur(row.stats.at(1)))
	return row, nil
}

// printLatency prints the step's rows, the probe and the reported rows.
func printLatency(p func(string, ...any), r latencyResult) {
	p("")
	p("latency, time to inbox: DKIM-signed emails from %s (verified) through the bench's DNS server to its MX,", chaosSenderDomain)
	p("  each timed from the start of its request (smtp rows: its MAIL FROM; open-loop rows: its scheduled send")
	p("  time) until the MX had read it whole, one recipient each; every row starts once dev has delivered")
	p("  everything accepted before it; one-at-a-time rows send each email once the previous one arrived, after")
	p("  %d unmeasured ones; open-loop rows send on a fixed schedule whatever the answers", latencyWarmup)
	p("  reference rate %.1f emails/s: %s", r.ref.real.perSecond(), r.ref.from)
	for _, st := range r.streams {
		p("  stream at %d %%: %.1f emails/s, %d emails (%s)", st.percent(), st.perSec, st.n, fmtDur(time.Duration(float64(st.n)/st.perSec*float64(time.Second))))
	}
	header := func() {
		p("  %-44s %5s %9s %9s %9s %9s %9s  %s", "row", "n", "offered", "p50", "p90", "p99", "max", "at the MX")
	}
	header()
	rows := []latencyRow{r.apiIdle, r.apiLoad[0], r.apiLoad[1]}
	if r.postfixSkip == "" {
		rows = append(rows, r.postfixIdle, r.postfixLoad[0], r.postfixLoad[1])
	}
	for _, row := range append(rows, r.bare, r.smtpIdle) {
		printLatencyRow(p, row)
	}
	if r.postfixSkip != "" {
		p("  postfix relay rows: skipped: %s", r.postfixSkip)
	}

	pr := r.probe
	p("")
	p("latency, a probe during a burst: %d emails (API, c=%d) to one bulk recipient; once %d were accepted, one probe", pr.burst, pr.conc, max(1, pr.burst/2))
	p("  probe sent %s into the burst (%d accepted, %d of the burst at the MX); at the MX %s later (DKIM-signed: %s),",
		fmtDur(pr.sentAt), pr.accepted, pr.atMXSent, fmtDur(pr.latency), yesNo(pr.signed))
	p("  when %d of the burst had reached the MX", pr.atMXArrived)
	p("  burst: all accepted %s after its first request, its last email at the MX %s after it (the probe %s before that)",
		fmtDur(pr.burstAccepted), fmtDur(pr.burstLast), fmtDur(pr.burstLast-pr.sentAt-pr.latency))

	p("")
	p("latency, reported, not judged (one at a time unless said otherwise)")
	header()
	for _, row := range r.reported {
		printLatencyRow(p, row)
	}
}

// printLatencyRow prints one row, and its note.
func printLatencyRow(p func(string, ...any), r latencyRow) {
	offered := "-"
	if r.offered > 0 {
		offered = fmt.Sprintf("%.1f/s", r.offered)
	}
	mx := "-"
	switch {
	case r.signing:
		mx = fmt.Sprintf("%d DKIM-signed", r.signed)
	case r.copies > 0:
		mx = "not signed (not dev's)"
	}
	if r.copies > 0 && r.copies != r.stats.n() {
		mx += fmt.Sprintf(", %d copies of %d emails", r.copies, r.stats.n())
	}
	s := r.stats
	p("  %-44s %5d %9s %9s %9s %9s %9s  %s", r.name, s.n(), offered, fmtDur(s.at(0.50)), fmtDur(s.at(0.90)),
		fmtDur(s.at(0.99)), fmtDur(s.at(1)), mx)
	if r.note != "" {
		p("    %s", r.note)
	}
}
