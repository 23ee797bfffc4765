package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/posthaste/posthaste/internal/shaping"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// The pools step (-pools N): two IP pools deliver to loopback MX hosts
// named like Gmail's and Outlook's under traffic shaping, and the MX
// (poolmx.go) holds what it saw against the limits. dev runs with
// POSTHASTE_IP_POOLS, warm-up off, poolsShaping and short retries; it
// verifies two sender domains and `posthaste admin assign-pool --domain`
// gives one of them the pool acme; then N emails from each domain, half to
// each provider, go out at concurrency 16.

// poolsShaping is the step's POSTHASTE_SHAPING: small enough that the
// pipeline, which delivers about 80 emails a second here, is held back
// by it.
const poolsShaping = "gmail:conns=2,per_conn=10,per_sec=10;outlook:conns=3,per_conn=20,per_sec=15"

// poolSpec is one pool of the step and the sender domain that sends from it.
type poolSpec struct {
	name   string
	addrs  []string // source addresses, each said as mta<last byte>.bench.test
	domain string   // sender domain whose mail leaves from the pool
	assign bool     // given the pool with admin assign-pool (else the default)
}

// poolsSpecs are the step's pools: shared, the default, sends for one
// domain from one address; acme for the other from two.
var poolsSpecs = []poolSpec{
	{name: "shared", addrs: []string{"127.0.0.2"}, domain: "pool-shared.test"},
	{name: "acme", addrs: []string{"127.0.0.3", "127.0.0.4"}, domain: "pool-acme.test", assign: true},
}

// poolsRcpts are the recipient domains, each with one MX host whose name
// puts it in a provider (shaping.ProviderOf), on its own loopback address.
var poolsRcpts = []struct{ domain, mx, ip string }{
	{"gm.test", "gmail-smtp-in.l.google.com", "127.0.0.11"},
	{"ol.test", "ol-test.mail.protection.outlook.com", "127.0.0.12"},
}

// poolsEnv is POSTHASTE_IP_POOLS for specs.
func poolsEnv(specs []poolSpec) string {
	var parts []string
	for _, p := range specs {
		var as []string
		for _, a := range p.addrs {
			as = append(as, a+"@"+ehloName(a))
		}
		parts = append(parts, p.name+"="+strings.Join(as, ","))
	}
	return strings.Join(parts, ";")
}

// ehloName is the EHLO name of a pool address: mta<last byte>.bench.test.
func ehloName(addr string) string {
	return "mta" + addr[strings.LastIndexByte(addr, '.')+1:] + ".bench.test"
}

// errLimitExceeded is returned when the MX saw more than a limit allows.
var errLimitExceeded = errors.New("pools run: a shaping limit was exceeded: see the results")

// runPools is the pools step alone: n emails from each pool's domain.
func runPools(ctx context.Context, bin string, n int, out, progress io.Writer) error {
	return inRoot(ctx, bin, fmt.Sprintf("posthaste bench -pools %d", n), out, progress,
		func(p, logf func(string, ...any), root, bin string) error {
			return poolsIn(ctx, bin, root, n, p, logf)
		})
}

// poolsIn is runPools in its root, with its binary.
func poolsIn(ctx context.Context, bin, root string, n int, p, logf func(string, ...any)) error {
	rules, err := shaping.ParseRules(poolsShaping)
	if err != nil {
		return fmt.Errorf("parsing the step's shaping: %w", err)
	}

	dns, err := dnstest.Start()
	if err != nil {
		return fmt.Errorf("starting the DNS server: %w", err)
	}
	defer dns.Close()
	poolOf, wantPool := map[string]string{}, map[string]string{}
	for _, s := range poolsSpecs {
		wantPool[s.domain] = s.name
		for _, a := range s.addrs {
			poolOf[a] = s.name
		}
	}
	rec := newShapeRecorder(poolOf, wantPool)
	hosts := map[string]string{}
	for _, r := range poolsRcpts {
		hosts[r.mx] = r.ip
		dns.AddMX(r.domain, r.mx, 10)
		dns.AddA(r.mx, r.ip)
	}
	mx, err := startShapeMX(hosts, rec)
	if err != nil {
		return err
	}
	defer mx.close()

	env := append(deliveryEnv(dns.Addr(), mx.port),
		"POSTHASTE_IP_POOLS="+poolsEnv(poolsSpecs),
		"POSTHASTE_WARMUP_SCHEDULE=off",
		// After deliveryEnv's, which it overrides.
		"POSTHASTE_SHAPING="+poolsShaping,
		"POSTHASTE_SHAPING_WAIT=500ms",
		"POSTHASTE_DELIVERY_RETRY_INITIAL=1s",
		"POSTHASTE_DELIVERY_RETRY_MAX=3s",
	)
	return withDev(ctx, bin, root, logf, env, func(dev *devProcess) error {
		p("dev: ready in %s", fmtDur(dev.readyIn))
		return poolsOn(ctx, dev, dns, rec, rules, n, p, logf)
	})
}

