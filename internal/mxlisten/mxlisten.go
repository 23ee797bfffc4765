// Package mxlisten is Posthaste's inbound MX: the SMTP listener (RFC 5321)
// that receives mail addressed to Posthaste, bounces and replies to the
// return paths of the emails it sent, and mail for the domains whose
// receiving is enabled. It is built on github.com/emersion/go-smtp.
//
// The inbound MX is its own listener and process role, separate from the
// submission gateway (package smtpgw): it offers no AUTH at all, and the
// gateway keeps its submission ports (587, 465). Run them on different
// ports or hosts; the MX conventionally listens on port 25.
//
// The listener never relays. Every recipient is normalized
// (NormalizeRecipient refuses "%" and "!" hacks, quoted local parts that
// hide an "@", address literals, trailing dots; 550 5.1.3) and then routed
// by a Router; one that is not ours is refused at RCPT with 550 5.1.1.
// Source routes are ignored (RFC 5321 §4.1.1.3): <@a:user@x> is user@x,
// accepted only when user@x is ours. A message is read
// under a hard size cap (552 5.3.4 over it, nothing kept), authenticated
// (SPF, DKIM and DMARC results are recorded, never used to refuse), given
// a Received header (RFC 5321 §4.4) and handed to an Acceptor; the 250
// reply to DATA is sent only once the Acceptor has committed it. Internal
// failures become a generic 451 whose text never carries the error.
//
// Rates of messages per client address and network, a rate of mail to
// each team's return paths and a budget of each team's received mail
// bound what strangers can make it keep (limits.go; 4xx over them).
// Caps on connections in total, per client (an IPv4 address, an IPv6
// /64) and per network (an IPv4 /24, an IPv6 /48), with a part of the
// total kept for networks holding none (421 over them), read and write
// timeouts, a deadline per session and a cap on the commands read outside
// a transaction (421 and close past them), a recipient cap per
// transaction (452 over it) and a graceful shutdown that lets transactions
// in progress finish protect the service.
//
// Memory: a message of up to spoolMemory (1 MiB) is held once, as one
// []byte; a larger one stays in its spool file (Message.Spool), which the
// authentication checks and the Acceptor read as a stream, so a
// connection holds at most about spoolMemory whatever the message's size.
package mxlisten

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/posthaste/posthaste/internal/connlimit"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/smtpserve"
)

// Defaults of Config.
const (
	// DefaultMaxMessageBytes is 40 MiB, the largest message Posthaste
	// promises to receive, plus 4 MiB of headroom for the header fields
	// relays add on the way (Received, DKIM-Signature, ARC sets).
	DefaultMaxMessageBytes = 44 << 20
	DefaultMaxRecipients   = 100
	DefaultMaxConns        = 200
	DefaultMaxConnsPerIP   = 10
	DefaultMaxConnsPerNet  = 40
	// DefaultConnReservePercent of MaxConns is kept for networks that
	// hold no connection.
	DefaultConnReservePercent = 20
	// DefaultSessionTimeout bounds a connection's life: two DATA
	// timeouts of RFC 5321 §4.5.3.2 (10 minutes each).
	DefaultSessionTimeout = 20 * time.Minute
	// DefaultMaxIdleCommands caps the commands read in a row outside a
	// transaction (NOOP, RSET, VRFY, HELP, EHLO...).
	DefaultMaxIdleCommands = 30
	// DefaultReadTimeout is RFC 5321 §4.5.3.2's server timeout (5 minutes).
	DefaultReadTimeout  = 5 * time.Minute
	DefaultWriteTimeout = time.Minute
	// DefaultAuthTimeout bounds the SPF, DKIM and DMARC lookups of a message.
	DefaultAuthTimeout = 20 * time.Second
	// DefaultCommandTimeout bounds a Route or an Accept call.
	DefaultCommandTimeout = time.Minute
)

