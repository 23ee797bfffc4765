// Command bench measures Posthaste's throughput on this machine and compares
// it with the embedded Temporal server's own rate, in one run:
//
//  1. It starts a loopback DNS server and an MX host in this process
//     (delivery.go), then the real `posthaste dev` binary as a subprocess (a
//     temporary data dir, free ports, no Temporal UI, log level warn, every
//     lookup to that DNS server and every MX dialled on that host's port),
//     waits for /readyz and reads credentials.json.
//  2. Accept rate: POST /emails (sandbox sender to delivered@posthaste.test)
//     at concurrency 1 (500 requests), 16 (the burst, -burst requests) and
//     64 (5,000 requests), printing accepted/s and p50, p99 and max latency.
//     The answer only waits for the PostgreSQL commit (the outbox); the
//     workflows run behind it.
//  3. Drain: how long the pipeline takes to deliver that backlog, watching
//     posthaste_email_events_total{type="delivered"} on /metrics until it
//     equals posthaste_emails_accepted_total.
//  4. Sandbox end-to-end rate: -e2e emails at concurrency 16, from the first
//     request until the delivered counter has grown by that many.
//  5. Bare Temporal reference on the same embedded server: a worker in this
//     process on its own task queue runs a workflow with one no-op activity,
//     then one with one no-op local activity; -bare workflows each (after 16
//     unmeasured ones), started by 16 concurrent starters, from the first
//     start until the last result. The one-activity run is the first of
//     step 7's pairs.
//  6. The history of one sandbox email's workflow (email/<id>): event count
//     and types.
//  7. Real delivery: dev verifies sender.test (its records published in the
//     bench's DNS server), then -real emails (2,000) from it, one recipient
//     each, DKIM-signed, at concurrency 16 go to the in-process MX of
//     rcpt.test, from the first request until the MX has them all and the
//     delivered counter has grown by that many; the MX checks that each
//     email arrived once and signed. Then the history of one of them. With
//     step 5's one-activity run this is the first of -rounds pairs (3;
//     pairs.go): each further pair, measured back to back, is a bare
//     one-activity run with its warm-up, then a real delivery run of -real
//     emails to a recipient and with a key of its own (bench-<pair>@rcpt.test,
//     so the MX checks each run's emails apart from earlier runs'). It
//     prints each pair's bare rate, real rate and ratio real / bare, and
//     the median of the ratios.
//  8. Latency, time to inbox (latency.go), on the same dev: each email
//     from the start of its request until the MX has read it whole, sent
//     from sender.test (DKIM-signed) to a recipient of its own
//     (lat-<row>-<i>@rcpt.test), each row once dev has delivered
//     everything accepted before it, with its p50, p90, p99 and max: the
//     API one at a time (200, each once the previous one arrived) and in
//     two open-loop streams at 25 % and 50 % of the pairs' median real
//     delivery rate (about 20 s each, -latency-stream emails, timed from
//     each email's scheduled send time); the same three through a
//     throwaway Postfix relaying to the same MX (postfix.go; SMTP from
//     MAIL FROM; skipped, saying why, without Postfix); the bare
//     one-activity workflow one at a time, started eagerly by a client
//     whose worker runs in this process (the engine's floor); SMTP
//     submission one at a time through dev's gateway; a probe email sent
//     once half of a 3,000-email burst (c=16) was accepted, with how much
//     of the burst had reached the MX by then and when its last email
//     did; and, reported but not judged, open and click tracking on, a
//     1 MB attachment, and one batch of 100.
//  9. Webhooks: the sandbox end-to-end run again with one endpoint on a
//     local receiver subscribed to email.sent and email.delivered.
//  10. A summary table, with the median real delivery and bare one-activity
//     rates of the pairs, and the ratios end-to-end / median bare and the
//     median of the pairs' real delivery / bare.
//  11. SMTP accept rate: messages per second through the gateway (implicit
//     TLS, AUTH once per connection) over 1 and over 16 connections, first
//     the gateway inside dev, then `posthaste smtp` as its own process
//     against dev's PostgreSQL and Temporal (gateway.go; the gateway as
//     deployed), then that process again with dev stopped (SIGSTOP) for
//     the run so that nothing is processed meanwhile (the gateway with the
//     processing elsewhere, which the targets judge; the two runs with
//     the processing on the same cores are printed for information),
//     beside two Postfix references in the same run: smtp-source into a
//     throwaway Postfix instance of the bench's own that queues every
//     message durably (fsync) and discards it (postfix.go, the reference
//     of the targets), and smtp-source into smtp-sink, which stores
//     nothing. Each run starts once dev has delivered everything accepted
//     before it. Without the Debian postfix package (or as another user
//     than root) the references are skipped and the output says why.
//  12. Inbound accept (inbound.go): dev's inbound MX, on a free loopback
//     port, with receiving enabled on sender.test; smtp-source (the same
//     tool and 1 KB payload as the durable reference) sends the SMTP
//     step's counts over 1 and over 16 connections to inbound@sender.test,
//     every message checked accepted on dev's /metrics
//     (posthaste_inbound_messages_total{result="accepted"}), printed
//     beside the durable Postfix rates of step 11 as ratios.
//  13. The targets, each beside what this run measured and whether it is
//     met: real delivery / bare one activity >= 2 (the median of step 7's
//     pair ratios); SMTP with dev stopped over 16 connections / durable
//     Postfix over 16 >= 0.8, over one connection >= 0.5 (accepting, the
//     processing elsewhere; that processing does not wait behind
//     accepting is step 8's probe); inbound over 16 connections / durable
//     Postfix over 16 >= 0.5; accept p99 at 16 clients < 50 ms; time to
//     inbox (step 8): the API's idle p50 at most 5 x Postfix's idle p50,
//     at most its own p50 at 25 % and at 50 % load, and at most 1.5 x the
//     bare eager workflow's p50; the API's p99 at 50 % load at most 5 x
//     Postfix's at that rate; SMTP submission's idle p50 at most 5 x
//     Postfix's and at most 1.5 x the bare eager workflow's. Once every
//     step has run, dev is stopped with SIGTERM and everything it wrote
//     is removed.
//
// With -chaos N it runs only the chaos mode instead (chaos*.go): a loopback
// DNS server and two in-process MX hosts (a.test; b.test, which answers 451
// to RCPT for its first minute) count what they receive per email and
// recipient; dev runs on a PostgreSQL cluster of the bench's own, with a
// fixed data dir and ports, and sends from a domain it verifies at the
// start. Sixteen clients send N emails keyed chaos/<i> to both domains,
// retrying each request with its key after no answer, a 5xx, 409
// concurrent_idempotent_requests or 429. Meanwhile a fixed number of rounds
// either restart dev with POSTHASTE_TEST_CRASH_AT=<random point>:<random n>
// (package faults) and wait until it SIGKILLs itself (or kill it after 30 s,
// a crash at a random moment), or stop PostgreSQL for 5 to 20 s under a
// running dev and restart that dev with SIGTERM in the next round. A last dev without a
// crash point then runs until every recipient has a final state (GET
// /emails). It prints the emails accepted, lost (no final state, or
// recorded delivered but never at the MX), duplicated (a recipient that got
// one key's email more than once, counted at the MX), crashes by point,
// the clients' retries and how long they waited (p50, p99, max), and the
// total time; it exits 1 when an email was lost, duplicated or never
// accepted. -seed repeats a run's random choices.
//
// With -pools N it runs only the pools step instead (pools.go, poolmx.go):
// the bench's DNS server publishes two recipient domains whose MX hosts
// are named like Gmail's (gmail-smtp-in.l.google.com, on 127.0.0.11) and
// Outlook's (*.mail.protection.outlook.com, on 127.0.0.12), both served on
// one port by an MX in this process that records, per source address and
// MX host, the connections open at once (a connection ends at its QUIT),
// the messages per connection and when each message began (its MAIL).
// dev runs with two IP pools on loopback addresses (shared=127.0.0.2;
// acme=127.0.0.3,127.0.0.4), warm-up off, small shaping limits
// (poolsShaping), a short POSTHASTE_SHAPING_WAIT and retries of 1 to 3 s;
// it verifies two sender domains and `posthaste admin assign-pool
// --domain` gives one of them the pool acme. N emails from each domain,
// half to each provider, go out at concurrency 16 until the MX has each
// exactly once and dev counted them delivered. It prints each pool's
// emails/s (first request to its last message at the MX) and, per
// provider and source address, the configured limits beside the observed
// maximum connections at once, messages per connection, messages in any
// one second, the mean rate, and the bucket the messages needed at the
// configured rate (burstNeeded: a rate limit of per_sec lets a bucket of
// per_sec through at once, so one second may hold twice per_sec, while a
// sender that is too fast for long needs an ever bigger bucket), with a
// verdict, held or exceeded; it exits 1 when a limit was exceeded or an
// email was lost, duplicated or left from another pool than its domain's.
//
// With -latency it runs only the latency step (step 8) on a dev of its
// own, after a real delivery run of 1,000 emails whose rate the streams
// derive from, and prints that step's targets only.
//
// Before the targets it runs the broadcast step (broadcast.go): a broadcast
// to 1,000 and to 10,000 sandbox contacts, each on a fresh dev, with its
// emails/s beside the sandbox end-to-end rate, its workflow starts per 100
// emails and the ratio of the two devs' peak memory; -broadcast runs only
// that step.
//
// Then, also before the targets, the automations step (automations.go): on
// a fresh dev, 10,000 sandbox contacts (-automation-runs; 1,000 with
// -quick) are each sent an event that starts a run of trigger -> delay ->
// send_email, the delay chosen from a pilot so that every run waits before
// the first timer falls due. It prints runs started/s, dev's VmRSS with
// every run waiting beside idle (target: less than 500 MB more) and the lag
// from each timer's due time to its email's acceptance (p50, p99, max),
// and judges the last email's acceptance, counted from the first due time,
// against 1.5 times what the sandbox end-to-end rate needs for as many
// emails; -automations runs only that step.
//
// After the targets it runs the contacts step (contacts.go): a 100,000-row
// CSV import with its contacts/s and the importer's memory, and template
// renders/s (-contacts runs only that step); last, the batch accept rate
// beside single sends (POST /emails/batch, 100 per call), whose tens of
// thousands of emails would load any step after it.
//
// It does not link the Temporal server: it runs the binary given by -bin, or
// builds one from ./cmd/posthaste into a temporary directory (about a minute
// on a warm cache). Run it from the module root:
//
//	GOTOOLCHAIN=local go run ./bench            # default counts, a few minutes
//	GOTOOLCHAIN=local go run ./bench -quick     # small counts, a smoke run
//	GOTOOLCHAIN=local go run ./bench -bin bin/posthaste -burst 2000
//	GOTOOLCHAIN=local go run ./bench -chaos 10000  # the chaos mode only
//	GOTOOLCHAIN=local go run ./bench -pools 300    # the pools step only
//	GOTOOLCHAIN=local go run ./bench -automations  # the automations step only
//	GOTOOLCHAIN=local go run ./bench -latency      # the latency step only
//
// Results go to stdout as plain lines; progress and errors go to stderr. The
// numbers depend on the machine and on whatever else runs on it: compare runs
// from the same machine only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// removeAllInto removes dir, reporting a failure through *err unless it
// already holds an error; for defer.
func removeAllInto(dir string, err *error) {
	if rerr := os.RemoveAll(dir); rerr != nil && *err == nil {
		*err = fmt.Errorf("removing %s: %w", dir, rerr)
	}
}

