// Package mta delivers mail to recipients' MX hosts over SMTP.
//
// A Client resolves a recipient domain's MX hosts (RFC 5321 §5.1, with the
// RFC 7505 null MX) and their addresses through Config.Resolver (in the
// program package dnscache, which keeps answers for their TTL), connects
// to them in preference order from an optional source address (a host's
// addresses in turn, IPv4 first), says EHLO, upgrades with STARTTLS under
// the envelope's TLS policy, and runs one mail transaction for all
// recipients of the envelope, pipelined when the server offers PIPELINING
// (RFC 2920). It honours SIZE (RFC 1870) and SMTPUTF8 (RFC 6531), keeps
// idle connections for reuse by the next envelope to the same host, and
// reports one Result per recipient: delivered, deferred (try again later),
// bounced (permanent) or refused: MX hosts are reached only at addresses
// the egress policy allows (package egress: no loopback, private,
// link-local or metadata address unless the operator allows it), checked
// at every connect so that a DNS answer cannot change between check and
// use. Transport security follows the strictest
// policy that applies: the envelope's TLS mode, the recipient domain's
// MTA-STS policy (RFC 8461, package mtasts: under enforce only listed MX
// hosts are tried, over TLS with a certificate valid for their name; under
// testing failures are logged and told in the result, and mail goes) and,
// when the domain's MX answer is DNSSEC-validated, its hosts' DANE TLSA
// records (RFC 7672, package dane), which take precedence over MTA-STS. A
// host that fails a policy is skipped; when none is left the recipients
// are deferred, with a message naming the policy. An idle session serves
// another envelope only if it meets that envelope's policy. It can also
// hand every message to a relay (smarthost) instead, which the operator
// chose and which is not checked; MTA-STS and DANE do not apply to it.
// Traffic to MX hosts is shaped per provider and source address
// (Config.Shaping, package shaping): a connection opens only with a free
// slot, each message waits for room in the provider's rates, a connection
// closes after the provider's messages per connection, and a reply that
// asks to slow down pauses the provider; what finds no room in time is
// deferred (451 4.4.5) without connecting.
//
// Result.Bounce classifies a failure reply with package bounce (RFC 3463
// enhanced code, text: an Amazon SES bounce type, and whether the address
// itself is bad).
package mta

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/dane"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/mtasts"
	"github.com/posthaste/posthaste/internal/shaping"
)

