package mta

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/shaping"
)

const (
	// maxRcptsPerTxn is the recipient count per transaction that every
	// server must accept (RFC 5321 §4.5.3.1.8); larger envelopes take
	// several transactions on the same connection.
	maxRcptsPerTxn = 100
	// quitTimeout bounds the polite QUIT before closing a connection.
	quitTimeout = 5 * time.Second
	// readBufferSize bounds one reply line.
	readBufferSize = 4096
)

// aLongTimeAgo is a deadline in the past, to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one SMTP client session with a host.
type conn struct {
	host     string // the name (or IP) connected to; TLS names are checked against it
	raw      net.Conn
	nc       net.Conn // raw, or the TLS connection over it
	br       *bufio.Reader
	bw       *bufio.Writer
	ext      map[string]string // EHLO keywords, upper case, to their parameters
	tls      bool
	state    *tls.ConnectionState // of the TLS session; nil in plaintext
	pkixDone bool                 // pkixErr is known
	pkixErr  error                // the certificate's PKIX verification for host (verifyPKIX)
	t        Timeouts
	created  time.Time

	ctx  context.Context
	stop func() bool // stops the context.AfterFunc set by bind

	lease *shaping.Lease // the connection's traffic shaping slot, released on close; nil without shaping

	wt     time.Duration // deadline for each write from now
	broken bool          // the session cannot carry another command
	reused bool          // the connection came from the pool
}

// hostError is a failure to open a session with one host; the next host
// may do better.
type hostError struct {
	code       int    // the server's 4xx reply code, or 451
	enhanced   string // enhanced code for the result
	retryPlain bool   // opportunistic TLS failed in the handshake: try again without
	refused    bool   // the egress policy refused every address of the host
	policy     bool   // a TLS policy (MTA-STS, DANE, TLSEnforced) refused the host
	err        error
}

func (e *hostError) Error() string { return e.err.Error() }
func (e *hostError) Unwrap() error { return e.err }

// hostOutcome turns the failure to open a session with host into a
// deferral.
func hostOutcome(host string, err error) outcome {
	o := outcome{Deferred, 451, "4.4.1", err.Error(), host}
	var he *hostError
	if errors.As(err, &he) {
		o.code, o.enhanced = he.code, he.enhanced
	}
	return o
}

// dialGuard checks each address a dial is about to connect to against the
// egress policy, just before connect(2): the address checked is the one
// connected to, whatever DNS answers later. A host with a refused and an
// allowed address is reached at the allowed one.
type dialGuard struct {
	policy egress.Policy

	mu      sync.Mutex // the dialer may try two address families at once
	refused int        // addresses refused
	allowed bool       // an address was allowed
}

// errRefusedAddr is returned to the dialer for a refused address.
var errRefusedAddr = errors.New("address refused by the egress policy")

func (g *dialGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil || !g.policy.Allows(ap.Addr()) {
		g.refused++
		return fmt.Errorf("%w: %s", errRefusedAddr, address)
	}
	g.allowed = true
	return nil
}

// refusedAll reports whether the policy refused every address the dial
// tried, and there was at least one.
func (g *dialGuard) refusedAll() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused > 0 && !g.allowed
}

// dial resolves host and connects to its addresses in turn, IPv4 first,
// each with a share of the connect timeout as net.Dialer shares it, until
// one answers. Only addresses of the source address's family are tried.
// guard, when not nil, checks each address just before connect(2). MX
// hosts are resolved through the client's resolver (which may keep answers
// for their TTL); the relay, which the operator names, by the system's,
// hosts file included.
func (c *Client) dial(ctx context.Context, host, port string, guard *dialGuard) (net.Conn, error) {
	var r Resolver = c.resolver
	if c.relayHost != "" {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", absolute(host))
	if err != nil {
		return nil, err
	}
	addrs = c.reachable(addrs)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address of the source address's family", host)
	}
	d := net.Dialer{LocalAddr: c.local}
	if guard != nil {
		d.Control = guard.control
	}
	deadline := time.Now().Add(c.timeouts.Connect)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	var firstErr error
	for i, a := range addrs {
		d.Deadline = partialDeadline(time.Now(), deadline, len(addrs)-i)
		nc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return nc, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
	}
	return nil, firstErr
}

