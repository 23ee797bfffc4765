package smtpgw

import (
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/posthaste/posthaste/internal/connlimit"
)

// Answers to a connection over the per-address cap, and to one that
// arrives while the gateway shuts down.
const (
	tooMany      = "421 4.7.0 Too many connections from your address, try again later\r\n"
	shuttingDown = "421 4.3.2 Service shutting down, try again later\r\n"
)

// hooks count admitted connections and answer refused ones; on an
// implicit TLS listener (tls) a refusal cannot be answered in clear text,
// so the connection is only closed.
func (g *Gateway) hooks(tls bool) connlimit.Hooks {
	return connlimit.Hooks{
		Admitted: func(*connlimit.Conn) {
			if g.cfg.Metrics != nil {
				g.cfg.Metrics.SMTPConnections.WithLabelValues("accepted").Inc()
			}
		},
		Refused: func(c net.Conn, ip netip.Addr, why connlimit.Refusal) {
			answer := shuttingDown
			if why != connlimit.Draining {
				answer = tooMany
				if g.cfg.Metrics != nil {
					g.cfg.Metrics.SMTPConnections.WithLabelValues("refused").Inc()
				}
				g.logger.Warn("connection refused: too many from one address", "client_addr", ip.String())
			}
			if !tls {
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.WriteString(c, answer)
			}
		},
	}
}
