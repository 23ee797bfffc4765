package mxlisten

import (
	"net"
	"net/netip"

	"github.com/posthaste/posthaste/internal/connlimit"
)

// hooks count admissions, refusals and cuts, and log them; the listener
// base answers refusals (smtpserve.Refusals).
func (s *Server) hooks() connlimit.Hooks {
	return connlimit.Hooks{
		Admitted: func(*connlimit.Conn) { s.cfg.Metrics.connection("accepted") },
		Refused: func(_ net.Conn, ip netip.Addr, why connlimit.Refusal) {
			s.cfg.Metrics.connection("refused")
			if why != connlimit.Draining {
				s.logger.Warn("connection refused: over the connection cap", "client_addr", ip.String(),
					"cap", capNames[why])
			}
		},
		Cut: func(c *connlimit.Conn, err error) {
			s.cfg.Metrics.connection("cut")
			s.logger.Info("connection closed: "+err.Error(), "client_addr", c.IP.String())
		},
	}
}

var capNames = map[connlimit.Refusal]string{connlimit.OverTotal: "total", connlimit.OverPerIP: "client",
	connlimit.OverPerNet: "network", connlimit.OverReserve: "reserve"}
