package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// The real delivery step: dev sends from a domain it verified (so every
// message is DKIM-signed) through the bench's DNS server to an MX host in
// this process on loopback, the pieces of the chaos mode (chaos.go,
// chaosmx.go) with one recipient domain that accepts everything.
//
// The MX is an in-process go-smtp server rather than Postfix's smtp-sink:
// it counts each message by the email id in its Message-ID, so the step
// can check that every email arrived exactly once and signed, and it
// accepts thousands of messages a second here, far above what the step
// delivers, so it is not the bottleneck.

const (
	deliveryRcptDomain = "rcpt.test"
	deliveryRcpt       = "bench@" + deliveryRcptDomain
	// deliveryKey is the value of chaosKeyHeader in every message of the
	// step: mxCounts counts by email id only messages that carry a key.
	deliveryKey = "bench/real-delivery"
)

// deliverySide is the recipients' side of the real delivery step: the DNS
// server dev looks everything up in, and the MX of deliveryRcptDomain.
type deliverySide struct {
	dns    *dnstest.Server
	mx     *mxSink
	counts *mxCounts
	// signed counts the messages with a DKIM-Signature field of
	// chaosSenderDomain (d=).
	signed atomic.Int64
	// watcher, when set, is told of every message's arrival (the latency
	// step, latency.go).
	watcher atomic.Pointer[arrivals]
}

// startDeliverySide starts the DNS server and the MX host; dev must be
// started with env() to use them. The caller closes it.
func startDeliverySide() (*deliverySide, error) {
	dns, err := dnstest.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the DNS server: %w", err)
	}
	s := &deliverySide{dns: dns, counts: newMXCounts()}
	s.mx, err = startInspectingMXSink("mx."+deliveryRcptDomain, "127.0.0.1:0", 0, s.counts, s.inspect)
	if err != nil {
		dns.Close()
		return nil, err
	}
	dns.AddMX(deliveryRcptDomain, "mx."+deliveryRcptDomain, 10)
	dns.AddA("mx."+deliveryRcptDomain, "127.0.0.1")
	return s, nil
}

// env is what dev needs to deliver through this side.
func (s *deliverySide) env() []string { return deliveryEnv(s.dns.Addr(), s.mx.port()) }

func (s *deliverySide) close() {
	s.mx.close()
	s.dns.Close()
}

// inspect counts msg as signed when a DKIM-Signature field names the
// sender domain, and tells the watcher, if any, that it reached rcpts at
// at.
func (s *deliverySide) inspect(msg []byte, rcpts []string, at time.Time) {
	signed := dkimDomainSigned(msg, chaosSenderDomain)
	if signed {
		s.signed.Add(1)
	}
	if w := s.watcher.Load(); w != nil {
		w.arrived(rcpts, at, signed)
	}
}

// dkimDomainSigned reports whether msg's header has a DKIM-Signature
// field whose d= tag (RFC 6376 §3.5) is domain. It does not verify the
// signature: cmd/posthaste's end-to-end tests do.
func dkimDomainSigned(msg []byte, domain string) bool {
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(msg))).ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return false
	}
	for _, v := range h.Values("Dkim-Signature") {
		for _, tag := range strings.Split(v, ";") {
			name, val, ok := strings.Cut(tag, "=")
			if ok && strings.TrimSpace(name) == "d" && strings.EqualFold(strings.TrimSpace(val), domain) {
				return true
			}
		}
	}
	return false
}

// realResult is one real delivery run.
type realResult struct {
	rate          rate // emails, first request until the MX had them all and dev counted them delivered
	accept        loadResult
	signed        int
	once          bool // every email arrived exactly once, with nothing else
	historyEvents int
	domainID      string // chaosSenderDomain's, verified by measureRealDelivery
}

// deliveryRound returns the recipient and the key of the real delivery
// run of pair round (from 1): the first run's are deliveryRcpt and
// deliveryKey, each later run's its own, so that the MX tells one run's
// emails from another's.
func deliveryRound(round int) (rcpt, key string) {
	if round <= 1 {
		return deliveryRcpt, deliveryKey
	}
	return fmt.Sprintf("bench-%d@%s", round, deliveryRcptDomain), fmt.Sprintf("%s/%d", deliveryKey, round)
}

// measureRealDelivery verifies chaosSenderDomain, then makes the first
// real delivery run (realDeliveryRun, round 1) and prints the history of
// one of its emails' workflow. The result carries the domain's id.
func measureRealDelivery(ctx context.Context, api *apiClient, dev *devProcess, side *deliverySide, n, conc int,
	p func(string, ...any), logf func(string, ...any)) (realResult, error) {
	logf("real delivery: verifying %s", chaosSenderDomain)
	began := time.Now()
	ids, err := setupSenderDomains(ctx, newChaosClient(dev.base, dev.creds.APIKey), side.dns, chaosSenderDomain)
	if err != nil {
		return realResult{}, err
	}
	res, err := realDeliveryRun(ctx, api, dev, side, 1, n, conc, "verified in "+fmtDur(time.Since(began)), p, logf)
	res.domainID = ids[0]
	if err != nil {
		return res, err
	}

	tc, err := dialTemporal(ctx, dev.temporal)
	if err != nil {
		return res, err
	}
	defer tc.Close()
	h, err := emailHistory(ctx, tc, res.accept.firstID)
	if err != nil {
		return res, err
	}
	res.historyEvents = len(h.types)
	p("")
	p("history of %s (real delivery): %d events", h.workflowID, len(h.types))
	for i, t := range h.types {
		p("  %2d %s", i+1, t)
	}
	return res, nil
}

