// Package connlimit caps the simultaneous connections of a TCP server, in
// total and per client address, and tracks the admitted ones for a
// graceful shutdown: idle connections can be closed at once while those
// inside a transaction are left to finish. The SMTP submission gateway
// (smtpgw) and the inbound MX (internal/inbound) use it.
package connlimit

import (
	"context"
	"crypto/tls"
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
	// OverPerIP: the client address holds its maximum.
	OverPerIP
)

// Hooks are called by a Limiter's listener. Both may be nil.
type Hooks struct {
	// Admitted is called for each admitted connection.
	Admitted func(c *Conn)
	// Refused is called, in a goroutine of its own, with a connection
	// that was not admitted; the Limiter closes it after Refused returns
	// (Refused may write a reply first, under a deadline it sets).
	Refused func(c net.Conn, ip netip.Addr, why Refusal)
}

// Limiter admits connections under its caps. It is safe for concurrent
// use.
type Limiter struct {
	maxTotal, maxPerIP int

	mu       sync.Mutex
	total    int
	perIP    map[netip.Addr]int
	conns    map[*Conn]struct{}
	draining bool
}

// New returns a Limiter admitting at most maxTotal connections in all and
// maxPerIP per client address; zero or less means no cap.
func New(maxTotal, maxPerIP int) *Limiter {
	return &Limiter{maxTotal: maxTotal, maxPerIP: maxPerIP,
		perIP: map[netip.Addr]int{}, conns: map[*Conn]struct{}{}}
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
		tc := &Conn{Conn: c, IP: remoteIP(c.RemoteAddr()), l: ln.l}
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
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.draining:
		return Draining
	case l.maxTotal > 0 && l.total >= l.maxTotal:
		return OverTotal
	case l.maxPerIP > 0 && l.perIP[c.IP] >= l.maxPerIP:
		return OverPerIP
	}
	l.total++
	l.perIP[c.IP]++
	l.conns[c] = struct{}{}
	return 0
}

func (l *Limiter) release(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
	l.total--
	if l.perIP[c.IP]--; l.perIP[c.IP] <= 0 {
		delete(l.perIP, c.IP)
	}
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
	c.busy = busy
	return true
}

// Conn is an admitted connection. Closing it frees its place.
type Conn struct {
	net.Conn
	// IP is the client address (an IPv4 address unmapped).
	IP   netip.Addr
	l    *Limiter
	busy bool // guarded by l.mu
	once sync.Once
}

// Close closes the connection and frees its place.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
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
