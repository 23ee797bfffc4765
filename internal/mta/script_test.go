package mta

import (
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// script serves fn on every connection to a TCP listener on addr, for
// server behaviour go-smtp cannot produce. It returns the listen address;
// listener and connections are closed in t.Cleanup.
func script(t *testing.T, addr string, fn func(*scriptConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("script: listening: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				fn(&scriptConn{t: t, tp: textproto.NewConn(c)})
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

type scriptConn struct {
	t  *testing.T
	tp *textproto.Conn
}

// reply writes lines in one write, so that a client reads them together.
func (c *scriptConn) reply(lines ...string) {
	_, _ = c.tp.W.WriteString(strings.Join(lines, "\r\n") + "\r\n")
	_ = c.tp.W.Flush()
}

// expect reads a command and checks its verb.
func (c *scriptConn) expect(verb string) string {
	line, err := c.tp.ReadLine()
	if err != nil {
		c.t.Errorf("script: waiting for %s: %v", verb, err)
		return ""
	}
	if !strings.HasPrefix(strings.ToUpper(line), verb) {
		c.t.Errorf("script: got %q, want %s", line, verb)
	}
	return line
}

// readData reads message data up to the final dot.
func (c *scriptConn) readData() string {
	b, err := c.tp.ReadDotBytes()
	if err != nil {
		c.t.Errorf("script: reading data: %v", err)
	}
	return string(b)
}

// discard reads until the client closes the connection, answering QUIT.
func (c *scriptConn) discard() {
	for {
		line, err := c.tp.ReadLine()
		if err != nil {
			return
		}
		if strings.EqualFold(line, "QUIT") {
			c.reply("221 bye")
			return
		}
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
