package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// The recipients' side of the chaos run: two domains, each with its own MX
// host on one shared port (127.0.0.1 and 127.0.0.2, since Posthaste dials
// every MX on POSTHASTE_MX_PORT), published by a loopback DNS server.
const (
	chaosRcptA = "chaos@a.test" // its MX accepts at once
	chaosRcptB = "chaos@b.test" // its MX defers every RCPT at first
	// chaosKeyHeader carries the idempotency key in every message, so the
	// MX can tell two emails accepted for one key from one email delivered
	// twice.
	chaosKeyHeader = "X-Chaos-Key"
)

// mxCounts counts what the MX hosts accepted, per (email id, recipient)
// and per (idempotency key, recipient). It is safe for concurrent use.
type mxCounts struct {
	mu       sync.Mutex
	byID     map[string]int // id + " " + recipient
	byKey    map[string]int // key + " " + recipient
	messages map[string]int // MX name → messages accepted
	unknown  int            // messages without our Message-ID or key
	// at holds when each copy of a (key, recipient) arrived, to place a
	// duplicate among the rounds.
	at map[string][]time.Time
}

func newMXCounts() *mxCounts {
	return &mxCounts{byID: map[string]int{}, byKey: map[string]int{}, messages: map[string]int{},
		at: map[string][]time.Time{}}
}

func (c *mxCounts) record(mx, id, key string, rcpts []string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.messages[mx]++
	if id == "" || key == "" {
		c.unknown++
		return
	}
	for _, r := range rcpts {
		r = strings.ToLower(r)
		c.byID[id+" "+r]++
		c.byKey[key+" "+r]++
		c.at[key+" "+r] = append(c.at[key+" "+r], now)
	}
}

// total returns the number of messages accepted, ours or not.
func (c *mxCounts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.messages {
		n += m
	}
	return n
}

// mxSnapshot is a copy of the counts.
type mxSnapshot struct {
	byID, byKey, messages map[string]int
	unknown               int
	at                    map[string][]time.Time
}

func (c *mxCounts) snapshot() mxSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := make(map[string][]time.Time, len(c.at))
	for k, v := range c.at {
		at[k] = slices.Clone(v)
	}
	return mxSnapshot{byID: maps.Clone(c.byID), byKey: maps.Clone(c.byKey), messages: maps.Clone(c.messages),
		unknown: c.unknown, at: at}
}

// mxSink is an SMTP server that accepts every message and counts it. With
// a deferral period it answers 451 4.7.1 to every RCPT until that long
// after the first RCPT it saw: a receiver that greylists "for a while".
type mxSink struct {
	name   string
	counts *mxCounts
	srv    *smtp.Server
	ln     net.Listener

	deferFor time.Duration
	now      func() time.Time
	// inspect, when not nil, sees every message the sink counts, with
	// its recipients and when it arrived (read whole), just before it is
	// counted; it must be safe for concurrent use.
	inspect func(msg []byte, rcpts []string, at time.Time)

	mu       sync.Mutex
	first    time.Time // of the first RCPT
	deferred int       // RCPTs answered 451
}

// startMXSink listens on addr ("ip:port") and serves until close.
func startMXSink(name, addr string, deferFor time.Duration, counts *mxCounts) (*mxSink, error) {
	return startInspectingMXSink(name, addr, deferFor, counts, nil)
}

// startInspectingMXSink is startMXSink with an inspect function (nil for
// none).
func startInspectingMXSink(name, addr string, deferFor time.Duration, counts *mxCounts,
	inspect func(msg []byte, rcpts []string, at time.Time)) (*mxSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for MX %s: %w", name, err)
	}
	s := &mxSink{name: name, counts: counts, ln: ln, deferFor: deferFor, now: time.Now, inspect: inspect}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &sinkSession{s: s}, nil
	}))
	s.srv.Domain = name
	s.srv.ReadTimeout = time.Minute
	s.srv.WriteTimeout = time.Minute
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *mxSink) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *mxSink) close() { _ = s.srv.Close() }

// deferRcpt reports whether this RCPT is answered 451.
func (s *mxSink) deferRcpt() bool {
	if s.deferFor <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.first.IsZero() {
		s.first = now
	}
	if now.Sub(s.first) < s.deferFor {
		s.deferred++
		return true
	}
	return false
}

func (s *mxSink) deferredRcpts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deferred
}

// sinkSession is one SMTP session of an mxSink.
type sinkSession struct {
	s  *mxSink
	to []string
}

var _ smtp.Session = (*sinkSession)(nil)

func (ss *sinkSession) Mail(string, *smtp.MailOptions) error { ss.to = nil; return nil }

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.s.deferRcpt() {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Try again later"}
	}
	ss.to = append(ss.to, to)
	return nil
}

// Data counts the message once it has been read whole, just before the
// 250 goes out: a message cut off in the middle is not counted.
func (ss *sinkSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	now := ss.s.now()
	if ss.s.inspect != nil {
		ss.s.inspect(data, ss.to, now)
	}
	id, key := chaosHeaders(data)
	ss.s.counts.record(ss.s.name, id, key, ss.to, now)
	return nil
}

func (ss *sinkSession) Reset() { ss.to = nil }

func (ss *sinkSession) Logout() error { return nil }

// chaosHeaders returns the email id of the Message-ID field ("<id@domain>")
// and the idempotency key of a message; "" for what is missing.
func chaosHeaders(msg []byte) (id, key string) {
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(msg))).ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return "", ""
	}
	mid := strings.TrimSpace(h.Get("Message-Id"))
	if strings.HasPrefix(mid, "<") && strings.HasSuffix(mid, ">") {
		id, _, _ = strings.Cut(mid[1:len(mid)-1], "@")
	}
	return id, strings.TrimSpace(h.Get(chaosKeyHeader))
}

// recipientSide is the DNS server and the two MX hosts of a chaos run.
type recipientSide struct {
	dns    *dnstest.Server
	a, b   *mxSink
	counts *mxCounts
}

// startRecipientSide starts the DNS server and the MX hosts of a.test
// (127.0.0.1) and b.test (127.0.0.2, deferring RCPTs for deferB) on one
// port.
func startRecipientSide(deferB time.Duration) (*recipientSide, error) {
	dns, err := dnstest.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the DNS server: %w", err)
	}
	r := &recipientSide{dns: dns, counts: newMXCounts()}
	// Another process may hold the port on 127.0.0.2: try a few.
	var lastErr error
	for range 10 {
		a, err := startMXSink("mx.a.test", "127.0.0.1:0", 0, r.counts)
		if err != nil {
			dns.Close()
			return nil, err
		}
		b, err := startMXSink("mx.b.test", "127.0.0.2:"+strconv.Itoa(a.port()), deferB, r.counts)
		if err != nil {
			a.close()
			lastErr = err
			continue
		}
		r.a, r.b = a, b
		break
	}
	if r.a == nil {
		dns.Close()
		return nil, errors.Join(errors.New("no port free on both 127.0.0.1 and 127.0.0.2"), lastErr)
	}
	for domain, ip := range map[string]string{"a.test": "127.0.0.1", "b.test": "127.0.0.2"} {
		dns.AddMX(domain, "mx."+domain, 10)
		dns.AddA("mx."+domain, ip)
	}
	return r, nil
}

func (r *recipientSide) port() int { return r.a.port() }

func (r *recipientSide) close() {
	r.a.close()
	r.b.close()
	r.dns.Close()
}
