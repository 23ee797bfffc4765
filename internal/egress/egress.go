// Package egress is the one guard for outbound HTTP requests to URLs that
// users supply (attachment paths, webhook endpoints) or that recipient
// domains name (MTA-STS policies). Every connection goes
// to an IP address checked after name resolution, and the checked address
// is the one dialed, so a DNS answer cannot change between check and
// connect. Loopback, private, link-local, metadata and other special-purpose
// addresses are refused unless the operator allows private targets or lists
// them (Policy), and so is plain http unless private targets are allowed.
// Policy is also the rule package mta applies to the MX hosts it connects to.
package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// ErrBlocked is matched (errors.Is) by every refusal: a destination address
// or URL scheme the guard does not allow.
var ErrBlocked = errors.New("egress: destination is not allowed")

// ErrTooLarge is matched (errors.Is) by Fetch's error for a body over its
// limit.
var ErrTooLarge = errors.New("egress: body is too large")

// tooLarge is an error that Is ErrTooLarge.
type tooLarge struct{ msg string }

func (t *tooLarge) Error() string        { return t.msg }
func (t *tooLarge) Is(target error) bool { return target == ErrTooLarge }

// refusal is an error that Is ErrBlocked.
type refusal struct{ msg string }

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Is(target error) bool { return target == ErrBlocked }

const (
	defaultTimeout = 10 * time.Second
	maxRedirects   = 5
)

// Config configures a Client.
type Config struct {
	// AllowPrivate turns the guard off for addresses and allows plain http:
	// for development, and operators whose webhooks live on their network.
	AllowPrivate bool
	// Allow lists prefixes that may be reached although they are private
	// (Policy.Allow); it does not allow plain http.
	Allow []netip.Prefix
	// Resolver resolves host names; nil uses net.DefaultResolver.
	Resolver *net.Resolver
	// Timeout bounds a whole request, redirects and body included;
	// 0 means 10 seconds.
	Timeout time.Duration
	// RootCAs verifies servers' certificates; nil means the system roots.
	RootCAs *x509.CertPool
}

// Client makes guarded outbound HTTP requests. It is safe for concurrent
// use.
type Client struct {
	allowPrivate bool
	policy       Policy
	resolver     *net.Resolver
	timeout      time.Duration

	// dial connects to an already checked ip:port; a seam for tests.
	dial      func(ctx context.Context, network, address string) (net.Conn, error)
	transport *http.Transport
	plain     *http.Client // does not follow redirects
	fetch     *http.Client // follows redirects, each hop guarded
}

