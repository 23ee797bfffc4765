package smtpserve

import (
	"bufio"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/connlimit"
	"github.com/posthaste/posthaste/internal/testkit/sourcetest"
)

// TestRefusalsCoverEveryRefusal: a connection refused for any reason is
// answered with a 421 line (RFC 5321 §3.1), never an empty write.
func TestRefusalsCoverEveryRefusal(t *testing.T) {
	for why := connlimit.Draining; why <= connlimit.OverReserve; why++ {
		r := Refusals[why]
		require.True(t, strings.HasPrefix(r, "421 4."), "refusal %d: %q", why, r)
		require.True(t, strings.HasSuffix(r, "\r\n"), "refusal %d: %q", why, r)
	}
}

type backend struct{}

func (backend) NewSession(*smtp.Conn) (smtp.Session, error) { return nil, smtp.ErrAuthUnsupported }

// TestServeAnswersOverTheCap: a connection over the per-client cap gets
// its refusal instead of the greeting, and the hook sees it first.
func TestServeAnswersOverTheCap(t *testing.T) {
	s := New(Config{Hostname: "mx.test", MaxMessageBytes: 1 << 20, MaxRecipients: 10, ReadTimeout: 10e9,
		WriteTimeout: 10e9, Limits: connlimit.Limits{PerIP: 1}, Logger: slog.New(slog.DiscardHandler)}, backend{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := make(chan connlimit.Refusal, 1)
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(ln, false, connlimit.Hooks{Refused: func(_ net.Conn, _ netip.Addr, why connlimit.Refusal) {
			refused <- why
		}})
	}()
	first, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer first.Close()
	greeting, err := bufio.NewReader(first).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(greeting, "220 mx.test"), greeting)

	second, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer second.Close()
	answer, err := bufio.NewReader(second).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, Refusals[connlimit.OverPerIP], answer)
	require.Equal(t, connlimit.OverPerIP, <-refused)

	require.NoError(t, s.Shutdown(t.Context()))
	require.NoError(t, <-served)
}

// TestServersUseTheBase: the submission gateway and the inbound MX build
// their go-smtp servers and connection limiters only through this
// package, so there is one listener base.
func TestServersUseTheBase(t *testing.T) {
	sourcetest.Forbid(t, []string{"../../smtpgw", "../mxlisten"}, []string{"smtp.NewServer(", "connlimit.New("},
		"build the listener with smtpserve.New")
}