// counts are the sizes of the measured runs.
type counts struct {
	serial  int // accept run at concurrency 1
	burst   int // accept run at concurrency 16
	wide    int // accept run at concurrency 64
	e2e     int // sandbox end-to-end run
	bare    int // each bare Temporal run
	warmup  int // unmeasured bare workflows before each bare run
	conc    int // concurrency of the burst, the e2e run, the bare starters and the SMTP burst
	maxConc int // concurrency of the widest accept run

	smtpSerial int // SMTP messages over one connection
	smtpBurst  int // SMTP messages over conc connections
	real       int // emails of each real delivery run, at concurrency conc
	rounds     int // pairs of a bare one-activity run and a real delivery run (pairs.go)

	automations int // runs of the automations step (automations.go), one event and one email each

	// The latency step (latency.go).
	latencySerial    int           // emails (workflows) of each one-at-a-time row
	latencyStream    int           // emails of each open-loop stream; 0: latencyStreamFor's worth
	latencyStreamFor time.Duration // how long each stream lasts when latencyStream is 0
	latencyBurst     int           // emails of the burst the probe is sent into
	latencyExtra     int           // emails of each reported row (tracking, attachment)
	latencyReal      int           // emails of -latency's own real delivery run
}

func defaultCounts() counts {
	return counts{serial: 500, burst: 10000, wide: 5000, e2e: 1000, bare: 1000, warmup: 16, conc: 16, maxConc: 64,
		smtpSerial: 500, smtpBurst: 3000, real: 2000, rounds: 3, automations: 10000,
		latencySerial: 200, latencyStreamFor: 20 * time.Second, latencyBurst: 3000, latencyExtra: 50, latencyReal: 1000}
}