// poolsOn is the pools step on its dev, once the bench's DNS server and
// MX run.
func poolsOn(ctx context.Context, dev *devProcess, dns *dnstest.Server, rec *shapeRecorder, rules shaping.Rules, n int,
	p, logf func(string, ...any)) error {
	c := newChaosClient(dev.base, dev.creds.APIKey)
	var names []string
	for _, s := range poolsSpecs {
		names = append(names, s.domain)
	}
	logf("verifying %s", strings.Join(names, ", "))
	ids, err := setupSenderDomains(ctx, c, dns, names...)
	if err != nil {
		return err
	}
	for i, s := range poolsSpecs {
		if !s.assign {
			continue
		}
		if err := assignPool(ctx, dev, ids[i], s.name); err != nil {
			return err
		}
	}

	p("")
	p("pools: %d emails from each of %s, half to %s (%s) and half to %s (%s), c=16",
		n, strings.Join(names, " and "), poolsRcpts[0].domain, poolsRcpts[0].mx, poolsRcpts[1].domain, poolsRcpts[1].mx)
	p("  POSTHASTE_IP_POOLS=%s", poolsEnv(poolsSpecs))
	p("  POSTHASTE_SHAPING=%s (each limit per source address), POSTHASTE_SHAPING_WAIT=500ms, retries 1s..3s", poolsShaping)
	m := newScraper(c.http, dev.base)
	base, err := m.scrape(ctx)
	if err != nil {
		return err
	}
	total := n * len(poolsSpecs)
	logf("sending %d emails at concurrency 16", total)
	start := time.Now()
	failed, err := sendPoolEmails(ctx, c, n, 16, logf)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("pools run: %d of %d emails not accepted", failed, total)
	}
	accepted := time.Since(start)
	if err := waitPools(ctx, m, rec, base.delivered+float64(total), total, logf); err != nil {
		return err
	}
	return printPools(p, rec, rules, start, accepted, total)
}

// assignPool runs `posthaste admin assign-pool --domain id --pool pool`
// against dev's database.
func assignPool(ctx context.Context, dev *devProcess, id, pool string) error {
	cmd := exec.CommandContext(ctx, dev.bin, "admin", "assign-pool", "--domain", id, "--pool", pool)
	cmd.Env = append(devEnviron(), "POSTHASTE_DATA_DIR="+dev.dataDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("admin assign-pool --domain %s --pool %s: %w: %s", id, pool, err, b)
	}
	return nil
}

// sendPoolEmails sends n emails from each pool's domain with conc clients,
// interleaved: email i comes from domain i mod pools and goes to the
// recipient domain (i / pools) mod 2. It returns how many were not
// accepted.
func sendPoolEmails(ctx context.Context, c *chaosClient, n, conc int, logf func(string, ...any)) (int, error) {
	total := n * len(poolsSpecs)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				s := poolsSpecs[i%len(poolsSpecs)]
				r := poolsRcpts[(i/len(poolsSpecs))%len(poolsRcpts)]
				a, err := c.do(ctx, http.MethodPost, "/emails", map[string]any{
					"from":    "Bench <bench@" + s.domain + ">",
					"to":      fmt.Sprintf("u%d@%s", i, r.domain),
					"subject": "posthaste bench, pools",
					"text":    "An email delivered by go run ./bench -pools to a loopback MX.",
				}, nil)
				if err == nil && a.status != http.StatusOK {
					err = fmt.Errorf("status %d: %.200s", a.status, a.body)
				}
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if firstErr != nil {
		logf("first failed request: %v", firstErr)
	}
	return int(failed.Load()), nil
}

