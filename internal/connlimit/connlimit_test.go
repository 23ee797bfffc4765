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
	l := New(Limits{Total: 3, PerIP: 2})
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
	l := New(Limits{})
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

func TestAdmission(t *testing.T) {
	type step struct {
		ip    string // admit a connection from ip; "close N": close the one admitted at step N
		want  Refusal
		close int
	}
	admit := func(ip string, want Refusal) step { return step{ip: ip, want: want, close: -1} }
	closeStep := func(n int) step { return step{close: n} }
	for _, tc := range []struct {
		name  string
		lim   Limits
		steps []step
	}{
		{"IPv4 per address and per /24", Limits{PerIP: 2, PerNet: 3}, []step{
			admit("10.0.1.1", 0), admit("10.0.1.1", 0), admit("10.0.1.1", OverPerIP),
			admit("10.0.1.2", 0), admit("10.0.1.3", OverPerNet), admit("10.0.2.1", 0),
			closeStep(0), admit("10.0.1.3", 0), admit("10.0.1.4", OverPerNet),
		}},
		{"IPv6 per /64 and per /48", Limits{PerIP: 2, PerNet: 3}, []step{
			admit("2001:db8:0:1::1", 0), admit("2001:db8:0:1::2", 0), admit("2001:db8:0:1:ffff::9", OverPerIP),
			admit("2001:db8:0:2::1", 0), admit("2001:db8:0:3::1", OverPerNet), admit("2001:db8:1::1", 0),
		}},
		{"IPv4-mapped IPv6 is IPv4", Limits{PerIP: 1}, []step{
			admit("10.0.1.1", 0), admit("::ffff:10.0.1.1", OverPerIP), admit("::ffff:10.0.1.2", 0),
		}},
		{"the reserve is for networks holding none", Limits{Total: 5, Reserve: 2}, []step{
			admit("10.0.1.1", 0), admit("10.0.1.2", 0), admit("10.0.1.3", 0), admit("10.0.1.4", OverReserve),
			admit("10.0.2.1", 0), admit("10.0.2.2", OverReserve), admit("10.0.3.1", 0), admit("10.0.4.1", OverTotal),
			closeStep(4), admit("10.0.1.4", OverReserve), admit("10.0.5.1", 0),
		}},
		{"one network at its cap cannot take the reserve", Limits{Total: 10, PerIP: 3, PerNet: 9, Reserve: 2},
			[]step{
				admit("10.0.1.1", 0), admit("10.0.1.1", 0), admit("10.0.1.1", 0), admit("10.0.1.2", 0),
				admit("10.0.1.2", 0), admit("10.0.1.2", 0), admit("10.0.1.3", 0), admit("10.0.1.3", 0),
				admit("10.0.1.3", OverReserve), admit("10.0.1.4", OverReserve), admit("10.0.2.1", 0),
				admit("10.0.3.1", 0), admit("10.0.4.1", OverTotal),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.lim)
			conns := map[int]*Conn{}
			for i, s := range tc.steps {
				if s.ip == "" {
					l.release(conns[s.close])
					continue
				}
				c := &Conn{IP: netip.MustParseAddr(s.ip).Unmap(), l: l}
				require.Equal(t, s.want, l.admit(c), "step %d: %s", i, s.ip)
				if s.want == 0 {
					conns[i] = c
				}
			}
		})
	}
}

// A session deadline makes reads time out at the session's end and then
// refuses them; the command cap refuses a read after IdleCommands in a
// row outside a transaction.
func TestSessionDeadlineAndCommandCap(t *testing.T) {
	t.Run("session deadline", func(t *testing.T) {
		l := New(Limits{Session: 500 * time.Millisecond})
		refused := make(chan Refusal, 1)
		addr, admitted := serve(t, l, refused)
		dialFrom(t, addr, "127.0.0.1")
		c := recv(t, admitted)
		cuts := make(chan error, 2)
		c.cut = func(_ *Conn, err error) { cuts <- err }
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Hour)))
		done := make(chan error, 1)
		go func() { _, err := c.Read(make([]byte, 1)); done <- err }()
		err := recv(t, done)
		var ne net.Error
		require.ErrorAs(t, err, &ne, "the read ends at the session's end, not an hour later")
		require.True(t, ne.Timeout())
		require.ErrorIs(t, c.SetReadDeadline(time.Now().Add(time.Hour)), ErrSessionOver)
		require.ErrorIs(t, c.SetReadDeadline(time.Time{}), ErrSessionOver)
		require.ErrorIs(t, recv(t, cuts), ErrSessionOver)
	})

	t.Run("commands outside a transaction", func(t *testing.T) {
		l := New(Limits{IdleCommands: 3})
		refused := make(chan Refusal, 1)
		addr, admitted := serve(t, l, refused)
		dialFrom(t, addr, "127.0.0.1")
		c := recv(t, admitted)
		next := func() error { return c.SetReadDeadline(time.Now().Add(time.Minute)) }
		for range 3 {
			require.NoError(t, next())
		}
		require.True(t, l.SetBusy(c, true), "a transaction starts the count again")
		for range 10 {
			require.NoError(t, next(), "commands inside a transaction are not counted")
		}
		require.True(t, l.SetBusy(c, false))
		for range 3 {
			require.NoError(t, next())
		}
		require.ErrorIs(t, next(), ErrTooManyCommands)
		require.ErrorIs(t, next(), ErrTooManyCommands)
	})
}