func quickCounts() counts {
	return counts{serial: 50, burst: 300, wide: 300, e2e: 100, bare: 100, warmup: 16, conc: 16, maxConc: 64,
		smtpSerial: 100, smtpBurst: 400, real: 200, rounds: 3, automations: 1000,
		latencySerial: 50, latencyStreamFor: 5 * time.Second, latencyBurst: 400, latencyExtra: 10, latencyReal: 200}
}

func main() {
	bin := flag.String("bin", "", "path to a posthaste binary (default: build ./cmd/posthaste into a temporary directory)")
	burst := flag.Int("burst", 10000, "requests of the accept burst at concurrency 16")
	e2e := flag.Int("e2e", 1000, "emails of the sandbox end-to-end run")
	bare := flag.Int("bare", 1000, "workflows of each bare Temporal run")
	realN := flag.Int("real", 2000, "emails of each real delivery run")
	rounds := flag.Int("rounds", 3, "pairs of a bare one-activity run and a real delivery run, each measured back to back; the real delivery target is judged on the median of their ratios")
	quick := flag.Bool("quick", false, "small counts for a smoke run (explicit -burst, -e2e, -bare, -real, -rounds, -automation-runs still apply)")
	chaos := flag.Int("chaos", 0, "run only the chaos mode with this many keyed emails (0: off)")
	seed := flag.Uint64("seed", 0, "seed of the chaos mode's random choices (0: from the clock)")
	contacts := flag.Bool("contacts", false, "run only the contacts step: a CSV import and template rendering (contacts.go)")
	contactRows := flag.Int("contact-rows", defaultContactRows, "rows of the contacts step's CSV")
	pools := flag.Int("pools", 0, "run only the pools step (pools.go) with this many emails from each of two pools' sender domains (0: off)")
	broadcastOnly := flag.Bool("broadcast", false, "run only the broadcast step (broadcast.go), with a sandbox end-to-end run (-e2e) to compare it with")
	automationsOnly := flag.Bool("automations", false, "run only the automations step (automations.go), with a sandbox end-to-end run (-e2e) to compare it with")
	automationRuns := flag.Int("automation-runs", 10000, "runs (contacts, events and emails) of the automations step (-quick: 1000)")
	latencyOnly := flag.Bool("latency", false, "run only the latency step (latency.go), with a real delivery run of its own (1,000 emails) to derive the streams' rates from")
	latencyStream := flag.Int("latency-stream", 0, "emails of each open-loop stream of the latency step (0: 20 s worth at the stream's rate; -quick: 5 s)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *chaos < 0 || *pools < 0 {
		fmt.Fprintln(os.Stderr, "bench: -chaos and -pools must not be negative")
		os.Exit(2)
	}
	if *pools > 0 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runPools(ctx, *bin, *pools, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *contacts {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runContacts(ctx, *bin, *contactRows, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *chaos > 0 {
		s := *seed
		if s == 0 {
			s = uint64(time.Now().UnixNano())
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runChaos(ctx, *bin, defaultChaosConfig(*chaos, s), os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}

	c := defaultCounts()
	if *quick {
		c = quickCounts()
	}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "burst":
			c.burst = *burst
		case "e2e":
			c.e2e = *e2e
		case "bare":
			c.bare = *bare
		case "real":
			c.real = *realN
		case "rounds":
			c.rounds = *rounds
		case "automation-runs":
			c.automations = *automationRuns
		case "latency-stream":
			c.latencyStream = *latencyStream
		}
	})
	for name, v := range map[string]int{"burst": c.burst, "e2e": c.e2e, "bare": c.bare, "real": c.real, "rounds": c.rounds,
		"automation-runs": c.automations} {
		if v < 1 {
			fmt.Fprintf(os.Stderr, "bench: -%s must be at least 1\n", name)
			os.Exit(2)
		}
	}
	if c.latencyStream < 0 {
		fmt.Fprintln(os.Stderr, "bench: -latency-stream must not be negative")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	switch {
	case *broadcastOnly:
		err = runBroadcastOnly(ctx, *bin, c, os.Stdout, os.Stderr)
	case *automationsOnly:
		err = runAutomationsOnly(ctx, *bin, c, os.Stdout, os.Stderr)
	case *latencyOnly:
		err = runLatencyOnly(ctx, *bin, c, os.Stdout, os.Stderr)
	default:
		err = run(ctx, *bin, c, os.Stdout, os.Stderr)
	}
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// printers returns how every step writes: p prints a line of results to
// out, logf a timestamped line of progress to progress.
func printers(out, progress io.Writer) (p, logf func(string, ...any)) {
	p = func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	logf = func(format string, args ...any) {
		fmt.Fprintf(progress, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	return p, logf
}

// machine describes the run for the first line of the results: the time,
// the host, Go and the CPUs.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s  host %s  %s %s/%s, %d CPUs", time.Now().UTC().Format(time.RFC3339), host,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

// binaryIn returns bin, or when it is "" builds ./cmd/posthaste into root
// and returns that; it prints which binary the run uses.
func binaryIn(ctx context.Context, bin, root string, p, logf func(string, ...any)) (string, error) {
	if bin != "" {
		p("binary: %s", bin)
		return bin, nil
	}
	logf("building ./cmd/posthaste")
	start := time.Now()
	bin, err := buildBinary(ctx, root)
	if err != nil {
		return "", err
	}
	p("binary: built ./cmd/posthaste in %s", fmtDur(time.Since(start)))
	return bin, nil
}

// inRoot prints the title line of a bench run, makes its temporary root
// (removed after fn, its error joined to fn's), finds or builds the
// binary there and runs fn with the printers, the root and the binary.
func inRoot(ctx context.Context, bin, title string, out, progress io.Writer,
	fn func(p, logf func(string, ...any), root, bin string) error) (err error) {
	p, logf := printers(out, progress)
	p("%s  %s", title, machine())
	root, err := os.MkdirTemp("", "posthaste-bench-")
	if err != nil {
		return err
	}
	defer removeAllInto(root, &err)
	if bin, err = binaryIn(ctx, bin, root, p, logf); err != nil {
		return err
	}
	return fn(p, logf, root, bin)
}

// run is the whole benchmark; results go to out, progress to progress.
func run(ctx context.Context, bin string, c counts, out, progress io.Writer) error {
	return inRoot(ctx, bin, "posthaste bench", out, progress, func(p, logf func(string, ...any), root, bin string) error {
		return runAll(ctx, bin, root, c, p, logf)
	})
}

// runAll is run in its root, with its binary.
func runAll(ctx context.Context, bin, root string, c counts, p, logf func(string, ...any)) error {
	return withDeliveryDev(ctx, bin, root, p, logf, func(dev *devProcess, side *deliverySide) error {
		return runSteps(ctx, bin, root, c, dev, side, p, logf)
	})
}

// runSteps is every step of runAll on its dev and delivery side.
func runSteps(ctx context.Context, bin, root string, c counts, dev *devProcess, side *deliverySide,
	p, logf func(string, ...any)) error {
	api := newAPIClient(dev.base, dev.creds.APIKey)
	res, err := measure(ctx, api, dev, c, p, logf)
	if err != nil {
		return err
	}
	// Before the webhooks step, whose endpoint stays subscribed after it.
	rr, err := measureRealDelivery(ctx, api, dev, side, c.real, c.conc, p, logf)
	if err != nil {
		return fmt.Errorf("real delivery: %w", err)
	}
	res.pairs[0].real = rr.rate
	// The other pairs, also before the webhooks step.
	more, err := measurePairs(ctx, api, dev, side, c, p, logf)
	if err != nil {
		return err
	}
	res.pairs = append(res.pairs, more...)
	printPairs(p, res.pairs)
	// After the pairs, whose median real delivery rate its streams derive
	// from, and before the webhooks step, so that no endpoint is
	// subscribed.
	_, realMedian := medianRates(res.pairs)
	lat, err := measureLatency(ctx, dev, side, c, latencyReference{real: realMedian, domainID: rr.domainID,
		from: fmt.Sprintf("the median real delivery rate of the %d pairs above", len(res.pairs))}, p, logf)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	printLatency(p, lat)
	if _, err := measureWebhooks(ctx, api, dev, c, res.e2e, p, logf); err != nil {
		return err
	}
	printSummary(p, c, res)

	logf("SMTP accept rate")
	sr, err := measureSMTP(ctx, dev, c, p, logf)
	if err != nil {
		return fmt.Errorf("smtp bench: %w", err)
	}
	logf("inbound accept rate")
	ir, err := measureInbound(ctx, dev, sr, p, logf)
	if err != nil {
		return fmt.Errorf("inbound bench: %w", err)
	}
	// Fresh devs of its own, while this one idles; compared with res.e2e.
	logf("broadcast: %d and %d contacts", broadcastSizes[0], broadcastSizes[1])
	bc, err := measureBroadcasts(ctx, bin, root, nil, p, logf)
	if err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	bc.e2e, bc.e2eFrom = res.e2e, "this run's, above"
	printBroadcast(p, bc)
	// A fresh dev of its own too; compared with res.e2e.
	logf("automations: %d runs", c.automations)
	ac, err := measureAutomations(ctx, bin, root, c, false, p, logf)
	if err != nil {
		return fmt.Errorf("automations: %w", err)
	}
	ac.e2e, ac.e2eFrom = res.e2e, "this run's, above"
	printAutomations(p, ac)
	ts := append(targets(c, res, sr, ir), latencyTargets(lat)...)
	ts = append(ts, broadcastTargets(bc)...)
	printTargets(p, append(ts, automationTargets(ac)...))
	printBudget(p, budgetRows(c, res, sr), runtime.NumCPU())
	logf("contacts: import and template rendering")
	if err := measureContacts(ctx, dev, defaultContactRows, p, logf); err != nil {
		return fmt.Errorf("contacts: %w", err)
	}
	// Last: its batches leave tens of thousands of emails to deliver,
	// which would load every step after it.
	logf("batch accept rate")
	br, err := BatchBench(ctx, BatchBenchConfig{BaseURL: dev.base, APIKey: dev.creds.APIKey, Concurrency: 8, Duration: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("batch bench: %w", err)
	}
	var buf strings.Builder
	br.Print(&buf)
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		p("%s", line)
	}
	return nil
}

// results collects the measurements for the summary.
type results struct {
	accept    []loadResult
	backlog   float64       // emails accepted but not delivered when the accept runs ended
	drain     time.Duration // from the end of the accept runs until all were delivered
	e2e       rate
	bareLocal rate
	// pairs are the bare one-activity runs, each with the real delivery
	// run (through the loopback MX) after it; the first pair's bare run is
	// the Temporal step's.
	pairs []pair
}

// rate is n things done in elapsed.
type rate struct {
	n       int
	elapsed time.Duration
	busy    time.Duration // the machine's busy CPU time during the run (cpu.go); 0 when not measured
}

func (r rate) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

func measure(ctx context.Context, api *apiClient, dev *devProcess, c counts, p func(string, ...any), logf func(string, ...any)) (*results, error) {
	var res results
	m := newScraper(api.http, dev.base)

	// 2. Accept rate.
	p("")
	p("accept rate: POST /emails, sandbox, to delivered@posthaste.test")
	var burstEnd time.Time
	for _, run := range []struct{ n, conc int }{{c.serial, 1}, {c.burst, c.conc}, {c.wide, c.maxConc}} {
		logf("accept: %d requests at concurrency %d", run.n, run.conc)
		r, err := api.load(ctx, run.n, run.conc)
		if err != nil {
			return nil, err
		}
		res.accept = append(res.accept, r)
		p("  %s", r)
		if run.conc == c.conc {
			burstEnd = time.Now()
		}
	}
	acceptEnd := time.Now()
	var sent int
	for _, r := range res.accept {
		sent += r.ok
	}

	// 3. Drain.
	s, err := m.scrape(ctx)
	if err != nil {
		return nil, err
	}
	if s.accepted != float64(sent) {
		p("  note: /metrics counts %.0f accepted, the bench got %d answers 200", s.accepted, sent)
	}
	res.backlog = s.accepted - s.delivered
	logf("drain: %.0f accepted, %.0f delivered so far", s.accepted, s.delivered)
	done, err := m.waitDelivered(ctx, s.accepted, 200*time.Millisecond, logf)
	if err != nil {
		return nil, fmt.Errorf("waiting for the drain: %w", err)
	}
	res.drain = done.Sub(acceptEnd)
	p("")
	p("drain: %.0f emails accepted; %.0f still undelivered when the accept runs ended", s.accepted, res.backlog)
	p("  all delivered %s after the accept runs ended (%.1f/s), %s after the c=%d burst ended",
		fmtDur(res.drain), res.backlog/res.drain.Seconds(), fmtDur(done.Sub(burstEnd)), c.conc)

	// 4. Sandbox end to end.
	var r loadResult
	res.e2e, r, err = measureE2E(ctx, api, m, c, p, logf)
	if err != nil {
		return nil, err
	}

	// 5. Bare Temporal on the same server.
	tc, stop, err := connectBare(ctx, dev.temporal)
	if err != nil {
		return nil, err
	}
	defer stop()
	p("")
	p("bare Temporal on the same server (worker in the bench process, task queue %s, %d concurrent starters)", bareTaskQueue, c.conc)
	for _, kind := range []bareKind{bareActivity, bareLocalActivity} {
		br, err := runBareWarm(ctx, tc, kind, c.warmup, c.bare, c.conc, logf)
		if err != nil {
			return nil, err
		}
		p("  %s", br)
		if kind == bareActivity {
			res.pairs = []pair{{bare: br.rate}}
		} else {
			res.bareLocal = br.rate
		}
	}

	// 6. One sandbox email's history.
	if r.firstID != "" {
		h, err := emailHistory(ctx, tc, r.firstID)
		if err != nil {
			return nil, err
		}
		p("")
		p("history of %s: %d events", h.workflowID, len(h.types))
		for i, t := range h.types {
			p("  %2d %s", i+1, t)
		}
	} else {
		return nil, errors.New("no email id to fetch a history for")
	}
	return &res, nil
}

// measureE2E is the sandbox end-to-end run: c.e2e emails at concurrency
// c.conc, from the first request until the delivered counter has grown by
// that many. It returns the rate and the accept run.
func measureE2E(ctx context.Context, api *apiClient, m *scraper, c counts, p func(string, ...any),
	logf func(string, ...any)) (rate, loadResult, error) {
	base, err := m.scrape(ctx)
	if err != nil {
		return rate{}, loadResult{}, err
	}
	logf("e2e: %d emails at concurrency %d", c.e2e, c.conc)
	start, cpu := time.Now(), startCPU()
	r, err := api.load(ctx, c.e2e, c.conc)
	if err != nil {
		return rate{}, r, err
	}
	if r.ok != c.e2e {
		return rate{}, r, fmt.Errorf("e2e run: %d of %d accepted: %s", r.ok, c.e2e, r)
	}
	done, err := m.waitDelivered(ctx, base.delivered+float64(c.e2e), 50*time.Millisecond, logf)
	if err != nil {
		return rate{}, r, fmt.Errorf("waiting for the e2e run: %w", err)
	}
	e2e := rate{n: c.e2e, elapsed: done.Sub(start), busy: cpu.used()}
	p("")
	p("sandbox end to end: %d emails at c=%d, first request to last delivered event", c.e2e, c.conc)
	p("  accept %s", r)
	p("  %d delivered in %s: %.1f emails/s", c.e2e, fmtDur(e2e.elapsed), e2e.perSecond())
	if t := e2e.cpuText("email"); t != "" {
		p("  %s", t)
	}
	return e2e, r, nil
}

func printSummary(p func(string, ...any), c counts, res *results) {
	p("")
	p("summary")
	p("  %-40s %7s %10s %10s", "measurement", "n", "seconds", "per second")
	row := func(name string, n float64, d time.Duration) {
		per := 0.0
		if d > 0 {
			per = n / d.Seconds()
		}
		p("  %-40s %7.0f %10.2f %10.1f", name, n, d.Seconds(), per)
	}
	for _, r := range res.accept {
		row(fmt.Sprintf("accept c=%d", r.conc), float64(r.ok), r.elapsed)
	}
	row("drain of the backlog after accepting", res.backlog, res.drain)
	row(fmt.Sprintf("sandbox end to end c=%d", c.conc), float64(res.e2e.n), res.e2e.elapsed)
	bare, real := medianRates(res.pairs)
	row(fmt.Sprintf("real delivery c=%d, median of %d runs", c.conc, len(res.pairs)), float64(real.n), real.elapsed)
	row(fmt.Sprintf("bare Temporal, one activity, median of %d", len(res.pairs)), float64(bare.n), bare.elapsed)
	row("bare Temporal, one local activity", float64(res.bareLocal.n), res.bareLocal.elapsed)
	p("")
	p("ratio e2e / median bare (one activity): %.2f", ratio(res.e2e, bare))
	p("ratio e2e / bare (local activity):      %.2f", ratio(res.e2e, res.bareLocal))
	p("ratio real delivery / bare (one activity), median of %d pairs: %.2f", len(res.pairs), medianPairRatio(res.pairs))
}

func ratio(a, b rate) float64 {
	if b.perSecond() == 0 {
		return 0
	}
	return a.perSecond() / b.perSecond()
}

// fmtDur rounds d for printing.
func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
