package smtpgw

import (
	"net"
	"net/netip"

	"github.com/posthaste/posthaste/internal/connlimit"
)

// hooks count admitted connections and log refused ones; the listener
// base answers them (smtpserve.Refusals), except on an implicit TLS
// listener, where a refusal cannot be answered in clear text.
func (g *Gateway) hooks() connlimit.Hooks {
	return connlimit.Hooks{
		Admitted: func(*connlimit.Conn) {
			if g.cfg.Metrics != nil {
				g.cfg.Metrics.SMTPConnections.WithLabelValues("accepted").Inc()
			}
		},
		Refused: func(_ net.Conn, ip netip.Addr, why connlimit.Refusal) {
			if why == connlimit.Draining {
				return
			}
			if g.cfg.Metrics != nil {
				g.cfg.Metrics.SMTPConnections.WithLabelValues("refused").Inc()
			}
			g.logger.Warn("connection refused: too many from one address", "client_addr", ip.String())
		},
	}
}
