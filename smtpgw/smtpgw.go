// Package smtpgw is Posthaste's SMTP submission gateway (RFC 6409), built on
// github.com/emersion/go-smtp. Clients authenticate with AUTH PLAIN or
// LOGIN after TLS (implicit, or STARTTLS), user name "posthaste" (or
// "resend", Resend's, so a configuration written for Resend works unchanged)
// and an API key as password; each message is handed as bytes to internal/submit,
// which validates, authorizes and accepts it exactly as the HTTP API does,
// under the same rate limit and request log.
//
// Every reply the gateway writes is an *smtp.SMTPError built here: internal
// failures become a generic 451, never their own text. A connection cap
// per client address, a growing delay after failed AUTH attempts from one
// address, read and write timeouts, and a graceful shutdown that lets
// transactions in progress finish protect the service.
package smtpgw

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/auththrottle"
	"github.com/posthaste/posthaste/internal/connlimit"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/smtpserve"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
)

// Username is the fixed AUTH user name; the password is an API key.
const Username = "posthaste"

// ResendUsername is Resend's SMTP user name, accepted as well as Username
// with the same API-key password.
const ResendUsername = "resend"

// Limits of a submission (API.md, SMTP submission).
const (
	MaxMessageBytes = submit.MaxMessageSize
	MaxRecipients   = 50
)

// Authenticator checks API keys.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (auth.Principal, error)
}

// Submitter accepts mail (internal/submit.Service).
type Submitter interface {
	CheckEnvelopeSender(ctx context.Context, from submit.Sender, addr string) error
	SendMessage(ctx context.Context, from submit.Sender, m submit.Message) (submit.SendResult, error)
}

// Limiter is the API's rate limiter: a submission takes one request from
// its team's bucket.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int) (ratelimit.Result, error)
}

// RequestLog takes request log entries.
type RequestLog interface {
	Log(e store.RequestLog) bool
}

// Listener is one address to accept connections on.
type Listener struct {
	Addr        string
	ImplicitTLS bool // TLS from the first byte (465); otherwise STARTTLS (587)
}

// Config wires a Gateway.
type Config struct {
	Listeners []Listener
	// TLS is the certificate configuration; required (AUTH is only
	// offered over TLS).
	TLS *tls.Config
	// Hostname is the name in the greeting.
	Hostname string

	Auth   Authenticator
	Submit Submitter
	// Limiter and DefaultRate apply the API's rate limit; a nil Limiter
	// disables it.
	Limiter     Limiter
	DefaultRate int
	RequestLog  RequestLog // may be nil
	Metrics     *telemetry.Metrics
	Logger      *slog.Logger

	// MaxConnsPerIP caps simultaneous connections per client address
	// (default 20).
	MaxConnsPerIP int
	// ReadTimeout and WriteTimeout bound each command and reply (defaults
	// 5 and 1 minutes, RFC 5321 §4.5.3.2).
	ReadTimeout, WriteTimeout time.Duration
	// SessionTimeout bounds a connection's life (default 30 minutes);
	// MaxIdleCommands caps the commands it reads in a row outside a
	// transaction (default 50). Past either, the client is answered 421
	// and the connection closed.
	SessionTimeout  time.Duration
	MaxIdleCommands int
	// Throttle delays AUTH attempts from an address after failures; nil
	// uses auththrottle.NewDelays's defaults.
	Throttle *auththrottle.Delays
}

// Gateway is a running SMTP submission server.
type Gateway struct {
	cfg    Config
	srv    *smtpserve.Server // with the per-address cap; tracks connections for Shutdown
	logger *slog.Logger
	thr    *auththrottle.Delays

	mu      sync.Mutex
	addrs   []net.Addr
	serving int // listeners whose Serve loop runs
	served  sync.WaitGroup
}

// New returns a Gateway; Start opens its listeners.
func New(cfg Config) (*Gateway, error) {
	if cfg.TLS == nil {
		return nil, errors.New("smtp: a TLS certificate is required (POSTHASTE_TLS_CERT_FILE and POSTHASTE_TLS_KEY_FILE)")
	}
	if cfg.Auth == nil || cfg.Submit == nil {
		return nil, errors.New("smtp: Auth and Submit are required")
	}
	if cfg.MaxConnsPerIP <= 0 {
		cfg.MaxConnsPerIP = 20
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Minute
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = time.Minute
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	if cfg.MaxIdleCommands <= 0 {
		cfg.MaxIdleCommands = 50
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, logger: cfg.Logger.With("component", "smtp"), thr: cfg.Throttle}
	if g.thr == nil {
		g.thr = auththrottle.NewDelays(auththrottle.DelaysConfig{})
	}
	g.srv = smtpserve.New(smtpserve.Config{Hostname: cfg.Hostname, TLS: cfg.TLS, MaxMessageBytes: MaxMessageBytes,
		MaxRecipients: MaxRecipients, ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout,
		Limits: connlimit.Limits{PerIP: cfg.MaxConnsPerIP, Session: cfg.SessionTimeout,
			IdleCommands: cfg.MaxIdleCommands}, Logger: g.logger}, g)
	return g, nil
}

// Start listens on every configured address and serves in the background.
// It fails, with nothing left open, when one cannot be bound.
func (g *Gateway) Start() error {
	var lns []net.Listener
	for _, l := range g.cfg.Listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, o := range lns {
				_ = o.Close()
			}
			return fmt.Errorf("smtp: listening on %s: %w", l.Addr, err)
		}
		lns = append(lns, ln)
	}
	g.mu.Lock()
	for i, ln := range lns {
		implicitTLS := g.cfg.Listeners[i].ImplicitTLS
		g.addrs = append(g.addrs, ln.Addr())
		g.serving++
		g.served.Add(1)
		go func() {
			defer g.served.Done()
			err := g.srv.Serve(ln, implicitTLS, g.hooks())
			g.mu.Lock()
			g.serving--
			g.mu.Unlock()
			if err != nil {
				g.logger.Error("serving SMTP stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	g.mu.Unlock()
	return nil
}

// Addrs returns the bound addresses, in the order of Config.Listeners.
func (g *Gateway) Addrs() []net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]net.Addr(nil), g.addrs...)
}

// Ready reports whether every listener accepts connections.
func (g *Gateway) Ready(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.srv.Draining():
		return errors.New("shutting down")
	case len(g.addrs) == 0 || g.serving < len(g.addrs):
		return errors.New("SMTP listeners are not accepting connections")
	}
	return nil
}

// Shutdown stops accepting connections, closes idle ones at once and lets
// each transaction in progress (MAIL FROM through the reply to DATA)
// finish; a connection is closed as soon as its transaction ends. When ctx
// ends first, the remaining connections are cut.
func (g *Gateway) Shutdown(ctx context.Context) error {
	err := g.srv.Shutdown(ctx)
	g.served.Wait()
	return err
}

// NewSession implements smtp.Backend; it is called at EHLO/HELO.
func (g *Gateway) NewSession(c *smtp.Conn) (smtp.Session, error) {
	tc := connlimit.Of(c.Conn())
	s := &session{g: g, conn: c, tracked: tc, helo: c.Hostname()}
	if tc != nil {
		s.ip = tc.IP.String()
	}
	return s, nil
}