// realDeliveryRun sends n emails from the verified chaosSenderDomain to
// the recipient of round (deliveryRound), one recipient each, with conc
// clients, and times them from the first request until the MX has
// received all n and dev's delivered counter has grown by n. It prints the
// rate and what the MX received in this run; verified says when the
// sender domain was verified.
func realDeliveryRun(ctx context.Context, api *apiClient, dev *devProcess, side *deliverySide, round, n, conc int,
	verified string, p func(string, ...any), logf func(string, ...any)) (realResult, error) {
	var res realResult
	rcpt, key := deliveryRound(round)
	body, err := json.Marshal(map[string]any{
		"from":    "Bench <bench@" + chaosSenderDomain + ">",
		"to":      rcpt,
		"subject": "posthaste bench, real delivery",
		"text":    "An email delivered by go run ./bench to a loopback MX.",
		"headers": map[string]string{chaosKeyHeader: key},
	})
	if err != nil {
		return res, err
	}
	rc := *api
	rc.body = body
	m := newScraper(api.http, dev.base)
	base, err := m.scrape(ctx)
	if err != nil {
		return res, err
	}
	mxBase, snapBase, signedBase := side.counts.total(), side.counts.snapshot(), side.signed.Load()

	logf("real delivery: %d emails to %s at concurrency %d", n, rcpt, conc)
	start, cpu := time.Now(), startCPU()
	res.accept, err = rc.load(ctx, n, conc)
	if err != nil {
		return res, err
	}
	if res.accept.ok != n {
		return res, fmt.Errorf("real delivery: %d of %d accepted: %s", res.accept.ok, n, res.accept)
	}
	done, err := waitReal(ctx, m, side, base.delivered+float64(n), mxBase+n, logf)
	if err != nil {
		return res, err
	}
	res.rate = rate{n: n, elapsed: done.Sub(start), busy: cpu.used()}

	// This run's emails are the (id, recipient) pairs new since snapBase:
	// each to rcpt, once, and nothing else arrived meanwhile.
	snap := side.counts.snapshot()
	res.signed = int(side.signed.Load() - signedBase)
	fresh := 0
	res.once = snap.unknown == snapBase.unknown && side.counts.total() == mxBase+n
	for k, c := range snap.byID {
		if old, ok := snapBase.byID[k]; ok {
			res.once = res.once && c == old
			continue
		}
		fresh++
		res.once = res.once && c == 1 && strings.HasSuffix(k, " "+rcpt)
	}
	res.once = res.once && fresh == n
	p("")
	p("real delivery: %d emails from %s (%s, DKIM) to %s, c=%d, through the bench's DNS server",
		n, chaosSenderDomain, verified, rcpt, conc)
	p("  to an in-process MX on %s; first request until the MX had them all and dev counted them delivered", side.mx.ln.Addr())
	p("  accept %s", res.accept)
	p("  %d delivered in %s: %.1f emails/s", n, fmtDur(res.rate.elapsed), res.rate.perSecond())
	if t := res.rate.cpuText("email"); t != "" {
		p("  %s", t)
	}
	p("  at the MX: %d messages, %d distinct emails, %d DKIM-signed d=%s, each email exactly once: %s",
		side.counts.total()-mxBase, fresh, res.signed, chaosSenderDomain, yesNo(res.once))
	return res, nil
}

// waitReal polls until dev's delivered counter reaches delivered and the
// MX has mx messages, and returns when a poll saw both. It fails when
// neither moves for stallTimeout.
func waitReal(ctx context.Context, m *scraper, side *deliverySide, delivered float64, mx int, logf func(string, ...any)) (time.Time, error) {
	lastD, lastMX := -1.0, -1
	lastMove, lastLog := time.Now(), time.Now()
	for {
		cur, err := m.scrape(ctx)
		now := time.Now()
		if err != nil {
			return now, err
		}
		got := side.counts.total()
		if cur.delivered >= delivered && got >= mx {
			return now, nil
		}
		if cur.delivered != lastD || got != lastMX {
			lastD, lastMX, lastMove = cur.delivered, got, now
		} else if now.Sub(lastMove) > stallTimeout {
			return now, fmt.Errorf("real delivery stuck for %s: delivered counter %.0f of %.0f, MX %d of %d",
				stallTimeout, cur.delivered, delivered, got, mx)
		}
		if now.Sub(lastLog) >= 15*time.Second {
			logf("  delivered %.0f of %.0f, MX %d of %d", cur.delivered, delivered, got, mx)
			lastLog = now
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return now, err
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
