package connlimit

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serve accepts on a Limiter's listener and sends every admitted
// connection to the returned channel.
func serve(t *testing.T, l *Limiter, refused chan Refusal) (string, chan *Conn) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := l.Listener(raw, Hooks{Refused: func(c net.Conn, _ netip.Addr, why Refusal) {
		_, _ = io.WriteString(c, "no\r\n")
		refused <- why
	}})
	t.Cleanup(func() { ln.Close() })
	got := make(chan *Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			got <- c.(*Conn)
		}
	}()
	return raw.Addr().String(), got
}

func dialFrom(t *testing.T, addr, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

func TestCaps(t *testing.T) {
	l := New(3, 2)
	refused := make(chan Refusal, 16)
	addr, admitted := serve(t, l, refused)

	dialFrom(t, addr, "127.0.0.1")
	a := recv(t, admitted)
	require.Equal(t, "127.0.0.1", a.IP.String())
	dialFrom(t, addr, "127.0.0.1")
	recv(t, admitted)
	c := dialFrom(t, addr, "127.0.0.1")
	require.Equal(t, OverPerIP, recv(t, refused))
	line, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "no\r\n", string(line), "the hook answers, then the connection is closed")

	dialFrom(t, addr, "127.0.0.2")
	recv(t, admitted)
	dialFrom(t, addr, "127.0.0.3")
	require.Equal(t, OverTotal, recv(t, refused))

	// Closing frees the place.
	require.NoError(t, a.Close())
	_ = a.Close() // closing twice frees once
	dialFrom(t, addr, "127.0.0.1")
	recv(t, admitted)
	dialFrom(t, addr, "127.0.0.4")
	require.Equal(t, OverTotal, recv(t, refused))
}

func TestDrainAndCloseIdle(t *testing.T) {
	l := New(0, 0)
	refused := make(chan Refusal, 16)
	addr, admitted := serve(t, l, refused)
	idleClient := dialFrom(t, addr, "127.0.0.1")
	idle := recv(t, admitted)
	busyClient := dialFrom(t, addr, "127.0.0.1")
	busy := recv(t, admitted)
	require.Same(t, busy, Of(busy))
	require.Nil(t, Of(busyClient))

	require.True(t, l.SetBusy(busy, true))
	l.Drain()
	require.True(t, l.Draining())
	require.False(t, l.SetBusy(idle, true), "no new transaction while draining")
	l.CloseIdle()
	_ = idleClient.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := idleClient.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the idle connection is closed")

	_, err = busy.Write([]byte("still here"))
	require.NoError(t, err, "the busy connection is not")
	buf := make([]byte, 10)
	_, err = io.ReadFull(busyClient, buf)
	require.NoError(t, err)

	dialFrom(t, addr, "127.0.0.1")
	require.Equal(t, Draining, recv(t, refused))
	require.True(t, l.SetBusy(nil, true))
}
