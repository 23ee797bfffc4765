package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// smtpPayload is the body size of the messages, as smtp-source -l sends.
const smtpPayload = 1024

// smtpRun is one measured SMTP run: messages over conns connections.
type smtpRun struct {
	conns    int
	messages int
	// ours is the gateway inside the dev process; standalone is a
	// `posthaste smtp` process beside it (gateway.go), the gateway as it
	// is deployed (zero when it did not run); both share the cores with
	// the processing of what they accept, and are shown for information.
	// alone is that process again while dev is stopped (SIGSTOP), so
	// that nothing is processed meanwhile: the gateway with the
	// processing elsewhere, which the targets judge.
	ours       rate
	standalone rate
	alone      rate
	// durable is a throwaway Postfix accepting into its fsynced queue
	// (postfix.go), the reference of the targets; zero when skipped.
	durable rate
	// sink is smtp-source → smtp-sink, which stores nothing; zero when
	// unavailable.
	sink rate
}

// judged is the rate the targets judge: the gateway process's with dev
// stopped (an owner's decision: the SMTP targets are about accepting, the
// processing being elsewhere; that processing does not wait behind
// accepting is the latency step's probe, latency.go). Zero when that run
// did not happen.
func (r smtpRun) judged() rate { return r.alone }

// smtpResult is the SMTP step: its runs, over one connection and over
// c.conc, and why a reference was skipped ("" when it ran).
type smtpResult struct {
	runs        []smtpRun
	durableSkip string
	sinkSkip    string
}