// absolute returns host with a trailing dot, which keeps the resolver's
// search list out of it, unless it is an IP address.
func absolute(host string) string {
	if _, err := netip.ParseAddr(host); err == nil || strings.HasSuffix(host, ".") {
		return host
	}
	return host + "."
}

// reachable returns the addresses of addrs a connection from the source
// address can reach (all without one), IPv4 before IPv6, in their order
// otherwise.
func (c *Client) reachable(addrs []netip.Addr) []netip.Addr {
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	if c.local != nil {
		if c.local.(*net.TCPAddr).IP.To4() != nil {
			return v4
		}
		return v6
	}
	return append(v4, v6...)
}

// partialDeadline returns the deadline of one connection attempt when
// addrsRemaining addresses share the time until deadline: an equal share,
// but at least 2 seconds when there is that much left (as net.Dialer
// shares it).
func partialDeadline(now, deadline time.Time, addrsRemaining int) time.Time {
	remaining := deadline.Sub(now)
	share := remaining / time.Duration(addrsRemaining)
	const saneMinimum = 2 * time.Second
	if share < saneMinimum {
		share = min(remaining, saneMinimum)
	}
	return now.Add(share)
}

// open connects to host and sets up a session under the TLS policy p.
func (c *Client) open(ctx context.Context, log *slog.Logger, host, port string, p *tlsPolicy) (*conn, error) {
	cn, err := c.connect(ctx, host, port, p, false)
	var he *hostError
	if errors.As(err, &he) && he.retryPlain {
		log.Info("tls handshake failed, retrying in plaintext", "remote_server", host, "err", err)
		cn, err = c.connect(ctx, host, port, p, true)
	}
	return cn, err
}

// connect dials host, reads the greeting, says EHLO and upgrades with
// STARTTLS unless plain is set. The returned conn is bound to ctx.
func (c *Client) connect(ctx context.Context, host, port string, p *tlsPolicy, plain bool) (*conn, error) {
	var guard *dialGuard
	if c.relayHost == "" {
		guard = &dialGuard{policy: c.egress}
	}
	nc, err := c.dial(ctx, host, port, guard)
	if err != nil {
		he := &hostError{code: 451, enhanced: "4.4.1", err: fmt.Errorf("connecting to %s: %w", host, err)}
		he.refused = guard != nil && guard.refusedAll() && ctx.Err() == nil
		return nil, he
	}
	cn := &conn{host: host, raw: nc, nc: nc, t: c.timeouts, created: time.Now()}
	cn.br = bufio.NewReaderSize(nc, readBufferSize)
	cn.bw = bufio.NewWriterSize(deadlineWriter{cn}, 32<<10)
	cn.bind(ctx)

	if err := cn.hello(c.hostname); err != nil {
		cn.quit()
		return nil, err
	}
	offered := cn.has("STARTTLS")
	required := p.requiresTLS()
	if required && !offered {
		cn.quit()
		return nil, &hostError{code: 451, enhanced: "4.7.4", policy: true,
			err: fmt.Errorf("%s requires TLS but %s does not offer STARTTLS", p.who(), host)}
	}
	if !offered || plain {
		return cn, nil
	}

	err = cn.startTLS(c.tlsConfig(cn, p), c.hostname)
	if err == nil {
		return cn, nil
	}
	var he *hostError
	refused := errors.As(err, &he) && !cn.broken
	if refused && !required {
		// STARTTLS answered with an error reply: the plaintext session
		// goes on (RFC 3207 §4).
		return cn, nil
	}
	cn.quit()
	switch {
	case refused:
		return nil, &hostError{code: 451, enhanced: "4.7.4", policy: true, err: fmt.Errorf("%s requires TLS but %w", p.who(), err)}
	case he != nil && (he.policy || cn.tls):
		return nil, he // the certificate failed the policy, or TLS is up and EHLO over it failed
	case required:
		return nil, &hostError{code: 451, enhanced: "4.7.5", policy: true,
			err: fmt.Errorf("%s requires TLS but it failed with %s: %w", p.who(), host, err)}
	}
	return nil, &hostError{code: 451, enhanced: "4.7.5", retryPlain: true, err: fmt.Errorf("TLS with %s: %w", host, err)}
}