// waitPools polls until the MX has total distinct emails and dev's
// delivered counter reached delivered; it fails when neither moves for
// stallTimeout.
func waitPools(ctx context.Context, m *scraper, rec *shapeRecorder, delivered float64, total int, logf func(string, ...any)) error {
	lastD, lastMX := -1.0, -1
	lastMove, lastLog := time.Now(), time.Now()
	for {
		cur, err := m.scrape(ctx)
		if err != nil {
			return err
		}
		got, distinct := rec.received()
		now := time.Now()
		if cur.delivered >= delivered && distinct >= total {
			return nil
		}
		if cur.delivered != lastD || got != lastMX {
			lastD, lastMX, lastMove = cur.delivered, got, now
		} else if now.Sub(lastMove) > stallTimeout {
			return fmt.Errorf("pools run stuck for %s: delivered counter %.0f of %.0f, MX %d distinct of %d",
				stallTimeout, cur.delivered, delivered, distinct, total)
		}
		if now.Sub(lastLog) >= 5*time.Second {
			logf("  delivered %.0f of %.0f, MX %d distinct of %d", cur.delivered, delivered, distinct, total)
			lastLog = now
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// printPools prints the rate of each pool and the limits against what
// the MX saw; it returns errLimitExceeded when the MX saw more than a
// limit allows, or an error when an email was lost, duplicated or left
// from the wrong pool.
func printPools(p func(string, ...any), rec *shapeRecorder, rules shaping.Rules, start time.Time, accepted time.Duration, total int) error {
	rec.mu.Lock()
	tracks := make(map[shapeKey]*shapeTrack, len(rec.tracks))
	for k, t := range rec.tracks {
		c := *t
		c.starts = slices.Clone(t.starts)
		tracks[k] = &c
	}
	once := len(rec.byID) == total && rec.unknown == 0 && rec.total == total
	for _, n := range rec.byID {
		once = once && n == 1
	}
	misrouted, received, distinct := rec.misrouted, rec.total, len(rec.byID)
	lastAt, perPool := maps.Clone(rec.lastAt), maps.Clone(rec.perPool)
	rec.mu.Unlock()

	p("  all %d accepted in %s", total, fmtDur(accepted))
	for _, s := range poolsSpecs {
		d := lastAt[s.name].Sub(start)
		per := 0.0
		if d > 0 {
			per = float64(perPool[s.name]) / d.Seconds()
		}
		p("  pool %-7s %-22s from %-17s %4d emails in %8s: %6.1f emails/s (first request to its last message at the MX)",
			s.name, strings.Join(s.addrs, ","), s.domain, perPool[s.name], fmtDur(d), per)
	}
	p("  at the MX: %d messages, %d distinct emails, each exactly once: %s; from an address outside the sender domain's pool: %d",
		received, distinct, yesNo(once), misrouted)
	p("")
	p("  limits per source address (configured / observed); rate: the bucket the messages needed at the configured rate,")
	p("  allowed per_sec plus %s of it for the varying time between the shaper and the MX's MAIL", rateJitter)
	p("  %-8s %-10s %5s %6s %9s %10s %8s %7s %15s  %s", "provider", "source", "msgs", "conns", "per_conn", "per_sec", "max 1s", "mean/s", "burst/allowed", "verdict")
	exceeded := false
	for _, o := range observe(tracks, rules) {
		lim := rules[o.provider]
		v, why := shapeVerdict(lim, o)
		p("  %-8s %-10s %5d %2d / %-2d %4d / %-3d %9s %8d %7.1f %6.1f / %-6.1f  %s",
			o.provider, o.source, o.messages, lim.Connections, o.maxConns, lim.PerConnection, o.maxPerConn,
			fmt.Sprintf("%d/s", lim.PerSecond), o.maxPerSecond, o.meanPerSecond, o.burst, burstAllowed(lim.PerSecond), v)
		for _, w := range why {
			p("           %s", w)
		}
		exceeded = exceeded || v != "held"
	}
	if !once || misrouted > 0 {
		return errors.New("pools run: an email was lost, duplicated or sent from the wrong pool: see the results")
	}
	if exceeded {
		return errLimitExceeded
	}
	return nil
}
