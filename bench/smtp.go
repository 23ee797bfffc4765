package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// smtpPayload is the body size of the messages, as smtp-source -l sends.
const smtpPayload = 1024

// smtpRun is one measured SMTP run: messages over conns connections.
type smtpRun struct {
	conns    int
	messages int
	ours     rate
	postfix  rate // smtp-source → smtp-sink; zero when unavailable
}

// measureSMTP measures messages accepted per second by the gateway over 1
// and over 16 connections, each authenticating once and then submitting
// its share of the messages one after the other (1 KB sandbox messages,
// implicit TLS); the reference is Postfix's smtp-source sending as many
// messages of the same payload over as many connections (-d: kept open)
// into Postfix's smtp-sink on this machine, in plain text and without
// authentication, run just before.
func measureSMTP(ctx context.Context, dev *devProcess, c counts, p func(string, ...any), logf func(string, ...any)) ([]smtpRun, error) {
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(dev.smtpCert)
	if err != nil {
		return nil, fmt.Errorf("reading the SMTP certificate: %w", err)
	}
	roots.AppendCertsFromPEM(pem)
	runs := []smtpRun{{conns: 1, messages: c.smtpSerial}, {conns: c.conc, messages: c.smtpBurst}}
	for i := range runs {
		r := &runs[i]
		logf("postfix smtp-source -> smtp-sink, %d messages over %d connections", r.messages, r.conns)
		r.postfix, err = postfixReference(ctx, r.messages, r.conns)
		if err != nil {
			p("smtp reference unavailable: %v", err)
		}
	}
	for i := range runs {
		r := &runs[i]
		logf("SMTP submissions, %d messages over %d connections", r.messages, r.conns)
		if r.ours, err = submitSMTP(ctx, dev.smtp, dev.creds.APIKey, roots, r.messages, r.conns); err != nil {
			return nil, err
		}
	}
	for _, r := range runs {
		line := fmt.Sprintf("smtp accept c=%-2d %6d msgs  %8.1f msg/s", r.conns, r.messages, r.ours.perSecond())
		if r.postfix.n > 0 {
			line += fmt.Sprintf("   postfix smtp-source->smtp-sink %8.1f msg/s   ratio %.3f",
				r.postfix.perSecond(), r.ours.perSecond()/r.postfix.perSecond())
		}
		p("%s", line)
	}
	return runs, nil
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
	d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c, err := smtp.NewClient(conn, "localhost")
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if err := c.Auth(smtp.PlainAuth("", "posthaste", key, "localhost")); err != nil {
		return fmt.Errorf("AUTH: %w", err)
	}
	for next.Add(1) <= n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := c.Mail("onboarding@posthaste.test"); err != nil {
			return fmt.Errorf("MAIL: %w", err)
		}
		if err := c.Rcpt("delivered@posthaste.test"); err != nil {
			return fmt.Errorf("RCPT: %w", err)
		}
		w, err := c.Data()
		if err != nil {
			return fmt.Errorf("DATA: %w", err)
		}
		if _, err := w.Write(body); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("DATA: %w", err)
		}
	}
	return c.Quit()
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

// postfixReference runs smtp-sink on a free loopback port and times
// smtp-source sending n messages over conns kept-open connections to it.
func postfixReference(ctx context.Context, n, conns int) (rate, error) {
	source, errS := exec.LookPath("smtp-source")
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
	start := time.Now()
	out, err := exec.CommandContext(ctx, source, "-d", "-m", strconv.Itoa(n), "-s", strconv.Itoa(conns),
		"-l", strconv.Itoa(smtpPayload), "-f", "a@bench.test", "-t", "b@bench.test", addr).CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return rate{}, fmt.Errorf("smtp-source: %v: %s", err, out)
	}
	return rate{n: n, elapsed: elapsed}, nil
}
