package inbound

import (
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/posthaste/posthaste/internal/connlimit"
)

// Answers to a connection that is not admitted (RFC 5321 §3.1: 421
// instead of the greeting, then close).
var refusals = map[connlimit.Refusal]string{
	connlimit.Draining:    "421 4.3.2 Service shutting down, try again later\r\n",
	connlimit.OverTotal:   "421 4.3.2 Too many connections, try again later\r\n",
	connlimit.OverPerIP:   "421 4.7.0 Too many connections from your address, try again later\r\n",
	connlimit.OverPerNet:  "421 4.7.0 Too many connections from your network, try again later\r\n",
	connlimit.OverReserve: "421 4.3.2 Too many connections, try again later\r\n",
}

// hooks count admissions and answer refusals.
func (s *Server) hooks() connlimit.Hooks {
	return connlimit.Hooks{
		Admitted: func(*connlimit.Conn) { s.cfg.Metrics.connection("accepted") },
		Refused: func(c net.Conn, ip netip.Addr, why connlimit.Refusal) {
			s.cfg.Metrics.connection("refused")
			if why != connlimit.Draining {
				s.logger.Warn("connection refused: over the connection cap", "client_addr", ip.String(),
					"cap", capNames[why])
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, refusals[why])
		},
		Cut: func(c *connlimit.Conn, err error) {
			s.cfg.Metrics.connection("cut")
			s.logger.Info("connection closed: "+err.Error(), "client_addr", c.IP.String())
		},
	}
}

var capNames = map[connlimit.Refusal]string{connlimit.OverTotal: "total", connlimit.OverPerIP: "client",
	connlimit.OverPerNet: "network", connlimit.OverReserve: "reserve"}
