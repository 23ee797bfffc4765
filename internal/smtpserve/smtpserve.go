// Package smtpserve is the listener base of Posthaste's two SMTP servers,
// the submission gateway (smtpgw) and the inbound MX (internal/mxlisten):
// one github.com/emersion/go-smtp server under a connlimit.Limiter, with
// its read and write timeouts, message size and recipient caps, SMTPUTF8,
// the 421 answers to connections that are not admitted, go-smtp's own log
// routed to slog, and a graceful shutdown that lets transactions in
// progress finish.
//
// What the two servers do with a session (AUTH and submission, or routing
// and receiving) stays in their own packages: each passes its
// smtp.Backend to New and marks its transactions with SetBusy.
package smtpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/posthaste/posthaste/internal/connlimit"
)

// Config configures a Server. Every field is used as given: the servers
// apply their own defaults.
type Config struct {
	// Hostname is the name in the greeting.
	Hostname string
	// TLS is offered as STARTTLS (RFC 3207) and used by implicit TLS
	// listeners; nil offers no TLS.
	TLS *tls.Config
	// MaxMessageBytes caps a message, advertised as SIZE (RFC 1870);
	// MaxRecipients caps the recipients of one transaction.
	MaxMessageBytes int64
	MaxRecipients   int
	// ReadTimeout and WriteTimeout bound each command and reply (RFC 5321
	// §4.5.3.2). ReadTimeout must be set: the session deadline and the
	// command cap of Limits work through it.
	ReadTimeout, WriteTimeout time.Duration
	// AllowInsecureAuth is go-smtp's: whether AUTH may be used before TLS.
	AllowInsecureAuth bool
	// Limits are the connection caps, session deadline and idle command
	// cap.
	Limits connlimit.Limits
	// Logger takes go-smtp's own log lines, at debug level; required.
	Logger *slog.Logger
}

// Server is a go-smtp server whose listeners admit connections under
// connection caps.
type Server struct {
	tls   *tls.Config
	srv   *smtp.Server
	conns *connlimit.Limiter
}

// New returns a Server whose sessions be creates.
func New(cfg Config, be smtp.Backend) *Server {
	s := smtp.NewServer(be)
	s.Domain = cfg.Hostname
	s.TLSConfig = cfg.TLS // nil: STARTTLS is not advertised
	s.MaxMessageBytes = cfg.MaxMessageBytes
	s.MaxRecipients = cfg.MaxRecipients
	s.ReadTimeout, s.WriteTimeout = cfg.ReadTimeout, cfg.WriteTimeout
	s.EnableSMTPUTF8 = true
	s.AllowInsecureAuth = cfg.AllowInsecureAuth
	s.ErrorLog = slogLogger{cfg.Logger}
	return &Server{tls: cfg.TLS, srv: s, conns: connlimit.New(cfg.Limits)}
}

// Refusals are the answers to a connection that is not admitted (RFC 5321
// §3.1: 421 instead of the greeting, then close).
var Refusals = map[connlimit.Refusal]string{
	connlimit.Draining:    "421 4.3.2 Service shutting down, try again later\r\n",
	connlimit.OverTotal:   "421 4.3.2 Too many connections, try again later\r\n",
	connlimit.OverPerIP:   "421 4.7.0 Too many connections from your address, try again later\r\n",
	connlimit.OverPerNet:  "421 4.7.0 Too many connections from your network, try again later\r\n",
	connlimit.OverReserve: "421 4.3.2 Too many connections, try again later\r\n",
}

// Serve accepts connections on l until Shutdown, and closes l. With
// implicitTLS the connections speak TLS from the first byte (port 465)
// and a refused one is closed unanswered, since the answer cannot be
// written in clear text; otherwise it is answered with its Refusals line.
// h observes the connections (its Refused is called before the answer).
// Serve returns nil after Shutdown, and at once when Shutdown has begun.
func (s *Server) Serve(l net.Listener, implicitTLS bool, h connlimit.Hooks) error {
	if s.conns.Draining() {
		_ = l.Close()
		return nil
	}
	observe := h.Refused
	h.Refused = func(c net.Conn, ip netip.Addr, why connlimit.Refusal) {
		if observe != nil {
			observe(c, ip, why)
		}
		if !implicitTLS {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, Refusals[why])
		}
	}
	ln := s.conns.Listener(l, h)
	if implicitTLS {
		ln = tls.NewListener(ln, s.tls)
	}
	err := s.srv.Serve(ln)
	if errors.Is(err, smtp.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("serving %s: %w", l.Addr(), err)
	}
	return nil
}

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.conns.Draining() }

// SetBusy marks a connection as inside a transaction (MAIL FROM through
// the reply to DATA) or out of it; see connlimit.Limiter.SetBusy. c may
// be nil (a connection the Server did not accept).
func (s *Server) SetBusy(c *connlimit.Conn, busy bool) bool { return s.conns.SetBusy(c, busy) }

// Shutdown stops accepting connections, closes idle ones at once and lets
// each transaction in progress finish; a connection is closed as soon as
// its transaction ends. When ctx ends first, the remaining connections are
// cut and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.conns.Shutdown(ctx, func() error { return s.srv.Shutdown(context.Background()) }, s.srv.Close)
	if errors.Is(err, smtp.ErrServerClosed) {
		err = nil
	}
	return err
}

// slogLogger routes go-smtp's own log lines (connection errors) to slog.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s slogLogger) Println(v ...any)               { s.l.Debug(fmt.Sprint(v...)) }