// Config configures a Client. Only Hostname is required.
type Config struct {
	// Hostname is the name the client gives in EHLO (POSTHASTE_HOSTNAME). It
	// should be a fully qualified name whose A record points back at the
	// sending address.
	Hostname string
	// Resolver looks up MX records and the addresses of MX hosts (the
	// relay's name is resolved by the system resolver); nil means
	// net.DefaultResolver, which keeps no answers. The program gives a
	// *dnscache.Resolver, which keeps them for their TTL
	// (POSTHASTE_DNS_SERVER points it at a test DNS server).
	Resolver Resolver
	// Port is the port of MX hosts; 0 means 25. Tests and local setups
	// change it (POSTHASTE_MX_PORT). The relay has its own port.
	Port int
	// SourceIP, when set, is the local address connections are made from
	// (POSTHASTE_SOURCE_IP). Only hosts of its address family are reached.
	SourceIP net.IP
	// Relay, when set, is a smarthost "smtp://host[:port]" (port 25 by
	// default) that receives every message instead of the recipients' MX
	// hosts. Envelopes' TLS modes apply to it; credentials are not
	// supported. The egress policy does not apply to it.
	Relay string
	// Egress is the policy every MX host address is checked against just
	// before it is connected to (POSTHASTE_ALLOW_PRIVATE_EGRESS,
	// POSTHASTE_EGRESS_ALLOW); the zero Policy refuses loopback, private,
	// link-local, metadata and other special-purpose addresses.
	Egress egress.Policy
	// Timeouts bounds each protocol step; zero fields take the RFC 5321
	// §4.5.3.2 defaults.
	Timeouts Timeouts
	// IdleTimeout is how long a connection stays open after a delivery,
	// waiting for the next envelope to the same host; 0 means 30 seconds,
	// a negative value closes connections after each delivery.
	IdleTimeout time.Duration
	// RootCAs verifies certificates for TLSEnforced and MTA-STS; nil
	// means the system roots.
	RootCAs *x509.CertPool
	// STS looks up recipient domains' MTA-STS policies (RFC 8461); nil
	// applies none. Policies do not apply to the relay.
	STS *mtasts.Cache
	// DANE looks up MX hosts' TLSA records through a validating resolver
	// (RFC 7672); nil applies none. DANE does not apply to the relay.
	DANE *dane.Resolver
	// Shaping limits connections and messages per destination provider
	// and this client's source address, and backs off a provider that
	// asks to slow down (package shaping); nil applies no limits. Clients
	// of several source addresses share one. It does not apply to the
	// relay.
	Shaping *shaping.Shaper
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

// Resolver answers the DNS questions of delivery, with net.Resolver's
// error semantics: a *net.DNSError with IsNotFound set when the name does
// not exist or has no records of the type. *net.Resolver and
// *dnscache.Resolver implement it.
type Resolver interface {
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Timeouts bounds the steps of an SMTP session. A step that takes longer
// fails the connection and defers its recipients. The Deliver context's
// deadline, when earlier, wins.
type Timeouts struct {
	Connect   time.Duration // TCP connect to one host, shared by its addresses; default 30 s
	Greeting  time.Duration // the 220 greeting; default 5 min (RFC 5321 §4.5.3.2.1)
	Command   time.Duration // EHLO, STARTTLS with its handshake, RSET; default 5 min
	Mail      time.Duration // reply to MAIL FROM; default 5 min (§4.5.3.2.2)
	Rcpt      time.Duration // reply to each RCPT TO; default 5 min (§4.5.3.2.3)
	DataInit  time.Duration // the 354 reply to DATA; default 2 min (§4.5.3.2.4)
	DataBlock time.Duration // each write of message data; default 3 min (§4.5.3.2.5)
	DataFinal time.Duration // reply to the final dot; default 10 min (§4.5.3.2.6)
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Connect, 30*time.Second)
	def(&t.Greeting, 5*time.Minute)
	def(&t.Command, 5*time.Minute)
	def(&t.Mail, 5*time.Minute)
	def(&t.Rcpt, 5*time.Minute)
	def(&t.DataInit, 2*time.Minute)
	def(&t.DataBlock, 3*time.Minute)
	def(&t.DataFinal, 10*time.Minute)
	return t
}

// TLSMode is a domain's transport security policy.
type TLSMode string

const (
	// TLSOpportunistic uses STARTTLS when the server offers it and accepts
	// any certificate; without STARTTLS, or when the handshake fails, mail
	// goes in plaintext. The empty TLSMode means TLSOpportunistic.
	TLSOpportunistic TLSMode = "opportunistic"
	// TLSEnforced requires STARTTLS with a certificate valid for the MX
	// host's name under Config.RootCAs (or, for a host with DANE TLSA
	// records, matching them); a host that cannot provide it is skipped,
	// and the recipients are deferred when none can.
	TLSEnforced TLSMode = "enforced"
)

// Envelope is one message for recipients of one domain.
type Envelope struct {
	// From is the reverse path (MAIL FROM); empty sends the null path "<>".
	From string
	// To are the recipients, all routed through the domain given to
	// Deliver.
	To []string
	// Data is the message, headers and body, signed and ready to send; line
	// ends are sent as CRLF whatever they are here.
	Data []byte
	// TLS is the transport security policy; empty means opportunistic.
	TLS TLSMode
}

// Status is the outcome of a delivery to one recipient.
type Status int

const (
	// Delivered means the receiving server took responsibility (2xx).
	Delivered Status = iota + 1
	// Deferred means a temporary failure: a 4xx reply, a host that could
	// not be reached or lost the connection, a temporary DNS error, a TLS
	// policy (TLSEnforced, MTA-STS, DANE) that could not be met. Try again
	// later; the caller turns deferrals past its delivery window into
	// bounces.
	Deferred
	// Bounced means a permanent failure: a 5xx reply, a domain that does
	// not exist or accepts no mail (null MX), a message over the server's
	// SIZE. Do not try again.
	Bounced
	// Refused means no connection was made because every MX host of the
	// domain has only addresses that the egress policy refuses. Nothing
	// reached the recipient's side, and trying again cannot help: a
	// permanent failure of the sending side, not a bounce.
	Refused
)

// String returns "delivered", "deferred", "bounced" or "refused".
func (s Status) String() string {
	switch s {
	case Delivered:
		return "delivered"
	case Deferred:
		return "deferred"
	case Bounced:
		return "bounced"
	case Refused:
		return "refused"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Result is the outcome for one recipient.
type Result struct {
	Rcpt   string // the recipient as given in Envelope.To
	Status Status
	// Code and EnhancedCode are the server's reply (EnhancedCode is empty
	// when the server sent none), or codes this client chose for failures
	// of its own, such as 556 5.1.10 for a null MX.
	Code         int
	EnhancedCode string
	// Message is the server's reply text, or a description of the failure.
	Message string
	// RemoteServer is the name of the host that gave the reply (MX host,
	// domain, IP literal or relay); empty when no host was reached.
	RemoteServer string
	// SourceIP is the local address of the connection that carried the
	// transaction (Config.SourceIP when set); empty when no session was
	// held.
	SourceIP string
}

// Client delivers envelopes. It is safe for concurrent use. Close releases
// the idle connections it keeps.
type Client struct {
	hostname  string
	resolver  Resolver
	port      string
	relayHost string
	relayPort string
	local     net.Addr
	timeouts  Timeouts
	rootCAs   *x509.CertPool
	sts       *mtasts.Cache
	dane      *dane.Resolver
	shaper    *shaping.Shaper
	egress    egress.Policy
	log       *slog.Logger
	pool      *pool
	shuffle   func(n int, swap func(i, j int))
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Hostname == "" {
		return nil, errors.New("hostname is required")
	}
	if strings.ContainsFunc(cfg.Hostname, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return nil, fmt.Errorf("hostname %q: must be printable ASCII without spaces", cfg.Hostname)
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("port %d: out of range", cfg.Port)
	}
	c := &Client{
		hostname: cfg.Hostname,
		resolver: cfg.Resolver,
		port:     "25",
		timeouts: cfg.Timeouts.withDefaults(),
		rootCAs:  cfg.RootCAs,
		sts:      cfg.STS,
		dane:     cfg.DANE,
		shaper:   cfg.Shaping,
		egress:   cfg.Egress,
		log:      cfg.Logger,
		shuffle:  rand.Shuffle,
	}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Port != 0 {
		c.port = strconv.Itoa(cfg.Port)
	}
	if cfg.SourceIP != nil {
		if cfg.SourceIP.To16() == nil {
			return nil, fmt.Errorf("source ip %v: invalid", cfg.SourceIP)
		}
		c.local = &net.TCPAddr{IP: cfg.SourceIP}
	}
	if cfg.Relay != "" {
		host, port, err := parseRelay(cfg.Relay)
		if err != nil {
			return nil, fmt.Errorf("relay %q: %w", cfg.Relay, err)
		}
		c.relayHost, c.relayPort = host, port
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = 30 * time.Second
	}
	c.pool = newPool(idle)
	return c, nil
}

func parseRelay(s string) (host, port string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("parsing: %w", err)
	}
	if u.Scheme != "smtp" {
		return "", "", fmt.Errorf("scheme %q: only smtp is supported", u.Scheme)
	}
	if u.User != nil {
		return "", "", errors.New("credentials are not supported")
	}
	if u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", "", errors.New("want smtp://host[:port]")
	}
	port = u.Port()
	if port == "" {
		port = "25"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q: out of range", port)
	}
	return u.Hostname(), port, nil
}

// Close closes the idle connections. Deliver keeps working afterwards but
// no longer keeps connections open.
func (c *Client) Close() error {
	c.pool.close()
	return nil
}

// Deliver sends env to the hosts of domain (or to the relay) and returns one
// Result per env.To, in the same order. It does not return an error: every
// failure is a Deferred or Bounced result. A canceled ctx defers the
// recipients not yet decided.
func (c *Client) Deliver(ctx context.Context, domain string, env Envelope) []Result {
	results := make([]Result, len(env.To))
	for i, to := range env.To {
		results[i].Rcpt = to
	}
	if len(env.To) == 0 {
		return results
	}
	log := c.log.With("rcpt_domain", domain)

	all := make([]int, len(env.To))
	for i := range all {
		all[i] = i
	}
	mode := env.TLS
	if mode == "" {
		mode = TLSOpportunistic
	}
	if mode != TLSOpportunistic && mode != TLSEnforced {
		// A caller bug, not the recipient's fault: defer, never bounce.
		setAll(results, all, outcome{Deferred, 451, "4.3.5", fmt.Sprintf("unknown TLS mode %q", env.TLS), ""})
		return results
	}

	m, pending := prepare(env, results)
	if len(pending) > 0 {
		var hosts []string
		port := c.port
		if c.relayHost != "" {
			hosts, port = []string{c.relayHost}, c.relayPort
		} else {
			var out *outcome
			hosts, out = c.route(ctx, domain)
			if out != nil {
				setAll(results, pending, *out)
			}
		}
		if len(hosts) > 0 {
			dp, out := c.resolvePolicy(ctx, log, domain, mode, port)
			if out != nil {
				setAll(results, pending, *out)
			} else {
				c.deliver(ctx, log, hosts, port, dp, m, pending, results)
			}
		}
	}

	for _, r := range results {
		log.Debug("delivery result", "rcpt", r.Rcpt, "status", r.Status.String(),
			"smtp_code", r.Code, "remote_server", r.RemoteServer, "message", r.Message)
	}
	return results
}

// outcome is a Result without its recipient.
type outcome struct {
	status   Status
	code     int
	enhanced string
	message  string
	remote   string
}

func (o outcome) apply(r *Result) {
	r.Status, r.Code, r.EnhancedCode, r.Message, r.RemoteServer = o.status, o.code, o.enhanced, o.message, o.remote
}

func setAll(results []Result, idx []int, o outcome) {
	for _, i := range idx {
		o.apply(&results[i])
	}
}

// deliver tries hosts in order: first a pooled connection to any of them
// that meets its policy, then fresh connections, until one host holds a
// session.
func (c *Client) deliver(ctx context.Context, log *slog.Logger, hosts []string, port string, dp *domainPolicy, m *message, pending []int, results []Result) {
	last := outcome{Deferred, 451, "4.4.1", "no host reachable", ""}
	var refused []string // hosts whose every address the egress policy refused
	tried := false       // a host failed for another reason: a deferral
	policies := make(map[string]*tlsPolicy, len(hosts))
	for _, h := range hosts {
		p, err := c.forHost(ctx, dp, h)
		if err != nil {
			log.Info("mx host refused by the TLS policy", "remote_server", h, "err", err)
			last, tried = hostOutcome(h, err), true
			continue
		}
		policies[h] = p
	}

	for _, h := range hosts {
		p := policies[h]
		if p == nil {
			continue
		}
		key := c.poolKey(h, port)
		cn := c.pool.get(key, c.accepts(p))
		if cn == nil {
			continue
		}
		if c.deliverIdle(ctx, log, key, cn, p, m, pending, results) {
			return
		}
		break
	}

	for _, h := range hosts {
		p := policies[h]
		if p == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			last = outcome{Deferred, 451, "4.4.7", fmt.Sprintf("delivery interrupted: %v", context.Cause(ctx)), last.remote}
			tried = true
			break
		}
		key := c.poolKey(h, port)
		var (
			lease *shaping.Lease
			held  *outcome
		)
		for {
			// While it waits for a shaping slot, a connection to h that
			// another delivery left idle (holding its slot) may serve.
			var idle *conn
			lease, idle, held = c.openSlot(ctx, h, key, p)
			if idle == nil {
				break
			}
			if c.deliverIdle(ctx, log, key, idle, p, m, pending, results) {
				return
			}
		}
		if held != nil {
			// The next hosts are most likely the same provider's: do
			// not wait for each of them again.
			last, tried = *held, true
			break
		}
		cn, err := c.open(ctx, log, h, port, p)
		if err != nil {
			lease.Release()
		} else {
			cn.lease = lease
		}
		var he *hostError
		if errors.As(err, &he) && he.refused {
			// The operator's log names the address; the outcome, which
			// the sender sees, does not (it would tell what a name
			// resolves to inside this network).
			log.Warn("mx host refused by the egress policy", "remote_server", h, "err", err)
			refused = append(refused, h)
			continue
		}
		if err == nil {
			if _, err = c.judge(cn, p); err != nil {
				cn.quit() // a plaintext session where the policy wants TLS
			}
		}
		if err != nil {
			log.Info("mx host failed", "remote_server", h, "err", err)
			last = hostOutcome(h, err)
			tried = true
			c.observe(ctx, h, last)
			continue
		}
		if out := c.sendSlot(ctx, cn); out != nil {
			c.release(key, cn)
			setAll(results, pending, *out)
			return
		}
		c.deliverOver(log, cn, p, m, pending, results)
		setSource(results, pending, cn)
		c.observeResults(ctx, h, pending, results)
		c.release(key, cn)
		return
	}
	if len(refused) > 0 && !tried {
		setAll(results, pending, refusedOutcome(refused))
		return
	}
	setAll(results, pending, last)
}

