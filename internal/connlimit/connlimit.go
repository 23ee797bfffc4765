// Package connlimit caps the simultaneous connections of a TCP server, in
// total, per client and per network, bounds each connection's life and
// the commands it may read outside a transaction, and tracks the admitted
// connections for a graceful shutdown: idle connections can be closed at
// once while those inside a transaction are left to finish. The SMTP
// submission gateway (smtpgw) and the inbound MX (internal/mxlisten) use
// it.
//
// A client is an IPv4 address or an IPv6 /64 (one host can hold a whole
// /64, so counting IPv6 addresses apart would cap nothing); a network is
// an IPv4 /24 or an IPv6 /48. Part of the total can be kept in reserve
// for networks holding no connection, so that networks already served
// cannot take the last places.
//
// The session deadline and the command cap work through the read
// deadlines a server sets: go-smtp sets one before reading each command
// line (its ReadTimeout must be set), through a *tls.Conn too, so each
// SetReadDeadline on a Conn counts as a command, and a deadline is never
// set past the end of the session.
package connlimit

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Refusal says why a connection was not admitted.
type Refusal int

// Refusals.
const (
	// Draining: the server is shutting down.
	Draining Refusal = iota + 1
	// OverTotal: the server holds its maximum number of connections.
	OverTotal
	// OverPerIP: the client (an IPv4 address, an IPv6 /64) holds its
	// maximum.
	OverPerIP
	// OverPerNet: the client's network (an IPv4 /24, an IPv6 /48) holds
	// its maximum.
	OverPerNet
	// OverReserve: the places left are kept for networks holding none.
	OverReserve
)

// ErrSessionOver is returned by a Conn's SetReadDeadline once the
// session deadline has passed; it is a timeout (go-smtp answers it with
// 421 4.4.2 and closes).
var ErrSessionOver error = sessionOver{}

// ErrTooManyCommands is returned by a Conn's SetReadDeadline when the
// connection reads more commands outside a transaction than its cap
// (go-smtp answers it with 421 4.4.0 and closes).
var ErrTooManyCommands error = tooManyCommands{}

type sessionOver struct{}

func (sessionOver) Error() string   { return "connlimit: session deadline passed" }
func (sessionOver) Timeout() bool   { return true }
func (sessionOver) Temporary() bool { return true }

type tooManyCommands struct{}

func (tooManyCommands) Error() string   { return "connlimit: too many commands outside a transaction" }
func (tooManyCommands) Timeout() bool   { return false }
func (tooManyCommands) Temporary() bool { return false }

// Limits are a Limiter's caps; zero or less means no cap.
type Limits struct {
	// Total caps the connections in all.
	Total int
	// PerIP caps the connections of one client: an IPv4 address or an
	// IPv6 /64.
	PerIP int
	// PerNet caps the connections of one network: an IPv4 /24 or an
	// IPv6 /48.
	PerNet int
	// Reserve is how many of Total only a network holding no connection
	// may take.
	Reserve int
	// Session bounds the life of a connection: once it has passed, the
	// connection's reads time out.
	Session time.Duration
	// IdleCommands caps the commands a connection may read in a row
	// outside a transaction (from its start or SetBusy(c, false) to
	// SetBusy(c, true)).
	IdleCommands int
}

// Hooks are called by a Limiter's listener and its connections. Any may
// be nil.
type Hooks struct {
	// Admitted is called for each admitted connection.
	Admitted func(c *Conn)
	// Refused is called, in a goroutine of its own, with a connection
	// that was not admitted; the Limiter closes it after Refused returns
	// (Refused may write a reply first, under a deadline it sets).
	Refused func(c net.Conn, ip netip.Addr, why Refusal)
	// Cut is called, in a goroutine of its own, once for a connection
	// the session deadline or the command cap ends: err is ErrSessionOver
	// or ErrTooManyCommands.
	Cut func(c *Conn, err error)
}