// New returns a Client.
func New(cfg Config) *Client {
	c := &Client{allowPrivate: cfg.AllowPrivate, policy: Policy{AllowPrivate: cfg.AllowPrivate, Allow: cfg.Allow},
		resolver: cfg.Resolver, timeout: cfg.Timeout}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	d := &net.Dialer{Timeout: c.timeout, KeepAlive: 30 * time.Second, Control: c.control}
	c.dial = d.DialContext
	c.transport = &http.Transport{
		Proxy:                  nil, // a proxy would connect on our behalf, unchecked
		DialContext:            c.dialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    c.timeout,
		ResponseHeaderTimeout:  c.timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if cfg.RootCAs != nil {
		c.transport.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
	}
	rt := &guardedTransport{c: c}
	c.plain = &http.Client{
		Transport: rt,
		Timeout:   c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	c.fetch = &http.Client{
		Transport: rt,
		Timeout:   c.timeout,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}
	return c
}

// HTTPClient returns an *http.Client whose every connection is guarded and
// whose requests are refused unless https (or AllowPrivate). It does not
// follow redirects: a 3xx response is returned to the caller as is, body
// unread. Its Timeout is the configured one. Callers close response bodies.
func (c *Client) HTTPClient() *http.Client { return c.plain }

// Fetch GETs rawURL and returns its body and Content-Type. It follows up to
// 5 redirects, each hop guarded like the first. A non-2xx final status, a
// body over limit bytes (limit must be positive) and any refusal are
// errors; their text names the URL without its query or credentials and
// never includes response data, so it may be shown to the user who gave the
// URL. Refusals match ErrBlocked, a body over limit ErrTooLarge. It holds
// at most about limit bytes of body, and 1.5 × limit while a body of
// unknown length grows.
func (c *Client) Fetch(ctx context.Context, rawURL string, limit int64) ([]byte, string, error) {
	if limit <= 0 {
		return nil, "", errors.New("egress: fetch limit must be positive")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", errors.New("egress: invalid URL")
	}
	if err := c.checkScheme(u); err != nil {
		return nil, "", err
	}
	if u.Host == "" {
		return nil, "", errors.New("egress: URL has no host")
	}
	shown := redact(u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("egress: GET %s: %w", shown, err)
	}
	req.Header.Set("User-Agent", "Posthaste")
	req.Header.Set("Accept", "*/*")
	resp, err := c.fetch.Do(req)
	if err != nil {
		return nil, "", requestError(shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, "", fmt.Errorf("egress: GET %s: unexpected status %d", shown, resp.StatusCode)
	}
	tooBig := &tooLarge{fmt.Sprintf("egress: GET %s: body is larger than %d bytes", shown, limit)}
	if resp.ContentLength > limit {
		return nil, "", tooBig
	}
	body, err := readLimited(resp.Body, limit, resp.ContentLength)
	if errors.Is(err, ErrTooLarge) {
		return nil, "", tooBig
	}
	if err != nil {
		return nil, "", requestError(shown, err)
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// readLimited reads r to its end, at most limit bytes; more is an error
// matching ErrTooLarge. size is the announced length, -1 when unknown: the
// buffer is sized for it at once; otherwise it grows by half, never past
// limit+1, so that reading holds at most about 1.5 × limit bytes (io.ReadAll
// doubles, and could hold twice the limit).
func readLimited(r io.Reader, limit, size int64) ([]byte, error) {
	const first = 64 << 10
	limit = min(limit, math.MaxInt64-1)
	capacity := min(limit, math.MaxInt32-1) + 1 // one byte more tells a body over limit
	if size >= 0 {
		capacity = min(capacity, size+1)
	} else {
		capacity = min(capacity, first)
	}
	buf := make([]byte, 0, capacity)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, ErrTooLarge
			}
			grown := int64(cap(buf)) + max(int64(cap(buf))/2, first)
			next := make([]byte, len(buf), min(grown, limit+1))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// requestError reduces an error from http.Client to its cause: a refusal as
// is, anything else with the redacted URL (url.Error would name the URL of
// the last hop, taken from a Location header).
func requestError(shown string, err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("egress: GET %s: timed out", shown)
		}
		err = ue.Err
	}
	return fmt.Errorf("egress: GET %s: %w", shown, err)
}

// redact returns scheme://host/path of u, without credentials, query or
// fragment, which may hold secrets.
func redact(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func (c *Client) checkScheme(u *url.URL) error {
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && c.allowPrivate:
		return nil
	case u.Scheme == "http":
		return &refusal{"egress: plain http is not allowed, use https"}
	}
	return &refusal{fmt.Sprintf("egress: scheme %q is not allowed", u.Scheme)}
}

// guardedTransport refuses disallowed schemes on every request, redirects
// included, before anything is dialed.
type guardedTransport struct{ c *Client }

var _ http.RoundTripper = (*guardedTransport)(nil)

func (g *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.c.checkScheme(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return g.c.transport.RoundTrip(req)
}

func (g *guardedTransport) CloseIdleConnections() { g.c.transport.CloseIdleConnections() }

// dialContext resolves the host itself, refuses if any of its addresses is
// blocked, and dials the checked addresses by IP in turn.
func (c *Client) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("egress: invalid port %q", portStr)
	}
	var ips []netip.Addr
	literal := false
	if ip, err := netip.ParseAddr(host); err == nil {
		ips, literal = []netip.Addr{ip}, true
	} else {
		ips, err = c.resolver.LookupNetIP(ctx, ipNetwork(network), host)
		if err != nil {
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) {
				// Not wrapped: the resolver's own address stays out of the text.
				return nil, fmt.Errorf("egress: resolving %s: %s", host, dnsErr.Err)
			}
			return nil, fmt.Errorf("egress: resolving %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("egress: resolving %s: no addresses", host)
		}
	}
	if !c.allowPrivate {
		for _, ip := range ips {
			if c.policy.Allows(ip) {
				continue
			}
			if literal {
				return nil, &refusal{fmt.Sprintf("egress: address %s is not allowed", ip)}
			}
			// The address itself is not named: it would tell the caller
			// what a name resolves to inside our network.
			return nil, &refusal{fmt.Sprintf("egress: host %s resolves to an address that is not allowed", host)}
		}
	}
	var firstErr error
	for _, ip := range ips {
		conn, err := c.dial(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// control runs just before connect(2) on every socket the dialer opens: a
// second check of the very address being connected to.
func (c *Client) control(_, address string, _ syscall.RawConn) error {
	if c.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !c.policy.Allows(ap.Addr()) {
		return &refusal{fmt.Sprintf("egress: address %s is not allowed", address)}
	}
	return nil
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4":
		return "ip4"
	case "tcp6":
		return "ip6"
	}
	return "ip"
}