// accepts returns the test of idle connections for the TLS policy p.
func (c *Client) accepts(p *tlsPolicy) func(*conn) bool {
	return func(cn *conn) bool {
		_, err := c.judge(cn, p)
		return err == nil
	}
}

// deliverIdle delivers over cn, an idle connection to key that meets p.
// It reports false, having sent nothing, when cn turned out dead: its
// siblings, idle as long, are closed too and a fresh connection gets one
// more try.
func (c *Client) deliverIdle(ctx context.Context, log *slog.Logger, key string, cn *conn, p *tlsPolicy, m *message, pending []int, results []Result) bool {
	if out := c.sendSlot(ctx, cn); out != nil {
		c.pool.put(key, cn)
		setAll(results, pending, *out)
		return true
	}
	cn.bind(ctx)
	if err := cn.reset(); err != nil {
		log.Debug("pooled connection is dead", "remote_server", cn.host, "err", err)
		cn.close()
		c.pool.drop(key)
		return false
	}
	if retry := c.deliverOver(log, cn, p, m, pending, results); retry {
		log.Debug("pooled connection closed before MAIL", "remote_server", cn.host)
		cn.close()
		c.pool.drop(key)
		return false
	}
	setSource(results, pending, cn)
	c.observeResults(ctx, cn.host, pending, results)
	c.release(key, cn)
	return true
}

