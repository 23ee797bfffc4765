package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/posthaste/posthaste/internal/testkit/postfixtest"
)

// A throwaway Postfix instance (internal/postfixtest): the durable
// reference for accepting mail. It accepts mail for one domain into its
// own queue (each queue file written and fsynced before the 250 that ends
// DATA, as Postfix always does) and hands it to the discard transport, so
// that nothing leaves the machine.

// benchDomain is the domain the durable reference accepts mail for; it
// and any other mail the loopback clients relay go to the discard
// transport.
const benchDomain = "bench.test"

// postfixLifetime is how long the reference's master may run before it
// exits by itself (master -e), so that it outlives a bench killed before
// its stop by that long at most.
const postfixLifetime = 15 * time.Minute

// postfixUnavailable says why the bench's Postfix references cannot run
// here, or returns "" when they can (smtp-source comes with Postfix).
func postfixUnavailable() string {
	return postfixtest.Unavailable("smtp-source")
}

// smtpSource times Postfix's smtp-source sending n messages of
// smtpPayload bytes over conns connections kept open (-d) to addr, from
// and to the given addresses. smtp-source exits 0 even when the server
// rejects, so the caller counts what arrived on the other side.
func smtpSource(ctx context.Context, addr string, n, conns int, from, to string) (rate, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, "smtp-source", "-d", "-m", strconv.Itoa(n), "-s", strconv.Itoa(conns),
		"-l", strconv.Itoa(smtpPayload), "-f", from, "-t", to, addr).CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return rate{}, fmt.Errorf("smtp-source: %v: %s", err, out)
	}
	return rate{n: n, elapsed: elapsed}, nil
}

// durableReference measures a throwaway durable Postfix accepting each
// run's messages (smtp-source, 1 KB bodies, runs[i].conns connections),
// one run after the other on one instance, and checks in its log that
// every message was queued and discarded before the next run begins.
func durableReference(ctx context.Context, runs []smtpRun, logf func(string, ...any)) (err error) {
	pf, err := postfixtest.Start(ctx, postfixtest.Config{
		Domain: benchDomain,
		Main: map[string]string{
			"default_transport": "discard",
			"local_transport":   "discard",
			"relay_transport":   "discard",
		},
		Services: []string{"discard unix - - n - - discard"},
		Lifetime: postfixLifetime,
	})
	if err != nil {
		return fmt.Errorf("starting a throwaway Postfix: %w", err)
	}
	defer func() {
		if serr := pf.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	want := 0
	for i := range runs {
		r := &runs[i]
		logf("postfix durable queue (%s), %d messages over %d connections", pf.Addr(), r.messages, r.conns)
		got, err := smtpSource(ctx, pf.Addr(), r.messages, r.conns, "a@"+benchDomain, "b@"+benchDomain)
		if err != nil {
			return err
		}
		want += r.messages
		c, err := pf.WaitRemoved(ctx, want, time.Minute)
		if err != nil {
			return err
		}
		if c.Rejected > 0 || c.Removed != want {
			return fmt.Errorf("postfix logged %d messages removed (want %d) and %d rejected commands:\n%s",
				c.Removed, want, c.Rejected, pf.Tail(10))
		}
		r.durable = got
	}
	return nil
}

// startRelayPostfix starts a throwaway Postfix that relays every message
// it accepts to the MX on 127.0.0.1:mxPort (TOOLS.md, the latency
// reference for time to inbox): no local domains, plain text to the MX.
// The caller stops it.
func startRelayPostfix(ctx context.Context, mxPort int) (*postfixtest.Instance, error) {
	pf, err := postfixtest.Start(ctx, postfixtest.Config{
		Domain: benchDomain,
		Main: map[string]string{
			"relayhost":               fmt.Sprintf("[127.0.0.1]:%d", mxPort),
			"mydestination":           "",
			"mynetworks":              "127.0.0.0/8",
			"smtp_tls_security_level": "none",
		},
		Services: []string{"smtp unix - - n - - smtp", "relay unix - - n - - smtp"},
		Lifetime: postfixLifetime,
	})
	if err != nil {
		return nil, fmt.Errorf("starting a throwaway Postfix relay: %w", err)
	}
	return pf, nil
}
