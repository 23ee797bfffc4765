package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// chaosSenderDomain is the domain the chaos run verifies and sends from,
// so that it may write to any address (the sandbox sender only reaches
// the team's own members).
const chaosSenderDomain = "sender.test"

// chaosConfig sizes a chaos run.
type chaosConfig struct {
	n      int    // keyed emails
	conc   int    // retrying clients
	rounds int    // dev lifetimes that end in a crash or include an outage
	seed   uint64 // of every random choice
	// deferB is how long b.test's MX answers 451 to RCPT after the first.
	deferB time.Duration
	// maxCrashN bounds the random n of POSTHASTE_TEST_CRASH_AT=point:n.
	maxCrashN int
	// crashWait is how long a process with a crash point may run after
	// it is ready before the bench kills it itself.
	crashWait time.Duration
	// outageMin and outageMax bound a PostgreSQL outage.
	outageMin, outageMax time.Duration
	// settleStall ends the wait for outcomes when none is added for this
	// long; settleMax bounds it.
	settleStall, settleMax time.Duration
}

func defaultChaosConfig(n int, seed uint64) chaosConfig {
	return chaosConfig{
		n: n, conc: 16, rounds: min(10, max(4, n/1000)), seed: seed,
		// Points are passed about once per email (twice, for the deliver
		// points): small runs need small counts to crash before they end.
		deferB: time.Minute, maxCrashN: min(200, max(5, n/50)), crashWait: 30 * time.Second,
		outageMin: 5 * time.Second, outageMax: 20 * time.Second,
		settleStall: 3 * time.Minute, settleMax: 20 * time.Minute,
	}
}

// chaosEnv is what every dev process of the run is told beside its
// ports and data dir: the recipients' side (deliveryEnv), and short
// retries, so that the run ends in minutes.
func chaosEnv(dbURL, dnsAddr string, mxPort int) []string {
	return append([]string{
		"DATABASE_URL=" + dbURL,
		"POSTHASTE_SMTP_LISTEN=off",
		"POSTHASTE_INBOUND_LISTEN=off",
		"POSTHASTE_DEFAULT_RATE_LIMIT=1000000",
		"POSTHASTE_DELIVERY_RETRY_INITIAL=1s",
		"POSTHASTE_DELIVERY_RETRY_MAX=5s",
		"POSTHASTE_STEP_RETRY_MAX=1s",
	}, deliveryEnv(dnsAddr, mxPort)...)
}

// deliveryEnv points dev at the bench's DNS server and MX port, for the
// chaos mode and the real delivery step: every lookup goes to dnsAddr,
// every MX is dialled on mxPort, its own host name is the one whose SPF
// record setupSenderDomains publishes, and domain verification checks
// often enough to verify the sender domain within a second or two.
func deliveryEnv(dnsAddr string, mxPort int) []string {
	return []string{
		"POSTHASTE_DNS_SERVER=" + dnsAddr,
		"POSTHASTE_MX_PORT=" + strconv.Itoa(mxPort),
		"POSTHASTE_HOSTNAME=posthaste.bench.test",
		"POSTHASTE_VERIFY_INTERVAL=200ms",
		"POSTHASTE_VERIFY_FAST_PERIOD=2m",
		"POSTHASTE_VERIFY_MAX_INTERVAL=5s",
		// The bench's MX is not a provider to protect: the default
		// provider's shaping limits (10 connections, 100 messages each
		// and per second per MX host) would measure the policy, not the
		// pipeline.
		"POSTHASTE_SHAPING=default:conns=64,per_conn=0,per_sec=0",
	}
}

// errChaosFailed is returned when an email was lost, duplicated or never
// accepted.
var errChaosFailed = errors.New("chaos run failed: see the results")

// runChaos is the chaos mode: n keyed emails through dev processes that
// crash at random points and a PostgreSQL that stops for a while, then a
// count of what was lost and what was duplicated at the MX.
func runChaos(ctx context.Context, bin string, cfg chaosConfig, out, progress io.Writer) error {
	ctx, cancel := context.WithCancel(ctx) // ends the clients on an early return
	defer cancel()
	return inRoot(ctx, bin, fmt.Sprintf("posthaste bench -chaos %d (seed %d)", cfg.n, cfg.seed), out, progress,
		func(p, logf func(string, ...any), root, bin string) error {
			return chaosIn(ctx, bin, root, cfg, p, logf)
		})
}

