// Package smtptest runs an SMTP server on loopback that plays a recipient's
// MX host in tests.
//
// The server is github.com/emersion/go-smtp on a real socket. Options choose
// what it advertises (STARTTLS with an in-memory self-signed certificate,
// SIZE, SMTPUTF8, PIPELINING) and how it answers (hooks that pick the reply to
// a MAIL, RCPT or DATA, or drop the connection in the middle of DATA). It
// records every accepted message and counts TCP connections, so tests can
// assert on connection reuse.
package smtptest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/posthaste/posthaste/internal/selfsigned"
)

// Options configures a Server. The zero value is a plaintext server that
// accepts everything.
type Options struct {
	// Addr is the listen address; empty means "127.0.0.1:0". Tests that need
	// several MX hosts on the same port listen on other loopback addresses
	// (127.0.0.2, 127.0.0.3, ...) with the first server's port.
	Addr string
	// Domain is the name in the greeting; empty means "mx.smtptest".
	Domain string

	// STARTTLS offers STARTTLS with a self-signed certificate made in memory
	// for CertHosts (names and IP literals; "localhost" and "127.0.0.1" are
	// always included). CertPool returns a pool that trusts it.
	STARTTLS  bool
	CertHosts []string
	// BrokenSTARTTLS offers STARTTLS but fails every handshake (the server
	// has no certificate), as misconfigured servers do.
	BrokenSTARTTLS bool

	// MaxMessageBytes is advertised in SIZE (RFC 1870); 0 advertises SIZE
	// without a limit.
	MaxMessageBytes int64
	// MaxRecipients makes RCPT answer 452 4.5.3 past this many recipients in
	// one transaction; 0 means no limit.
	MaxRecipients int
	// SMTPUTF8 advertises and accepts SMTPUTF8 (RFC 6531).
	SMTPUTF8 bool
	// NoPipelining hides PIPELINING (RFC 2920) from the EHLO reply of
	// plaintext sessions; go-smtp still reads pipelined commands.
	NoPipelining bool

	// Mail, when set, chooses the reply to MAIL FROM: a non-nil error
	// (usually *smtp.SMTPError) is sent instead of 250. n counts MAIL
	// commands on this server, from 1.
	Mail func(from string, n int) error
	// Rcpt chooses the reply to RCPT TO; n counts the RCPT commands naming
	// this address on this server, from 1, so "451 then 250" is n == 1.
	Rcpt func(rcpt string, n int) error
	// Data chooses the reply after the final dot; n counts messages whose
	// data was fully received, from 1.
	Data func(rcpts []string, n int) error
	// DropData, when it returns true, closes the connection after reading
	// the start of the message data, without a reply. n counts DATA
	// transfers, from 1.
	DropData func(n int) bool
}

// Message is one message the server accepted.
type Message struct {
	From       string
	To         []string
	Data       []byte
	TLS        bool   // STARTTLS was in effect
	Helo       string // name given in EHLO/HELO
	RemoteAddr string // client address, "ip:port"
	UTF8       bool   // MAIL FROM carried SMTPUTF8
	Body       smtp.BodyType
	Size       int64 // SIZE parameter of MAIL FROM, 0 when absent
}

// Server is a running SMTP server. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *smtp.Server
	ln   net.Listener
	pool *x509.CertPool

	certPEM []byte

	mu        sync.Mutex
	msgs      []Message
	notify    chan struct{} // closed and replaced whenever a message arrives
	conns     map[net.Conn]struct{}
	maxOpen   int // most connections open at once
	accepted  int
	mails     int
	rcpts     map[string]int
	transfers int // DATA transfers started
	received  int // DATA transfers read to the final dot
}

