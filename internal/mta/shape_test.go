package mta

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/shaping"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/redistest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

// gmailMX is the name of Gmail's MX host, which the test DNS server points
// at the loopback MX so that the provider grouping applies.
const gmailMX = "gmail-smtp-in.l.google.com"

// newGmailMX starts an MX host for gmail.test: MX 5 gmail-smtp-in.l.google.com,
// at 127.0.0.1.
func newGmailMX(t *testing.T, opts smtptest.Options) (*dnstest.Server, *smtptest.Server) {
	t.Helper()
	mx := smtptest.NewServer(t, opts)
	d := dnstest.NewServer(t)
	d.AddMX("gmail.test", gmailMX, 5)
	d.AddA(gmailMX, "127.0.0.1")
	return d, mx
}

// newShaper returns a Shaper of rules on clock (nil: time.Now) that gives
// up at once, shared through the Redis at url when set.
func newShaper(t *testing.T, rules shaping.Rules, url string, clock *clocktest.Clock) *shaping.Shaper {
	t.Helper()
	cfg := shaping.Config{Rules: rules, RedisURL: url}
	if clock != nil {
		cfg.Now = clock.Now
	}
	s, err := shaping.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func gmailEnvelope(i int) Envelope {
	return Envelope{From: sender, To: []string{fmt.Sprintf("r%d@gmail.test", i)}, Data: []byte(body)}
}

// requireHeld asserts that r was deferred by traffic shaping.
func requireHeld(t *testing.T, r Result, reason string) {
	t.Helper()
	require.Equal(t, want{Deferred, 451, "4.4.5"}, want{r.Status, r.Code, r.EnhancedCode}, r.Message)
	require.Contains(t, r.Message, "traffic shaping holds mail to gmail")
	require.Contains(t, r.Message, reason)
	require.Empty(t, r.RemoteServer, "no host was asked")
}

// TestShapingConnectionsAcrossClients: two clients sharing the limits
// through Redis (two processes) open at most the provider's connections
// between them; the deliveries that find no slot are deferred without
// connecting.
func TestShapingConnectionsAcrossClients(t *testing.T) {
	url := redistest.Start(t)
	var inData atomic.Int32
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // a failing test does not leave sessions blocked
	d, mx := newGmailMX(t, smtptest.Options{Data: func([]string, int) error {
		inData.Add(1)
		<-gate
		return nil
	}})
	rules := shaping.Rules{shaping.Gmail: {Connections: 2}}
	clients := []*Client{
		newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, url, nil) }),
		newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, url, nil) }),
	}
	ctx := testContext(t)
	const n = 8
	results := make(chan Result, n)
	for i := range n {
		go func() { results <- clients[i%2].Deliver(ctx, "gmail.test", gmailEnvelope(i))[0] }()
	}
	// Two deliveries hold their connections in DATA; the other six find
	// no slot.
	for range n - 2 {
		requireHeld(t, <-results, "connections allowed are open")
	}
	require.Eventually(t, func() bool { return inData.Load() == 2 }, 10*time.Second, 5*time.Millisecond)
	open()
	for range 2 {
		r := <-results
		require.Equal(t, Delivered, r.Status, r.Message)
	}
	require.Equal(t, 2, mx.MaxOpenConnections())
	require.Equal(t, 2, mx.Connections())
}

// TestShapingRateAcrossClients: the messages per second of a provider
// hold between two clients sharing Redis, and refill by the clock.
func TestShapingRateAcrossClients(t *testing.T) {
	url := redistest.Start(t)
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d, mx := newGmailMX(t, smtptest.Options{})
	rules := shaping.Rules{shaping.Gmail: {PerSecond: 3}}
	a := newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, url, clock) })
	b := newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, url, clock) })
	ctx := testContext(t)
	for i, c := range []*Client{a, b, a} {
		r := c.Deliver(ctx, "gmail.test", gmailEnvelope(i))[0]
		require.Equal(t, Delivered, r.Status, r.Message)
	}
	requireHeld(t, b.Deliver(ctx, "gmail.test", gmailEnvelope(3))[0], "messages a second")
	requireHeld(t, a.Deliver(ctx, "gmail.test", gmailEnvelope(4))[0], "messages a second")
	require.Len(t, mx.Messages(), 3)

	clock.Advance(time.Second / 3)
	r := b.Deliver(ctx, "gmail.test", gmailEnvelope(5))[0]
	require.Equal(t, Delivered, r.Status, r.Message)
	require.Len(t, mx.Messages(), 4)
}