// chaosIn is runChaos in its root, with its binary.
func chaosIn(ctx context.Context, bin, root string, cfg chaosConfig, p, logf func(string, ...any)) (err error) {

	rs, err := startRecipientSide(cfg.deferB)
	if err != nil {
		return err
	}
	defer rs.close()

	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	r := &chaosRunner{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.seed, 0)),
		pgCfg:    pgcluster.Config{Dir: filepath.Join(root, "pg"), Port: ports[2]},
		crashes:  map[faults.Point]int{},
		p:        p,
		logf:     logf,
		received: rs.counts.total,
	}
	logf("starting PostgreSQL")
	if r.pg, err = pgcluster.Start(ctx, r.pgCfg); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if rerr := pgcluster.Remove(rctx, r.pgCfg); rerr != nil && err == nil {
			err = fmt.Errorf("removing PostgreSQL: %w", rerr)
		}
	}()
	r.spec = devSpec{
		bin: bin, dataDir: filepath.Join(root, "data"), logPath: filepath.Join(root, "dev.log"),
		httpPort: ports[0], temporalPort: ports[1],
		env: chaosEnv(r.pg.URL(), rs.dns.Addr(), rs.port()),
	}
	defer func() {
		if r.cur != nil {
			if terr := r.cur.terminate(); terr != nil {
				logf("stopping dev: %v", terr)
			}
		}
	}()

	logf("starting posthaste dev")
	if err := r.ensureClean(ctx); err != nil {
		return err
	}
	if err := r.cur.readCredentials(); err != nil {
		return err
	}
	c := newChaosClient(r.cur.base, r.cur.creds.APIKey)
	logf("verifying %s", chaosSenderDomain)
	if _, err := setupSenderDomains(ctx, c, rs.dns, chaosSenderDomain); err != nil {
		return err
	}
	p("sending %d emails keyed chaos/0..chaos/%d from %s to %s and %s, %d retrying clients",
		cfg.n, cfg.n-1, chaosSenderDomain, chaosRcptA, chaosRcptB, cfg.conc)
	p("  mx.b.test answers 451 4.7.1 to every RCPT for %s after its first; delivery retries 1s..5s", cfg.deferB)

	start := time.Now()
	var retries retryCounts
	var sending atomic.Bool
	sending.Store(true)
	r.sending = &sending
	var sendingTook time.Duration // written before sent is, read after
	sent := make(chan []keyedSend, 1)
	go func() {
		res := c.sendAll(ctx, cfg.n, cfg.conc, cfg.seed, &retries, &sending)
		sendingTook = time.Since(start)
		sent <- res
	}()

	p("")
	p("rounds (%d):", cfg.rounds)
	if err := r.runRounds(ctx); err != nil {
		return err
	}
	logf("final dev, without crash point")
	if err := r.ensureClean(ctx); err != nil {
		return err
	}
	var sends []keyedSend
	select {
	case sends = <-sent:
	case <-ctx.Done():
		return ctx.Err()
	}
	logf("all clients were done after %s; waiting for every recipient's outcome", fmtDur(sendingTook))
	listed, err := waitSettled(ctx, c, sends, cfg, logf)
	if err != nil {
		return err
	}
	total := time.Since(start)

	t := tallyChaos(sends, listed, rs.counts.snapshot())
	t.deferred = rs.b.deferredRcpts()
	printChaos(p, cfg, r, t, sends, &retries, sendingTook, total)
	if t.lost > 0 || t.duplicated > 0 || t.notAccepted > 0 {
		// The data dir goes with root; the output of the dev processes
		// stays for a look.
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("posthaste-chaos-%d.log", cfg.seed))
		if b, rerr := os.ReadFile(r.spec.logPath); rerr == nil && os.WriteFile(keep, b, 0o600) == nil {
			p("  dev output kept in %s", keep)
		}
		return errChaosFailed
	}
	return nil
}