// Limiter admits connections under its caps. It is safe for concurrent
// use.
type Limiter struct {
	lim Limits
	now func() time.Time

	mu       sync.Mutex
	total    int
	perIP    map[netip.Prefix]int
	perNet   map[netip.Prefix]int
	conns    map[*Conn]struct{}
	draining bool
}

// New returns a Limiter admitting connections under lim.
func New(lim Limits) *Limiter {
	return &Limiter{lim: lim, now: time.Now, perIP: map[netip.Prefix]int{}, perNet: map[netip.Prefix]int{},
		conns: map[*Conn]struct{}{}}
}

// Keys returns the client and the network ip counts against: an IPv4
// address and its /24, an IPv6 /64 and its /48. An invalid ip (a
// connection that is not TCP) gives the zero prefixes, which all such
// connections share.
func Keys(ip netip.Addr) (client, network netip.Prefix) {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return netip.Prefix{}, netip.Prefix{}
	}
	if ip.Is4() {
		network, _ = ip.Prefix(24)
		return netip.PrefixFrom(ip, 32), network
	}
	client, _ = ip.Prefix(64)
	network, _ = ip.Prefix(48)
	return client, network
}

// Listener wraps ln: its Accept returns admitted connections as *Conn
// (after calling h.Admitted) and hands the others to h.Refused. Closing it
// closes ln.
func (l *Limiter) Listener(ln net.Listener, h Hooks) net.Listener {
	return &listener{Listener: ln, l: l, h: h}
}

type listener struct {
	net.Listener
	l *Limiter
	h Hooks
}

func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &Conn{Conn: c, IP: remoteIP(c.RemoteAddr()), l: ln.l, cut: ln.h.Cut}
		why := ln.l.admit(tc)
		if why == 0 {
			if ln.h.Admitted != nil {
				ln.h.Admitted(tc)
			}
			return tc, nil
		}
		go func() {
			if ln.h.Refused != nil {
				ln.h.Refused(c, tc.IP, why)
			}
			_ = c.Close()
		}()
	}
}

// admit registers a connection, or says why not.
func (l *Limiter) admit(c *Conn) Refusal {
	c.client, c.network = Keys(c.IP)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.draining:
		return Draining
	case l.lim.Total > 0 && l.total >= l.lim.Total:
		return OverTotal
	case l.lim.PerIP > 0 && l.perIP[c.client] >= l.lim.PerIP:
		return OverPerIP
	case l.lim.PerNet > 0 && l.perNet[c.network] >= l.lim.PerNet:
		return OverPerNet
	case l.lim.Total > 0 && l.lim.Reserve > 0 && l.perNet[c.network] > 0 && l.total >= l.lim.Total-l.lim.Reserve:
		return OverReserve
	}
	l.total++
	l.perIP[c.client]++
	l.perNet[c.network]++
	l.conns[c] = struct{}{}
	if l.lim.Session > 0 {
		c.end = l.now().Add(l.lim.Session)
	}
	return 0
}

func (l *Limiter) release(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
	l.total--
	if l.perIP[c.client]--; l.perIP[c.client] <= 0 {
		delete(l.perIP, c.client)
	}
	if l.perNet[c.network]--; l.perNet[c.network] <= 0 {
		delete(l.perNet, c.network)
	}
}

// command counts a command read on c and says whether c may read it.
func (l *Limiter) command(c *Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.busy {
		c.idle++
	}
	var err error
	switch {
	case !c.end.IsZero() && !l.now().Before(c.end):
		err = ErrSessionOver
	case l.lim.IdleCommands > 0 && c.idle > l.lim.IdleCommands:
		err = ErrTooManyCommands
	default:
		return nil
	}
	if !c.wasCut && c.cut != nil {
		go c.cut(c, err)
	}
	c.wasCut = true
	return err
}

// Drain stops admitting connections and transactions (SetBusy(c, true)
// fails from now on).
func (l *Limiter) Drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.draining = true
}