// measureSMTP measures messages accepted per second by the gateway over 1
// and over 16 connections, each authenticating once and then submitting
// its share of the messages one after the other (1 KB sandbox messages,
// implicit TLS). The references, run just before on the same machine with
// as many messages of the same payload over as many connections (kept
// open), in plain text and without authentication, are Postfix's
// smtp-source sending to a throwaway Postfix that queues every message
// durably and then discards it (the reference of the targets), and to
// Postfix's smtp-sink, which stores nothing. The throwaway instance is
// stopped before the gateway is measured.
func measureSMTP(ctx context.Context, dev *devProcess, c counts, p func(string, ...any), logf func(string, ...any)) (smtpResult, error) {
	roots, err := smtpRoots(dev)
	if err != nil {
		return smtpResult{}, err
	}
	res := smtpResult{runs: []smtpRun{{conns: 1, messages: c.smtpSerial}, {conns: c.conc, messages: c.smtpBurst}}}
	for i := range res.runs {
		r := &res.runs[i]
		logf("postfix smtp-source -> smtp-sink, %d messages over %d connections", r.messages, r.conns)
		if r.sink, err = sinkReference(ctx, r.messages, r.conns); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.sinkSkip = err.Error()
			break
		}
	}
	// Every measurement starts on a quiet dev: the backlog of earlier
	// steps (the batch step's tens of thousands of emails), and of the
	// runs before, is delivered first.
	m := newScraper(&http.Client{Timeout: 10 * time.Second}, dev.base)
	standaloneAccepted := 0 // accepted by the standalone gateway: not in dev's counter
	drain := func() error {
		s, err := m.scrape(ctx)
		if err != nil {
			return err
		}
		logf("smtp: waiting for dev's backlog: %.0f accepted, %.0f delivered", s.accepted+float64(standaloneAccepted), s.delivered)
		_, err = m.waitDelivered(ctx, s.accepted+float64(standaloneAccepted), 200*time.Millisecond, logf)
		return err
	}
	if err := drain(); err != nil {
		return res, err
	}
	if why := postfixUnavailable(); why != "" {
		res.durableSkip = why
	} else if err := durableReference(ctx, res.runs, logf); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.durableSkip = err.Error()
		for i := range res.runs {
			res.runs[i].durable = rate{}
		}
	}
	for i := range res.runs {
		r := &res.runs[i]
		if err := drain(); err != nil {
			return res, err
		}
		logf("SMTP submissions to dev's gateway, %d messages over %d connections", r.messages, r.conns)
		if r.ours, err = submitSMTP(ctx, dev.smtp, dev.creds.APIKey, roots, r.messages, r.conns); err != nil {
			return res, err
		}
	}
	gw, err := startGateway(ctx, dev)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := gw.stop(); err != nil {
			logf("stopping posthaste smtp: %v", err)
		}
	}()
	for i := range res.runs {
		r := &res.runs[i]
		if err := drain(); err != nil {
			return res, err
		}
		logf("SMTP submissions to posthaste smtp, %d messages over %d connections", r.messages, r.conns)
		if r.standalone, err = submitSMTP(ctx, gw.smtp, dev.creds.APIKey, roots, r.messages, r.conns); err != nil {
			return res, err
		}
		standaloneAccepted += r.messages
	}
	for i := range res.runs {
		r := &res.runs[i]
		if err := drain(); err != nil {
			return res, err
		}
		logf("SMTP submissions to posthaste smtp with dev stopped, %d messages over %d connections", r.messages, r.conns)
		if r.alone, err = submitWhileStopped(ctx, dev, func() (rate, error) {
			return submitSMTP(ctx, gw.smtp, dev.creds.APIKey, roots, r.messages, r.conns)
		}); err != nil {
			return res, err
		}
		standaloneAccepted += r.messages
	}
	// The next step starts on a quiet dev too.
	if err := drain(); err != nil {
		return res, err
	}
	p("")
	p("smtp accept rate: messages/s, posthaste gateway (implicit TLS, AUTH once per connection, 1 KB sandbox")
	p("  messages) beside Postfix on this machine fed by smtp-source (plain text, no AUTH, 1 KB bodies);")
	p("  each run starts once dev has delivered everything accepted before it; the mail a run accepts is")
	p("  processed by dev meanwhile, on the same cores. \"posthaste smtp\" is the gateway as deployed, its own")
	p("  process against dev's PostgreSQL and Temporal. \"dev stopped\" is that process again with dev stopped")
	p("  (SIGSTOP) for the run, so that nothing is processed meanwhile: the gateway with the processing")
	p("  elsewhere, which the targets judge; the other rows are for information (that processing does not")
	p("  wait behind accepting is the latency step's probe)")
	if res.durableSkip != "" {
		p("  postfix durable queue: skipped: %s", res.durableSkip)
	}
	if res.sinkSkip != "" {
		p("  postfix smtp-sink: skipped: %s", res.sinkSkip)
	}
	for _, r := range res.runs {
		// vs is a gateway rate's ratio to the durable reference.
		vs := func(x rate, judged bool) string {
			if r.durable.n == 0 {
				return ""
			}
			if judged {
				return fmt.Sprintf("   ratio %.3f  (judged)", ratio(x, r.durable))
			}
			return fmt.Sprintf("   ratio %.3f  (not judged)", ratio(x, r.durable))
		}
		p("  c=%-2d %6d msgs  gateway inside dev          %8.1f msg/s%s", r.conns, r.messages, r.ours.perSecond(), vs(r.ours, false))
		if r.standalone.n > 0 {
			p("  c=%-2d %6d msgs  posthaste smtp (own process)%8.1f msg/s%s", r.conns, r.messages, r.standalone.perSecond(),
				vs(r.standalone, false))
		}
		if r.alone.n > 0 {
			p("  c=%-2d %6d msgs  posthaste smtp, dev stopped %8.1f msg/s%s", r.conns, r.messages, r.alone.perSecond(),
				vs(r.alone, true))
		}
		if r.durable.n > 0 {
			p("  c=%-2d %6d msgs  postfix durable queue       %8.1f msg/s   (all queued, fsynced, discarded)",
				r.conns, r.messages, r.durable.perSecond())
		}
		if r.sink.n > 0 {
			p("  c=%-2d %6d msgs  postfix smtp-sink, no queue %8.1f msg/s   ratio %.3f  (dev stopped / smtp-sink)",
				r.conns, r.messages, r.sink.perSecond(), ratio(r.judged(), r.sink))
		}
	}
	return res, nil
}

