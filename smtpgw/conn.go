package smtpgw

import (
	"io"
	"net"
	"sync"
	"time"
)

// admission is a listener that enforces the per-address connection cap
// and tracks the connections it hands out, for the graceful shutdown.
type admission struct {
	net.Listener
	g   *Gateway
	tls bool // implicit TLS: a refusal cannot be answered in clear text
}

// tooMany is the answer to a connection over the per-address cap.
const tooMany = "421 4.7.0 Too many connections from your address, try again later\r\n"

func (l *admission) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		tc := &trackedConn{Conn: c, g: l.g, ip: ip}
		if l.g.admit(tc) {
			return tc, nil
		}
		if l.g.cfg.Metrics != nil {
			l.g.cfg.Metrics.SMTPConnections.WithLabelValues("refused").Inc()
		}
		l.g.logger.Warn("connection refused: too many from one address", "client_addr", ip)
		go func() {
			if !l.tls {
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.WriteString(c, tooMany)
			}
			_ = c.Close()
		}()
	}
}

// admit registers a connection unless its address is at the cap.
func (g *Gateway) admit(c *trackedConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perIP[c.ip] >= g.cfg.MaxConnsPerIP || g.draining {
		return false
	}
	g.perIP[c.ip]++
	g.conns[c] = struct{}{}
	if g.cfg.Metrics != nil {
		g.cfg.Metrics.SMTPConnections.WithLabelValues("accepted").Inc()
	}
	return true
}

func (g *Gateway) release(c *trackedConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.conns, c)
	if g.perIP[c.ip]--; g.perIP[c.ip] <= 0 {
		delete(g.perIP, c.ip)
	}
}

// trackedConn is an admitted connection.
type trackedConn struct {
	net.Conn
	g    *Gateway
	ip   string
	busy bool // in a mail transaction; guarded by g.mu
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.release(c) })
	return err
}

func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