// Config configures a Server.
type Config struct {
	// Hostname is the name in the greeting, the Received header and the
	// Authentication-Results header; required.
	Hostname string
	// TLS, when set, makes the listener offer STARTTLS (RFC 3207).
	TLS *tls.Config
	// MaxMessageBytes caps a message (DefaultMaxMessageBytes); it is
	// advertised as SIZE (RFC 1870). go-smtp counts it exclusively: a
	// message must be smaller.
	MaxMessageBytes int64
	// MaxRecipients caps the recipients of one transaction
	// (DefaultMaxRecipients).
	MaxRecipients int
	// MaxConns, MaxConnsPerIP and MaxConnsPerNet cap simultaneous
	// connections in total, per client (an IPv4 address or an IPv6 /64)
	// and per network (an IPv4 /24 or an IPv6 /48) (DefaultMaxConns,
	// DefaultMaxConnsPerIP, DefaultMaxConnsPerNet).
	MaxConns, MaxConnsPerIP, MaxConnsPerNet int
	// ConnReservePercent of MaxConns is kept for networks holding no
	// connection (DefaultConnReservePercent; negative: none).
	ConnReservePercent int
	// SessionTimeout bounds a connection's life (DefaultSessionTimeout);
	// MaxIdleCommands caps the commands it reads in a row outside a
	// transaction (DefaultMaxIdleCommands). Past either, the client is
	// answered 421 and the connection closed.
	SessionTimeout  time.Duration
	MaxIdleCommands int
	// ReadTimeout and WriteTimeout bound each command and reply
	// (DefaultReadTimeout, DefaultWriteTimeout).
	ReadTimeout, WriteTimeout time.Duration
	// AuthTimeout bounds the authentication lookups of one message
	// (DefaultAuthTimeout); CommandTimeout a Route or Accept call
	// (DefaultCommandTimeout).
	AuthTimeout, CommandTimeout time.Duration
	// Resolver answers the SPF, DKIM and DMARC lookups; nil is
	// net.DefaultResolver.
	Resolver *net.Resolver
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// TempDir holds the spool files of large messages while they are read
	// (os.TempDir() when "").
	TempDir string
	// Limits are the message rates (none when zero); Budget the default
	// budget of each team's receiving domains (see limits.go).
	Limits Limits
	Budget inmail.Budget
	// Logger may be nil; Metrics may be nil.
	Logger  *slog.Logger
	Metrics *Metrics
}

// Server is an inbound MX. Serve it on one or more listeners; Shutdown
// stops it.
type Server struct {
	cfg    Config
	router inmail.Router
	accept inmail.Acceptor
	srv    *smtpserve.Server
	logger *slog.Logger
	auth   checker
}

// New returns a Server; router and acceptor are required.
func New(cfg Config, router inmail.Router, acceptor inmail.Acceptor) (*Server, error) {
	if router == nil || acceptor == nil {
		return nil, errors.New("inbound: a Router and an Acceptor are required")
	}
	if cfg.Hostname == "" {
		return nil, errors.New("inbound: a host name is required")
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = DefaultMaxRecipients
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConnsPerIP <= 0 {
		cfg.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if cfg.MaxConnsPerNet <= 0 {
		cfg.MaxConnsPerNet = DefaultMaxConnsPerNet
	}
	if cfg.ConnReservePercent == 0 {
		cfg.ConnReservePercent = DefaultConnReservePercent
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.MaxIdleCommands <= 0 {
		cfg.MaxIdleCommands = DefaultMaxIdleCommands
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = DefaultAuthTimeout
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limits.Limiter == nil {
		cfg.Limits.Limiter = ratelimit.NewLocal(ratelimit.LocalConfig{Now: cfg.Now})
	}
	s := &Server{cfg: cfg, router: router, accept: acceptor, logger: cfg.Logger.With("component", "inbound"),
		auth: checker{resolver: cfg.Resolver}}
	s.srv = smtpserve.New(smtpserve.Config{Hostname: cfg.Hostname, TLS: cfg.TLS, MaxMessageBytes: cfg.MaxMessageBytes,
		MaxRecipients: cfg.MaxRecipients, ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout,
		// No AUTH exists here: the session is not an smtp.AuthSession, so
		// AUTH is never advertised and is answered 504 5.7.4 (no such
		// mechanism) whether or not TLS is on; without this, go-smtp would
		// answer 523 "TLS is required" before TLS, as if AUTH existed after.
		AllowInsecureAuth: true,
		Limits: connlimit.Limits{Total: cfg.MaxConns, PerIP: cfg.MaxConnsPerIP, PerNet: cfg.MaxConnsPerNet,
			Reserve: cfg.MaxConns * max(cfg.ConnReservePercent, 0) / 100, Session: cfg.SessionTimeout,
			IdleCommands: cfg.MaxIdleCommands},
		Logger: s.logger}, s)
	return s, nil
}

// Serve accepts connections on l until Shutdown; it closes l. It returns
// nil after Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if err := s.srv.Serve(l, false, s.hooks()); err != nil {
		return fmt.Errorf("inbound: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections, closes idle ones at once and lets
// each transaction in progress (MAIL FROM through the reply to DATA)
// finish; a connection is closed as soon as its transaction ends. When ctx
// ends first, the remaining connections are cut and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// NewSession implements smtp.Backend; go-smtp calls it at EHLO/HELO.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) {
	tc := connlimit.Of(c.Conn())
	ss := &session{s: s, conn: c, tracked: tc, helo: c.Hostname()}
	if tc != nil {
		ss.ip = tc.IP
	}
	return ss, nil
}