// submitWhileStopped runs submit while dev is stopped with SIGSTOP (its
// PostgreSQL, a process of its own, keeps running), and continues dev
// afterwards whatever happened.
func submitWhileStopped(ctx context.Context, dev *devProcess, submit func() (rate, error)) (rate, error) {
	if err := dev.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return rate{}, fmt.Errorf("stopping dev: %w", err)
	}
	r, err := submit()
	if cerr := dev.cmd.Process.Signal(syscall.SIGCONT); cerr != nil {
		return rate{}, errors.Join(err, fmt.Errorf("continuing dev: %w", cerr))
	}
	return r, err
}

// submitSMTP sends n messages over conns authenticated connections.
func submitSMTP(ctx context.Context, addr, key string, roots *x509.CertPool, n, conns int) (rate, error) {
	body := smtpMessage()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := smtpWorker(ctx, addr, key, roots, body, &next, int64(n)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return rate{}, err
	}
	return rate{n: n, elapsed: elapsed}, nil
}

func smtpWorker(ctx context.Context, addr, key string, roots *x509.CertPool, body []byte, next *atomic.Int64, n int64) error {
	c, err := dialSubmission(ctx, addr, key, roots)
	if err != nil {
		return err
	}
	defer c.Close()
	for next.Add(1) <= n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := submitOne(c, "onboarding@posthaste.test", "delivered@posthaste.test", body); err != nil {
			return err
		}
	}
	return c.Quit()
}

// dialSubmission connects to the gateway at addr (implicit TLS, its
// certificate signed by roots) and authenticates with the API key key.
// The caller closes the client.
func dialSubmission(ctx context.Context, addr, key string, roots *x509.CertPool) (*smtp.Client, error) {
	d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c, err := smtp.NewClient(conn, "localhost")
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.Auth(smtp.PlainAuth("", "posthaste", key, "localhost")); err != nil {
		c.Close()
		return nil, fmt.Errorf("AUTH: %w", err)
	}
	return c, nil
}

// submitOne sends msg from from to to over c in one transaction.
func submitOne(c *smtp.Client, from, to string, msg []byte) error {
	if err := c.Mail(from); err != nil {
		return fmt.Errorf("MAIL: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("RCPT: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	return nil
}

// smtpRoots returns a pool holding dev's SMTP certificate.
func smtpRoots(dev *devProcess) (*x509.CertPool, error) {
	pem, err := os.ReadFile(dev.smtpCert)
	if err != nil {
		return nil, fmt.Errorf("reading the SMTP certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return roots, nil
}

// smtpMessage is a sandbox message with a 1 KB body.
func smtpMessage() []byte {
	var b strings.Builder
	b.WriteString("From: onboarding@posthaste.test\r\nTo: delivered@posthaste.test\r\nSubject: bench\r\n\r\n")
	line := strings.Repeat("x", 78) + "\r\n"
	for b.Len() < smtpPayload+80 {
		b.WriteString(line)
	}
	return []byte(b.String())
}

// sinkReference runs smtp-sink on a free loopback port and times
// smtp-source sending n messages over conns kept-open connections to it.
func sinkReference(ctx context.Context, n, conns int) (rate, error) {
	_, errS := exec.LookPath("smtp-source")
	sink, errK := exec.LookPath("smtp-sink")
	if errS != nil || errK != nil {
		return rate{}, errors.New("smtp-source and smtp-sink not found: install Debian's postfix package (apt-get install -y postfix)")
	}
	ports, err := freePorts(1)
	if err != nil {
		return rate{}, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{addr, "256"}
	if u, err := user.Current(); err == nil && u.Uid == "0" {
		args = append([]string{"-u", "nobody"}, args...)
	}
	sinkCtx, stopSink := context.WithCancel(ctx)
	defer stopSink()
	sk := exec.CommandContext(sinkCtx, sink, args...)
	if err := sk.Start(); err != nil {
		return rate{}, fmt.Errorf("starting smtp-sink: %w", err)
	}
	defer func() { stopSink(); _ = sk.Wait() }()
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i > 50 {
			return rate{}, fmt.Errorf("smtp-sink did not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return smtpSource(ctx, addr, n, conns, "a@bench.test", "b@bench.test")
}
