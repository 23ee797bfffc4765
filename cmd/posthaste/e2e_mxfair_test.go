package main

import (
	"bufio"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestDevInboundOneNetworkCannotTakeEveryConnection: through `posthaste
// dev`, with the inbound MX capped at 10 connections and 3 per address,
// one network (127.0.1.0/24) opening all the connections it can is
// refused before the last places, kept for networks holding none, and
// another network (127.0.0.1) still delivers a bounce to a signed return
// path (issue 33). Before, that network took all 10 and the bounce got
// 421.
func TestDevInboundOneNetworkCannotTakeEveryConnection(t *testing.T) {
	dns := dnstest.NewServer(t)
	env := domainDevEnv(t, pgtest.NewDatabase(t), dns, freePort(t))
	env["POSTHASTE_INBOUND_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env["POSTHASTE_INBOUND_MAX_CONNS"] = "10"
	env["POSTHASTE_INBOUND_MAX_CONNS_PER_IP"] = "3"
	dev := startDev(t, env)
	defer dev.stop(t)
	addr := env["POSTHASTE_INBOUND_LISTEN"]

	held := 0
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
fill:
	for i := 1; i < 255; i++ {
		for range 3 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.1.%d", i))},
				Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", addr)
			require.NoError(t, err)
			conns = append(conns, c)
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			line, err := textproto.NewReader(bufio.NewReader(c)).ReadLine()
			require.NoError(t, err)
			if !strings.HasPrefix(line, "220 ") {
				require.True(t, strings.HasPrefix(line, "421 "), line)
				break fill
			}
			held++
		}
	}
	rp := reports.SignedReturnPath(devVERPKey(t, env["POSTHASTE_DATA_DIR"]), uuid.Must(uuid.NewV7()),
		"send.example.test")
	dsn := []byte("From: Mail Delivery System <MAILER-DAEMON@mx.example.net>\r\nTo: " + rp + "\r\n" +
		"Subject: Undelivered Mail Returned to Sender\r\n\r\nThe mail could not be delivered.\r\n")
	require.NoError(t, sendInbound(t, addr, rp, dsn), "the other network's bounce is taken")
	require.Equal(t, 8, held, "a fifth of the 10 is kept for other networks")
}
