package main

import (
	"context"
	"io"
	"net"
	"net/smtp"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// needPostfix skips the test when this machine cannot run a throwaway
// Postfix instance, saying what is missing; the bench skips its Postfix
// reference for the same reason.
func needPostfix(t *testing.T) {
	t.Helper()
	if why := postfixUnavailable(); why != "" {
		t.Skip(why)
	}
}

// TestDurablePostfix starts a throwaway instance, submits to it with
// net/smtp, and checks that its log counts each message queued and
// discarded (a recipient outside its domain too: loopback clients may
// relay, to the discard transport), and that stop ends the master and
// removes its directory.
func TestDurablePostfix(t *testing.T) {
	needPostfix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pf, err := startPostfix(ctx, postfixConfig{domain: "inbound.test"})
	require.NoError(t, err)
	defer func() { require.NoError(t, pf.stop()) }()

	c, err := smtp.Dial(pf.addr)
	require.NoError(t, err)
	for _, rcpt := range []string{"a@inbound.test", "b@inbound.test", "c@elsewhere.test"} {
		require.NoError(t, c.Mail("sender@bench.test"))
		require.NoError(t, c.Rcpt(rcpt))
		w, err := c.Data()
		require.NoError(t, err)
		_, err = io.WriteString(w, "Subject: durable\r\n\r\nbody\r\n")
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	require.NoError(t, c.Quit())
	l, err := pf.waitRemoved(ctx, 3, time.Minute)
	require.NoError(t, err)
	require.Equal(t, postfixLog{removed: 3}, l)

	require.NoError(t, pf.stop())
	_, err = os.Stat(pf.dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = net.DialTimeout("tcp", pf.addr, time.Second)
	require.Error(t, err, "nothing listens after stop")
	select {
	case <-pf.exited:
	default:
		t.Fatal("the master is still running after stop")
	}
	require.NoError(t, pf.stop(), "a second stop is a no-op")
}

// TestDurableReference runs the bench's reference with small counts: each
// run gets a rate only when the instance logged all its messages.
func TestDurableReference(t *testing.T) {
	needPostfix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := []smtpRun{{conns: 1, messages: 5}, {conns: 4, messages: 20}}
	require.NoError(t, durableReference(ctx, runs, t.Logf))
	for _, r := range runs {
		require.Equal(t, r.messages, r.durable.n)
		require.Positive(t, r.durable.elapsed)
	}
}

// TestPostfixLifetime checks that an instance nobody stops ends by itself
// after its lifetime, as one would whose bench was killed.
func TestPostfixLifetime(t *testing.T) {
	needPostfix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pf, err := startPostfix(ctx, postfixConfig{lifetime: 5 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, pf.stop()) }()
	select {
	case <-pf.exited:
	case <-ctx.Done():
		t.Fatal("the master still runs past its lifetime")
	}
	require.NoError(t, pf.waitErr, "the master's own exit is a clean one")
	// Its daemons exit at their convenience: an smtpd may still hold the
	// listening socket a moment.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", pf.addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}, time.Minute, 50*time.Millisecond, "the port still accepts connections")
}