// TestShapingMessagesPerConnection: a pooled connection carries at most
// the provider's messages per connection, then closes; other providers'
// connections are not limited.
func TestShapingMessagesPerConnection(t *testing.T) {
	d, mx := newGmailMX(t, smtptest.Options{})
	d.AddMX("example.test", "mx.example.test", 10)
	d.AddA("mx.example.test", "127.0.0.1")
	rules := shaping.Rules{shaping.Gmail: {PerConnection: 2}}
	c := newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, "", nil) })
	ctx := testContext(t)
	for i := range 5 {
		r := c.Deliver(ctx, "gmail.test", gmailEnvelope(i))[0]
		require.Equal(t, Delivered, r.Status, r.Message)
	}
	perConn := map[string]int{}
	for _, m := range mx.Messages() {
		perConn[m.RemoteAddr]++
	}
	require.Len(t, perConn, 3, "5 messages, 2 a connection: %v", perConn)
	for addr, n := range perConn {
		require.LessOrEqual(t, n, 2, addr)
	}

	for i := range 5 {
		env := Envelope{From: sender, To: []string{fmt.Sprintf("r%d@example.test", i)}, Data: []byte(body)}
		r := c.Deliver(ctx, "example.test", env)[0]
		require.Equal(t, Delivered, r.Status, r.Message)
	}
	require.Equal(t, 4, mx.Connections(), "the default provider's messages share one connection")
}

// TestShapingBacksOffAndResumes: an MX that answers 421 4.7.0 "try again
// later" pauses its provider for the source address, in every client
// sharing the limits, without connecting; after the pause delivery
// resumes by itself.
func TestShapingBacksOffAndResumes(t *testing.T) {
	url := redistest.Start(t)
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d, mx := newGmailMX(t, smtptest.Options{Rcpt: func(_ string, n int) error {
		if n == 1 {
			return smtptest.Reply(421, "4.7.0 Try again later, closing connection.")
		}
		return nil
	}})
	rules := shaping.Rules{shaping.Gmail: {Backoff: time.Minute, BackoffMax: time.Hour}}
	a := newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, url, clock) })
	b := newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = newShaper(t, rules, url, clock) })
	ctx := testContext(t)
	env := gmailEnvelope(0)

	r := a.Deliver(ctx, "gmail.test", env)[0]
	require.Equal(t, want{Deferred, 421, "4.7.0"}, want{r.Status, r.Code, r.EnhancedCode}, r.Message)
	require.Equal(t, 1, mx.Connections())

	requireHeld(t, a.Deliver(ctx, "gmail.test", env)[0], "gmail asked to slow down")
	requireHeld(t, b.Deliver(ctx, "gmail.test", env)[0], "gmail asked to slow down")
	require.Equal(t, 1, mx.Connections(), "no connection during the pause")

	other := newClient(t, d, mx.Port(), func(c *Config) {
		c.Shaping = newShaper(t, rules, url, clock)
		c.SourceIP = net.ParseIP("127.0.0.2")
	})
	r = other.Deliver(ctx, "gmail.test", env)[0]
	require.Equal(t, Delivered, r.Status, "another source address is not paused: %s", r.Message)

	clock.Advance(time.Minute)
	r = b.Deliver(ctx, "gmail.test", env)[0]
	require.Equal(t, Delivered, r.Status, "delivery resumes after the pause: %s", r.Message)
	require.True(t, strings.HasPrefix(mx.Messages()[len(mx.Messages())-1].RemoteAddr, "127.0.0.1:"))
}

// TestShapingWaitTakesIdleConnection: deliveries waiting for the one
// connection slot take over the connection another delivery leaves idle
// (it keeps the slot) instead of waiting for a slot that stays taken.
func TestShapingWaitTakesIdleConnection(t *testing.T) {
	d, mx := newGmailMX(t, smtptest.Options{})
	sh, err := shaping.New(shaping.Config{Rules: shaping.Rules{shaping.Gmail: {Connections: 1}}, MaxWait: 20 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sh.Close()) })
	c := newClient(t, d, mx.Port(), func(c *Config) { c.Shaping = sh })
	ctx := testContext(t)
	const n = 4
	results := make(chan Result, n)
	for i := range n {
		go func() { results <- c.Deliver(ctx, "gmail.test", gmailEnvelope(i))[0] }()
	}
	for range n {
		r := <-results
		require.Equal(t, Delivered, r.Status, r.Message)
	}
	require.Equal(t, 1, mx.Connections())
}

// TestHeldOutcome: what traffic shaping refuses becomes a deferral that
// names no host.
func TestHeldOutcome(t *testing.T) {
	held := &shaping.HeldError{Destination: shaping.Gmail, Source: "192.0.2.1", Reason: "rate"}
	for _, tc := range []struct {
		err  error
		want outcome
	}{
		{held, outcome{Deferred, 451, "4.4.5", held.Error(), ""}},
		{fmt.Errorf("wrapped: %w", held), outcome{Deferred, 451, "4.4.5", held.Error(), ""}},
		{context.Canceled, outcome{Deferred, 451, "4.4.7", "delivery interrupted: context canceled", ""}},
	} {
		require.Equal(t, tc.want, heldOutcome(tc.err), tc.err.Error())
	}
}