// tlsConfig returns the client TLS configuration for cn under p. The
// certificate is checked by judge, the same check that decides whether a
// pooled session may serve another domain. crypto/tls sends no SNI for an
// IP address.
func (c *Client) tlsConfig(cn *conn, p *tlsPolicy) *tls.Config {
	cfg := &tls.Config{ServerName: cn.host, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if !p.strict() {
		// Opportunistic TLS protects against passive eavesdropping only:
		// any certificate and old protocol versions beat plaintext (RFC
		// 7435 §1.3). An MTA-STS policy in mode testing only reports.
		cfg.MinVersion = tls.VersionTLS10
	}
	if !p.checksCertificate() {
		return cfg
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		cn.state = &cs
		_, err := c.judge(cn, p)
		return err
	}
	return cfg
}

// bind ties the connection's I/O to ctx: cancellation interrupts it and the
// context deadline caps every step's timeout.
func (cn *conn) bind(ctx context.Context) {
	cn.ctx = ctx
	raw := cn.raw
	cn.stop = context.AfterFunc(ctx, func() { _ = raw.SetDeadline(aLongTimeAgo) })
}

// unbind detaches the context; it reports false, and marks the connection
// broken, when the context already interrupted it.
func (cn *conn) unbind() bool {
	if cn.stop == nil {
		return true
	}
	ok := cn.stop()
	cn.stop = nil
	if !ok {
		cn.broken = true
	}
	return ok
}

func (cn *conn) deadline(d time.Duration) time.Time {
	t := time.Now().Add(d)
	if dl, ok := cn.ctx.Deadline(); ok && dl.Before(t) {
		t = dl
	}
	return t
}

func (cn *conn) setReadDeadline(d time.Duration) {
	_ = cn.raw.SetReadDeadline(cn.deadline(d))
	if cn.ctx.Err() != nil {
		// The AfterFunc may have run before the line above undid it.
		_ = cn.raw.SetDeadline(aLongTimeAgo)
	}
}

func (cn *conn) setWriteDeadline(d time.Duration) {
	_ = cn.raw.SetWriteDeadline(cn.deadline(d))
	if cn.ctx.Err() != nil {
		_ = cn.raw.SetDeadline(aLongTimeAgo)
	}
}

// ioErr marks the connection broken and explains err, naming the context's
// cause when it interrupted the I/O.
func (cn *conn) ioErr(op string, err error) error {
	cn.broken = true
	if cn.ctx != nil {
		if cn.ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, context.Cause(cn.ctx))
		}
		// The read deadline may be the context's and pass just before the
		// context notices.
		if dl, ok := cn.ctx.Deadline(); ok && !time.Now().Before(dl) {
			return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// deadlineWriter sets the write deadline before each write, so that each
// block of message data gets its own timeout (RFC 5321 §4.5.3.2.5).
type deadlineWriter struct{ cn *conn }

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.cn.setWriteDeadline(w.cn.wt)
	return w.cn.nc.Write(p)
}

// send buffers one command line; timeout bounds its writes.
func (cn *conn) send(timeout time.Duration, line string) error {
	cn.wt = timeout
	if _, err := cn.bw.WriteString(line); err != nil {
		return cn.ioErr("sending "+verb(line), err)
	}
	if _, err := cn.bw.WriteString("\r\n"); err != nil {
		return cn.ioErr("sending "+verb(line), err)
	}
	return nil
}

func (cn *conn) flush() error {
	if err := cn.bw.Flush(); err != nil {
		return cn.ioErr("sending commands", err)
	}
	return nil
}

// read reads one reply within timeout. A 421 reply marks the connection
// broken: the server is closing it (RFC 5321 §3.8).
func (cn *conn) read(timeout time.Duration, what string) (reply, error) {
	cn.setReadDeadline(timeout)
	r, err := readReply(cn.br)
	if err != nil {
		return reply{}, cn.ioErr("reading reply to "+what, err)
	}
	if r.code == 421 {
		cn.broken = true
	}
	return r, nil
}

// cmd sends one command and reads its reply.
func (cn *conn) cmd(timeout time.Duration, line string) (reply, error) {
	if err := cn.send(timeout, line); err != nil {
		return reply{}, err
	}
	if err := cn.flush(); err != nil {
		return reply{}, err
	}
	return cn.read(timeout, verb(line))
}

// verb returns the command word of line, for messages.
func verb(line string) string {
	v, _, _ := strings.Cut(line, " ")
	if v == "MAIL" || v == "RCPT" {
		v, _, _ = strings.Cut(line, ":")
	}
	return v
}

// hello reads the greeting and says EHLO, falling back to HELO when the
// server rejects EHLO with 5xx (RFC 5321 §3.2).
func (cn *conn) hello(name string) error {
	r, err := cn.read(cn.t.Greeting, "connect")
	if err != nil {
		return &hostError{code: 451, enhanced: "4.4.2", err: fmt.Errorf("greeting from %s: %w", cn.host, err)}
	}
	if r.code != 220 {
		// RFC 5321 §3.1: 554 (or RFC 7504 521) means no service here,
		// 421 come back later; either way another host may serve.
		return replyHostError(cn.host, "greeted with", r)
	}
	return cn.ehlo(name)
}

func (cn *conn) ehlo(name string) error {
	r, err := cn.cmd(cn.t.Command, "EHLO "+name)
	if err != nil {
		return &hostError{code: 451, enhanced: "4.4.2", err: fmt.Errorf("EHLO to %s: %w", cn.host, err)}
	}
	if r.code == 500 || r.code == 501 || r.code == 502 || r.code == 504 {
		// EHLO not understood: an old server.
		r, err = cn.cmd(cn.t.Command, "HELO "+name)
		if err != nil {
			return &hostError{code: 451, enhanced: "4.4.2", err: fmt.Errorf("HELO to %s: %w", cn.host, err)}
		}
		if r.code != 250 {
			return replyHostError(cn.host, "rejected HELO with", r)
		}
		cn.ext = map[string]string{}
		return nil
	}
	if r.code != 250 {
		return replyHostError(cn.host, "rejected EHLO with", r)
	}
	cn.ext = parseEHLO(r.text)
	return nil
}

// replyHostError is a host's refusal to hold a session.
func replyHostError(host, what string, r reply) *hostError {
	he := &hostError{code: 451, enhanced: "4.4.0", err: fmt.Errorf("%s %s %s", host, what, r)}
	if r.code/100 == 4 {
		he.code = r.code
		if r.enhanced != "" {
			he.enhanced = r.enhanced
		}
	}
	return he
}

// parseEHLO reads the service extensions from the text of an EHLO reply
// (RFC 5321 §4.1.1.1): the first line is the greeting, each other line a
// keyword and its parameters.
func parseEHLO(text string) map[string]string {
	ext := make(map[string]string)
	lines := strings.Split(text, "\n")
	for _, l := range lines[1:] {
		kw, params, _ := strings.Cut(strings.TrimSpace(l), " ")
		if kw != "" {
			ext[strings.ToUpper(kw)] = strings.TrimSpace(params)
		}
	}
	return ext
}

func (cn *conn) has(ext string) bool {
	_, ok := cn.ext[ext]
	return ok
}

// maxSize returns the SIZE limit the server announced (RFC 1870 §4), 0 for
// none.
func (cn *conn) maxSize() int {
	v, ok := cn.ext["SIZE"]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// startTLS upgrades the session (RFC 3207). A *hostError means the server
// refused STARTTLS with a reply; other errors mean the connection is lost.
func (cn *conn) startTLS(cfg *tls.Config, name string) error {
	r, err := cn.cmd(cn.t.Command, "STARTTLS")
	if err != nil {
		return err
	}
	if r.code != 220 {
		return replyHostError(cn.host, "refused STARTTLS with", r)
	}
	// Anything the server sent after its 220 was sent in plaintext and
	// would be read as if it came over TLS (the STARTTLS command injection
	// of CVE-2011-0411): refuse it.
	if cn.br.Buffered() > 0 {
		cn.broken = true
		return errors.New("server sent data after its STARTTLS reply")
	}
	tc := tls.Client(cn.raw, cfg)
	_ = cn.raw.SetDeadline(cn.deadline(cn.t.Command))
	if err := tc.HandshakeContext(cn.ctx); err != nil {
		cn.broken = true
		cn.state = nil
		return fmt.Errorf("handshake: %w", err)
	}
	_ = cn.raw.SetDeadline(time.Time{})
	cn.nc = tc
	cn.br.Reset(tc)
	cn.bw.Reset(deadlineWriter{cn})
	cn.tls = true
	st := tc.ConnectionState()
	cn.state = &st
	// RFC 3207 §4.2: forget what the server said before TLS and ask again.
	cn.ext = nil
	if err := cn.ehlo(name); err != nil {
		cn.broken = true
		return err
	}
	return nil
}

// reset sends RSET, which also tells whether a pooled connection still
// works.
func (cn *conn) reset() error {
	r, err := cn.cmd(cn.t.Command, "RSET")
	if err != nil {
		return err
	}
	if r.code != 250 {
		cn.broken = true
		return fmt.Errorf("RSET answered with %s", r)
	}
	return nil
}

// quit ends the session politely when it still works, then closes it.
func (cn *conn) quit() {
	cn.unbind()
	if !cn.broken {
		ctx, cancel := context.WithTimeout(context.Background(), quitTimeout)
		cn.bind(ctx)
		_, _ = cn.cmd(min(quitTimeout, cn.t.Command), "QUIT")
		cn.unbind()
		cancel()
	}
	cn.close()
}

// close closes the connection at once. A working TLS session is closed
// with close_notify; a broken one just drops, since the alert could block on
// a peer that stopped reading.
func (cn *conn) close() {
	cn.unbind()
	// The shaping slot is freed once the socket is closed, so that a new
	// connection never overlaps this one at the receiver.
	defer cn.lease.Release()
	if cn.broken {
		_ = cn.raw.Close()
		return
	}
	cn.broken = true
	_ = cn.nc.Close()
}

// mailCommand builds MAIL FROM with the parameters the server supports and
// the message needs; utf8 asks for SMTPUTF8.
func (cn *conn) mailCommand(m *message, utf8 bool) string {
	var b strings.Builder
	b.WriteString("MAIL FROM:<")
	b.WriteString(m.from)
	b.WriteByte('>')
	if cn.has("SIZE") {
		// RFC 1870 §6: declare the size so the server can refuse early.
		b.WriteString(" SIZE=")
		b.WriteString(strconv.Itoa(m.size))
	}
	if m.eightBit && cn.has("8BITMIME") {
		b.WriteString(" BODY=8BITMIME") // RFC 6152 §2
	}
	if utf8 {
		b.WriteString(" SMTPUTF8") // RFC 6531 §3.4
	}
	return b.String()
}

// writeData sends the message with dot-stuffing and CRLF line ends (RFC
// 5321 §4.5.2), then the final dot.
func (cn *conn) writeData(data []byte) error {
	cn.wt = cn.t.DataBlock
	dw := textproto.NewWriter(cn.bw).DotWriter()
	if _, err := dw.Write(data); err != nil {
		return cn.ioErr("sending message data", err)
	}
	if err := dw.Close(); err != nil {
		return cn.ioErr("sending message data", err)
	}
	return nil
}