// NewServer starts a server and closes it in t.Cleanup.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Domain == "" {
		opts.Domain = "mx.smtptest"
	}
	s := &Server{
		opts:   opts,
		notify: make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
		rcpts:  make(map[string]int),
	}

	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = opts.Domain
	srv.MaxMessageBytes = opts.MaxMessageBytes
	srv.MaxRecipients = opts.MaxRecipients
	srv.EnableSMTPUTF8 = opts.SMTPUTF8
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	if opts.STARTTLS {
		cert, pool, err := selfSigned(append([]string{"localhost", "127.0.0.1", opts.Domain}, opts.CertHosts...))
		if err != nil {
			t.Fatalf("smtptest: %v", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.pool = pool
		s.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	}
	if opts.BrokenSTARTTLS {
		srv.TLSConfig = &tls.Config{}
	}
	s.srv = srv

	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		t.Fatalf("smtptest: listening: %v", err)
	}
	s.ln = ln
	go func() { _ = srv.Serve(&listener{Listener: ln, s: s}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// Addr returns the listen address, "ip:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port returns the listen port.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// CertPool returns a pool trusting the server's certificate, or nil without
// STARTTLS.
func (s *Server) CertPool() *x509.CertPool { return s.pool }

// CertPEM returns the server's certificate in PEM, for processes that
// read trusted roots from a file, or nil without STARTTLS.
func (s *Server) CertPEM() []byte { return s.certPEM }

// Connections returns how many TCP connections the server has accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// OpenConnections returns how many client connections are open now.
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// MaxOpenConnections returns the most client connections that were open
// at once. The server sees a client's close when it reads it, so a
// client that closes one connection and opens another may briefly count
// for two.
func (s *Server) MaxOpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxOpen
}

// MailCommands returns how many MAIL FROM commands the server has received,
// accepted or not.
func (s *Server) MailCommands() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mails
}

// CloseConnections closes every open client connection without a reply,
// as a server restart or an idle timeout would.
func (s *Server) CloseConnections() {
	s.mu.Lock()
	open := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// Messages returns the messages accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// WaitMessages waits until at least n messages have arrived and returns
// them; it fails the test after timeout.
func (s *Server) WaitMessages(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		msgs := append([]Message(nil), s.msgs...)
		ch := s.notify
		s.mu.Unlock()
		if len(msgs) >= n {
			return msgs
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("smtptest: got %d messages after %v, want %d", len(msgs), timeout, n)
			return nil
		}
	}
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{s: s, c: c}, nil
}

func (s *Server) record(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	close(s.notify)
	s.notify = make(chan struct{})
}

// session is one SMTP session (go-smtp starts a new one after STARTTLS).
type session struct {
	s    *Server
	c    *smtp.Conn
	from string
	opts smtp.MailOptions
	to   []string
}

var _ smtp.Session = (*session)(nil)

func (ss *session) Mail(from string, opts *smtp.MailOptions) error {
	ss.s.mu.Lock()
	ss.s.mails++
	n := ss.s.mails
	ss.s.mu.Unlock()
	if ss.s.opts.Mail != nil {
		if err := ss.s.opts.Mail(from, n); err != nil {
			return err
		}
	}
	ss.from = from
	ss.opts = smtp.MailOptions{}
	if opts != nil {
		ss.opts = *opts
	}
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.mu.Lock()
	ss.s.rcpts[to]++
	n := ss.s.rcpts[to]
	ss.s.mu.Unlock()
	if ss.s.opts.Rcpt != nil {
		if err := ss.s.opts.Rcpt(to, n); err != nil {
			return err
		}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	ss.s.mu.Lock()
	ss.s.transfers++
	n := ss.s.transfers
	ss.s.mu.Unlock()
	if ss.s.opts.DropData != nil && ss.s.opts.DropData(n) {
		_, _ = io.ReadFull(r, make([]byte, 16))
		_ = ss.c.Conn().Close()
		return errors.New("connection dropped")
	}

	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.received++
	n = ss.s.received
	ss.s.mu.Unlock()
	if ss.s.opts.Data != nil {
		if err := ss.s.opts.Data(append([]string(nil), ss.to...), n); err != nil {
			return err
		}
	}
	_, isTLS := ss.c.TLSConnectionState()
	ss.s.record(Message{
		From:       ss.from,
		To:         append([]string(nil), ss.to...),
		Data:       data,
		TLS:        isTLS,
		Helo:       ss.c.Hostname(),
		RemoteAddr: ss.c.Conn().RemoteAddr().String(),
		UTF8:       ss.opts.UTF8,
		Body:       ss.opts.Body,
		Size:       ss.opts.Size,
	})
	return nil
}

func (ss *session) Reset() {
	ss.from = ""
	ss.opts = smtp.MailOptions{}
	ss.to = nil
}

func (ss *session) Logout() error { return nil }

// listener counts and tracks accepted connections.
type listener struct {
	net.Listener
	s *Server
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &conn{Conn: c, s: l.s, hidePipelining: l.s.opts.NoPipelining}
	l.s.mu.Lock()
	l.s.accepted++
	l.s.conns[tc] = struct{}{}
	l.s.maxOpen = max(l.s.maxOpen, len(l.s.conns))
	l.s.mu.Unlock()
	return tc, nil
}

// conn forgets itself on Close and, for NoPipelining, drops the PIPELINING
// line of the EHLO reply (go-smtp writes each reply line with one Write).
type conn struct {
	net.Conn
	s              *Server
	hidePipelining bool
}

var pipeliningLine = []byte("250-PIPELINING\r\n")

func (c *conn) Write(p []byte) (int, error) {
	if c.hidePipelining && bytes.Equal(p, pipeliningLine) {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// selfSigned makes a self-signed certificate valid for hosts and a pool
// that trusts it.
func selfSigned(hosts []string) (tls.Certificate, *x509.CertPool, error) {
	c, err := selfsigned.New(selfsigned.Options{Hosts: hosts, Organization: "smtptest", Validity: 24 * time.Hour, CA: true})
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	return c, pool, nil
}

// Reply builds a reply for the hooks from a code and a text that may start
// with an enhanced status code: Reply(451, "4.7.1 greylisted"). Without one,
// the reply carries none.
func Reply(code int, text string) *smtp.SMTPError {
	e := &smtp.SMTPError{Code: code, Message: text, EnhancedCode: smtp.NoEnhancedCode}
	first, rest, _ := strings.Cut(text, " ")
	parts := strings.Split(first, ".")
	if len(parts) != 3 {
		return e
	}
	var ec smtp.EnhancedCode
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return e
		}
		ec[i] = n
	}
	e.EnhancedCode = ec
	e.Message = rest
	return e
}