// setupSenderDomains adds each domain of names, publishes their records
// and the operator's SPF record in dns, asks for their verification and
// waits until every one is verified; it returns their ids, in the order
// of names.
func setupSenderDomains(ctx context.Context, c *chaosClient, dns *dnstest.Server, names ...string) ([]string, error) {
	ids := make([]string, len(names))
	for i, name := range names {
		id, err := addSenderDomain(ctx, c, dns, name)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	// The operator's SPF record, which the return path's SPF includes.
	dns.AddTXT("_spf.posthaste.bench.test", "v=spf1 ip4:127.0.0.0/8 -all")
	for i, id := range ids {
		if a, err := c.do(ctx, http.MethodPost, "/domains/"+id+"/verify", nil, nil); err != nil || a.status != http.StatusOK {
			return nil, fmt.Errorf("verifying %s: status %d: %.300s (%v)", names[i], a.status, a.body, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for i, id := range ids {
		for {
			var got struct {
				Status string `json:"status"`
			}
			if err := c.getRetrying(ctx, "/domains/"+id, &got); err != nil {
				return nil, err
			}
			if got.Status == "verified" {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%s still %s after 2m", names[i], got.Status)
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// addSenderDomain adds the domain name and publishes its records in dns;
// it returns the domain's id.
func addSenderDomain(ctx context.Context, c *chaosClient, dns *dnstest.Server, name string) (string, error) {
	a, err := c.do(ctx, http.MethodPost, "/domains", map[string]any{"name": name}, nil)
	if err != nil {
		return "", fmt.Errorf("adding %s: %w", name, err)
	}
	if a.status != http.StatusCreated {
		return "", fmt.Errorf("adding %s: status %d: %.300s", name, a.status, a.body)
	}
	var d struct {
		ID      string `json:"id"`
		Records []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Value    string `json:"value"`
			Priority *int   `json:"priority"`
		} `json:"records"`
	}
	if err := json.Unmarshal(a.body, &d); err != nil {
		return "", fmt.Errorf("reading the domain %s: %w", name, err)
	}
	for _, rec := range d.Records {
		owner := rec.Name + "." + name
		switch rec.Type {
		case "TXT":
			dns.AddTXT(owner, rec.Value)
		case "MX":
			pref := 10
			if rec.Priority != nil {
				pref = *rec.Priority
			}
			dns.AddMX(owner, rec.Value, uint16(pref))
		default:
			return "", fmt.Errorf("domain record of unknown type %q", rec.Type)
		}
	}
	return d.ID, nil
}

// chaosRunner restarts dev and PostgreSQL through the rounds.
type chaosRunner struct {
	cfg     chaosConfig
	rng     *rand.Rand
	spec    devSpec
	pgCfg   pgcluster.Config
	pg      *pgcluster.Cluster
	cur     *devProcess // the latest dev process; nil before the first
	clean   bool        // cur runs without a crash point
	sending *atomic.Bool
	// received counts the copies the MX hosts have received.
	received func() int
	p, logf  func(string, ...any)

	crashes     map[faults.Point]int // processes that crashed at their point
	outlived    int                  // processes the bench killed: their point was not reached in time
	outages     int
	outageTotal time.Duration
	starts      int // dev processes started
}

// runRounds runs cfg.rounds rounds in a random order: a third of them
// (at least one) stop PostgreSQL, the others crash dev at a point.
func (r *chaosRunner) runRounds(ctx context.Context) error {
	plan := make([]bool, r.cfg.rounds) // true: a PostgreSQL outage
	for i := range max(1, r.cfg.rounds/3) {
		plan[i] = true
	}
	r.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	for i, outage := range plan {
		// Round i starts once the MX hosts have i/rounds of 90 % of the
		// copies to receive, so that the rounds spread over the run.
		target := i * r.cfg.n * 2 * 9 / (10 * r.cfg.rounds)
		if err := r.waitProgress(ctx, i+1, target); err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		r.logf("round %d: the MX hosts have %d of %d copies", i+1, r.received(), 2*r.cfg.n)
		var err error
		if outage {
			err = r.outageRound(ctx, i+1)
		} else {
			err = r.crashRound(ctx, i+1)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
	}
	return nil
}

// waitProgress runs a clean dev until the MX hosts have received target
// copies, or their count stood still for progressStall.
func (r *chaosRunner) waitProgress(ctx context.Context, round, target int) error {
	if r.received() >= target {
		return nil
	}
	if err := r.ensureClean(ctx); err != nil {
		return err
	}
	last, moved := r.received(), time.Now()
	for {
		got := r.received()
		if got >= target {
			return nil
		}
		if got != last {
			last, moved = got, time.Now()
		} else if time.Since(moved) > progressStall {
			r.logf("round %d: the MX hosts stood at %d of %d copies for %s; going on", round, got, target, progressStall)
			return nil
		}
		if !r.alive() {
			r.p("  %2d  %s  dev without a crash point exited (%v)", round, clock(), r.cur.waitErr)
			r.logf("dev exited:\n%s", r.cur.tail(20))
			if err := r.ensureClean(ctx); err != nil {
				return err
			}
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// progressStall bounds how long waitProgress waits without progress.
const progressStall = 2 * time.Minute

// alive reports whether cur is running.
func (r *chaosRunner) alive() bool {
	if r.cur == nil {
		return false
	}
	select {
	case <-r.cur.exited:
		return false
	default:
		return true
	}
}

// ensureClean makes cur a ready process without a crash point.
func (r *chaosRunner) ensureClean(ctx context.Context) error {
	if r.alive() && r.clean {
		return r.cur.waitReady(ctx)
	}
	if r.alive() {
		r.cur.kill()
	}
	d, err := launchDev(r.spec)
	if err != nil {
		return err
	}
	r.cur, r.clean = d, true
	r.starts++
	return d.waitReady(ctx)
}

// crashRound starts dev with a random crash point and count and waits
// until it dies there, or kills it after crashWait.
func (r *chaosRunner) crashRound(ctx context.Context, round int) error {
	if r.alive() {
		// A graceful restart, as a deploy would do.
		if err := r.cur.terminate(); err != nil {
			r.logf("round %d: stopping dev: %v", round, err)
		}
		r.p("  %2d  %s  dev stopped with SIGTERM", round, clock())
	}
	points := faults.Points
	if !r.sending.Load() {
		// Nothing passes after-accept once the clients are done.
		points = slices.DeleteFunc(slices.Clone(points), func(p faults.Point) bool { return p == faults.AfterAccept })
	}
	point := points[r.rng.IntN(len(points))]
	spec := fmt.Sprintf("%s:%d", point, 1+r.rng.IntN(r.cfg.maxCrashN))
	d, err := launchDev(r.spec, "POSTHASTE_TEST_CRASH_AT="+spec)
	if err != nil {
		return err
	}
	r.cur, r.clean = d, false
	r.starts++
	r.logf("round %d: dev with POSTHASTE_TEST_CRASH_AT=%s", round, spec)
	readyErr := d.waitReady(ctx)
	select {
	case <-d.exited:
		return r.crashed(round, spec, point, d, false)
	default:
	}
	if readyErr != nil {
		return readyErr
	}
	select {
	case <-d.exited:
		return r.crashed(round, spec, point, d, true)
	case <-time.After(r.cfg.crashWait):
		d.kill()
		r.outlived++
		r.p("  %2d  %s  crash at %-24s not reached %s after ready: killed by the bench (SIGKILL), up %s",
			round, clock(), spec, r.cfg.crashWait, fmtDur(time.Since(d.started)))
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// crashed records the end of a process started with a crash point: a
// SIGKILL is the crash; any other exit is an error.
func (r *chaosRunner) crashed(round int, spec string, point faults.Point, d *devProcess, ready bool) error {
	if !killedBySIGKILL(d.waitErr) {
		return fmt.Errorf("dev with POSTHASTE_TEST_CRASH_AT=%s exited with %v:\n%s", spec, d.waitErr, d.tail(30))
	}
	r.crashes[point]++
	when := "before it was ready"
	if ready {
		when = "after ready in " + fmtDur(d.readyIn)
	}
	r.p("  %2d  %s  crash at %-24s died %s after start, %s", round, clock(), spec, fmtDur(time.Since(d.started)), when)
	return nil
}

func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// outageRound stops PostgreSQL under a running dev for a random while
// and starts it again on the same port.
func (r *chaosRunner) outageRound(ctx context.Context, round int) error {
	if err := r.ensureClean(ctx); err != nil {
		return err
	}
	if err := sleepCtx(ctx, r.jitter(time.Second, 5*time.Second)); err != nil {
		return err
	}
	length := r.jitter(r.cfg.outageMin, r.cfg.outageMax)
	r.logf("round %d: stopping PostgreSQL for %s", round, fmtDur(length))
	began := time.Now()
	if err := r.pg.Stop(ctx); err != nil {
		return err
	}
	if err := sleepCtx(ctx, length); err != nil {
		return err
	}
	var err error
	if r.pg, err = pgcluster.Start(ctx, r.pgCfg); err != nil {
		return err
	}
	down := time.Since(began)
	r.p("  %2d  %s  PostgreSQL back after %s under a running dev (stopped at %s)", round, clock(), fmtDur(down),
		began.Format("15:04:05.000"))
	r.outages++
	r.outageTotal += down
	// Let dev find its database again before the next round.
	if err := sleepCtx(ctx, r.jitter(3*time.Second, 8*time.Second)); err != nil {
		return err
	}
	if !r.alive() {
		r.p("  %2d  %s  dev exited during the outage (%v)", round, clock(), r.cur.waitErr)
		r.logf("dev exited during the outage:\n%s", r.cur.tail(20))
	}
	return nil
}

// jitter returns a random duration in [lo, hi).
func (r *chaosRunner) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}

// clock is the time of day for the round lines, to place them beside the
// arrival times of duplicates and the dev log.
func clock() string { return time.Now().Format("15:04:05.000") }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