// deliverOver runs deliverOn over a session that meets p. What an MTA-STS
// policy in mode testing would have refused is logged and told in the
// message of each recipient delivered (RFC 8461 §5: report, deliver).
func (c *Client) deliverOver(log *slog.Logger, cn *conn, p *tlsPolicy, m *message, pending []int, results []Result) (retry bool) {
	retry = c.deliverOn(cn, m, pending, results)
	if note, _ := c.judge(cn, p); note != "" && !retry {
		log.Warn("MTA-STS policy in mode testing not met: delivering anyway", "remote_server", cn.host, "err", note)
		for _, i := range pending {
			if results[i].Status == Delivered {
				results[i].Message += " (" + note + "; delivered since the policy is in mode testing)"
			}
		}
	}
	return retry
}

// refusedOutcome is the outcome when every host (MX hosts, or the address
// of an address literal) was refused by the egress policy. RFC 3463 X.7.1:
// delivery is not authorized, here by local policy.
func refusedOutcome(hosts []string) outcome {
	const kinds = "loopback, private, link-local or cloud metadata"
	var msg string
	switch {
	case len(hosts) == 1 && net.ParseIP(hosts[0]) != nil:
		msg = fmt.Sprintf("address %s is a %s address", hosts[0], kinds)
	case len(hosts) == 1:
		msg = fmt.Sprintf("MX host %s resolves only to %s addresses", hosts[0], kinds)
	default:
		msg = fmt.Sprintf("MX hosts %s resolve only to %s addresses", strings.Join(hosts, ", "), kinds)
	}
	return outcome{Refused, 550, "5.7.1", msg + ", which the egress policy refuses", ""}
}

// poolKey is the key of idle connections to host:port: the source
// address is part of it, so that a connection opened from one source
// address (one IP pool's) never carries mail meant to leave from another.
func (c *Client) poolKey(host, port string) string {
	src := ""
	if c.local != nil {
		src = c.local.String()
	}
	return src + ">" + net.JoinHostPort(host, port)
}

// setSource names the local address of cn in the results of pending that
// a server answered.
func setSource(results []Result, pending []int, cn *conn) {
	if cn.raw == nil {
		return
	}
	src := cn.raw.LocalAddr()
	ta, ok := src.(*net.TCPAddr)
	if !ok {
		return
	}
	for _, i := range pending {
		if results[i].RemoteServer != "" {
			results[i].SourceIP = ta.IP.String()
		}
	}
}

// release returns cn to the pool or closes it.
func (c *Client) release(key string, cn *conn) {
	if !cn.unbind() || cn.broken {
		cn.close()
		return
	}
	if cn.lease.Spent() {
		// The provider's messages per connection (package shaping).
		cn.quit()
		return
	}
	c.pool.put(key, cn)
}