// Draining reports whether Drain was called.
func (l *Limiter) Draining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// CloseIdle closes every admitted connection that is not inside a
// transaction.
func (l *Limiter) CloseIdle() {
	l.mu.Lock()
	var idle []*Conn
	for c := range l.conns {
		if !c.busy {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// Shutdown drains l and runs stop, a server's graceful stop that returns
// once its connections are closed, while closing idle connections every
// 20 ms: each connection ends as soon as its transaction (MAIL FROM
// through the reply to DATA) ends. It returns stop's error; when ctx ends
// first, cut closes the remaining connections and ctx's error is
// returned.
func (l *Limiter) Shutdown(ctx context.Context, stop, cut func() error) error {
	l.Drain()
	done := make(chan error, 1)
	go func() { done <- stop() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		l.CloseIdle()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			_ = cut()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// SetBusy marks c inside a transaction (busy) or not. Starting one fails,
// returning false, once the Limiter drains. A nil c is always busy-able:
// connections that did not come from a Limiter's listener are not tracked.
func (l *Limiter) SetBusy(c *Conn, busy bool) bool {
	if c == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if busy && l.draining {
		return false
	}
	if busy && !c.busy {
		c.idle = 0
	}
	c.busy = busy
	return true
}

// Conn is an admitted connection. Closing it frees its place.
type Conn struct {
	net.Conn
	// IP is the client address (an IPv4 address unmapped).
	IP              netip.Addr
	client, network netip.Prefix
	l               *Limiter
	cut             func(*Conn, error)
	end             time.Time // the session deadline; zero: none
	once            sync.Once

	// guarded by l.mu
	busy    bool
	idle    int // commands read since the last transaction started
	wasCut  bool
	closing bool
}

// SetReadDeadline counts a command (see the package comment): it fails,
// with ErrSessionOver or ErrTooManyCommands, when c may read no more.
// The deadline set is never later than the session's end.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if err := c.l.command(c); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(c.clamp(t))
}

// SetDeadline sets both deadlines, the read one no later than the
// session's end; it counts no command.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetDeadline(t); err != nil {
		return err
	}
	if r := c.clamp(t); !r.Equal(t) {
		return c.Conn.SetReadDeadline(r)
	}
	return nil
}

func (c *Conn) clamp(t time.Time) time.Time {
	if !c.end.IsZero() && (t.IsZero() || t.After(c.end)) {
		return c.end
	}
	return t
}

// Close closes the connection and frees its place.
//
// A connection the session deadline or the command cap ended is closed
// gracefully: its end is sent first and what the client still sends is
// read and dropped for up to lingerFor, so that the client gets the
// server's last reply instead of a reset (a command it sent was never
// read).
func (c *Conn) Close() error {
	if c.l.cutAtClose(c) {
		if tc, ok := c.Conn.(*net.TCPConn); ok && tc.CloseWrite() == nil {
			_ = tc.SetReadDeadline(time.Now().Add(lingerFor))
			_, _ = io.Copy(io.Discard, io.LimitReader(tc, 1<<20))
		}
	}
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// lingerFor bounds the graceful close of a connection that was cut.
const lingerFor = time.Second

// cutAtClose says whether c, being closed, was cut: refused a read, or
// still open at its session's end (its read timed out then). The Cut
// hook learns of the latter here.
func (l *Limiter) cutAtClose(c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closing {
		return false
	}
	c.closing = true
	if !c.wasCut && !c.end.IsZero() && !l.now().Before(c.end) {
		c.wasCut = true
		if c.cut != nil {
			go c.cut(c, ErrSessionOver)
		}
	}
	return c.wasCut
}

// Of returns the *Conn under c, looking through a *tls.Conn; nil when c
// did not come from a Limiter's listener.
func Of(c net.Conn) *Conn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	tc, _ := c.(*Conn)
	return tc
}

func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
