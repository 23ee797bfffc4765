package mta

import (
	"context"
	"errors"
	"net"

	"github.com/posthaste/posthaste/internal/shaping"
)

// This file is the delivery code's hook into traffic shaping (package
// shaping, Config.Shaping): the limits of each MX host's provider (or of
// the host itself, outside the big providers) for this client's source
// address, taken before a connection opens and before
// each message, and the replies that tell the provider's mood. The relay
// is not shaped: the operator chose it and sets its own limits.

// shapingSource is the source address the limits are kept by: the
// client's SourceIP, or "default" when the system chooses it.
func (c *Client) shapingSource() string {
	if ta, ok := c.local.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return "default"
}

// shaped reports whether deliveries to host are shaped.
func (c *Client) shaped() bool { return c.shaper != nil && c.relayHost == "" }

// openSlot waits for room to open a connection to host and returns its
// lease (nil without shaping), or the outcome that defers the
// recipients. While it waits, a connection to key meeting p that another
// delivery leaves idle is taken and returned instead: it holds a slot
// already.
func (c *Client) openSlot(ctx context.Context, host, key string, p *tlsPolicy) (*shaping.Lease, *conn, *outcome) {
	if !c.shaped() {
		return nil, nil, nil
	}
	var idle *conn
	ready := func() bool {
		idle = c.pool.get(key, c.accepts(p))
		return idle != nil
	}
	l, err := c.shaper.Open(ctx, host, c.shapingSource(), ready)
	if idle != nil {
		return nil, idle, nil
	}
	if err != nil {
		o := heldOutcome(err)
		return nil, nil, &o
	}
	return l, nil, nil
}

// sendSlot waits for room to send one more message over cn; it returns
// the outcome that defers the recipients when there is none.
func (c *Client) sendSlot(ctx context.Context, cn *conn) *outcome {
	if !c.shaped() || cn.lease == nil {
		return nil
	}
	if err := c.shaper.Send(ctx, cn.host, c.shapingSource()); err != nil {
		o := heldOutcome(err)
		return &o
	}
	cn.lease.Sent()
	return nil
}

// heldOutcome defers for a shaping hold (RFC 3463 X.4.5: mail system
// congestion, here this side's own) or a canceled wait.
func heldOutcome(err error) outcome {
	var he *shaping.HeldError
	if errors.As(err, &he) {
		return outcome{Deferred, 451, "4.4.5", he.Error(), ""}
	}
	return outcome{Deferred, 451, "4.4.7", "delivery interrupted: " + err.Error(), ""}
}

// observeResults tells the shaper how host answered the recipients of a
// transaction: the first reply that asks to slow down, else a success.
func (c *Client) observeResults(ctx context.Context, host string, pending []int, results []Result) {
	if !c.shaped() {
		return
	}
	var ok *Result
	for _, i := range pending {
		r := &results[i]
		if r.RemoteServer != host {
			continue
		}
		if r.Status == Deferred && shaping.SlowDown(r.Code, r.EnhancedCode, r.Message) {
			c.observe(ctx, host, outcome{r.Status, r.Code, r.EnhancedCode, r.Message, host})
			return
		}
		if r.Status == Delivered && ok == nil {
			ok = r
		}
	}
	if ok != nil {
		c.observe(ctx, host, outcome{ok.Status, ok.Code, ok.EnhancedCode, ok.Message, host})
	}
}

// observe tells the shaper about one reply of host (a failure to open a
// session, such as a 421 greeting, included).
func (c *Client) observe(ctx context.Context, host string, o outcome) {
	if !c.shaped() || o.remote == "" {
		return
	}
	c.shaper.Observe(ctx, host, c.shapingSource(), o.code, o.enhanced, o.message)
}
