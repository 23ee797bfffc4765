// Package pooldeliver delivers the mail of an IP pool (package ippool)
// through the SMTP client (package mta): one client per address of the
// pool, each bound to its address and saying its EHLO name, within the
// addresses' warm-up allowances. It is kept apart from ippool so that
// what reads pools (configuration, the store) does not link the SMTP
// client.
package pooldeliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/mta"
)

// Warmup limits a Deliverer's addresses to their warm-up allowances. The
// zero Warmup sets no limit.
type Warmup struct {
	// Gate grants the allowances; nil: no limit.
	Gate ippool.Gate
	// Spill delivers the recipients for whom no address of the pool has
	// allowance left (POSTHASTE_WARMUP_OVERFLOW=spill: the default pool's
	// Deliverer, limited by its own allowances); nil: they are deferred
	// with a 451 4.7.0 reply of the warm-up's own, so that the delivery
	// is retried later (the next UTC day renews the allowances).
	Spill *Deliverer
}

// Replies of recipients deferred by the warm-up (RFC 3463: X.7.0, other
// security or policy status; X.3.0, other mail system status).
const (
	warmupUsedUp  = "warm-up: daily allowance of the pool's addresses used up"
	warmupUnknown = "warm-up: allowance could not be checked"
)

// Deliverer delivers the mail of one pool, each envelope from the next of
// the pool's addresses in turn: an mta.Client per address, bound to it
// and saying its EHLO name. Each client keeps its own idle connections, so
// a connection opened from one address never carries mail of another.
// With a Warmup gate, an address takes only the recipients its allowance
// has room for, and the next addresses the rest. It is safe for concurrent
// use; Close closes every client (not the Spill Deliverer).
type Deliverer struct {
	addrs   []ippool.Address
	clients []*mta.Client
	warmup  Warmup
	logger  *slog.Logger
	next    atomic.Uint64
}

// New returns a Deliverer over addrs, whose clients share base
// (resolver, port, relay, egress policy, timeouts) but for their source
// address and EHLO name, limited by w. An Address without IP (the default
// pool when POSTHASTE_IP_POOLS is unset and POSTHASTE_SOURCE_IP is too)
// lets the system choose the source address.
func New(base mta.Config, addrs []ippool.Address, w Warmup) (*Deliverer, error) {
	if len(addrs) == 0 {
		return nil, errors.New("a pool needs at least one address")
	}
	d := &Deliverer{addrs: addrs, warmup: w, logger: base.Logger}
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	for _, a := range addrs {
		cfg := base
		cfg.Hostname, cfg.SourceIP = a.Hostname, nil
		if a.IP.IsValid() {
			cfg.SourceIP = net.IP(a.IP.AsSlice())
		}
		if cfg.Logger != nil {
			cfg.Logger = cfg.Logger.With("source_ip", a.IP.String())
		}
		c, err := mta.New(cfg)
		if err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("address %s: %w", a, err)
		}
		d.clients = append(d.clients, c)
	}
	return d, nil
}

// Deliver hands env to the next address's client (mta.Client.Deliver);
// each Result names the source address in SourceIP. With a Warmup gate,
// the addresses are asked in turn for allowance until every recipient has
// an address; the recipients left over go to the Spill Deliverer or are
// deferred (WarmupDeferred).
func (d *Deliverer) Deliver(ctx context.Context, domain string, env mta.Envelope) []mta.Result {
	first := int((d.next.Add(1) - 1) % uint64(len(d.clients)))
	if d.warmup.Gate == nil {
		return d.clients[first].Deliver(ctx, domain, env)
	}
	results := make([]mta.Result, 0, len(env.To))
	rest := env.To
	unknown := false
	for k := 0; k < len(d.clients) && len(rest) > 0; k++ {
		i := (first + k) % len(d.clients)
		n, err := d.warmup.Gate.Take(ctx, d.addrs[i], len(rest))
		if err != nil {
			d.logger.Error("taking warm-up allowance: trying the next address", "source_ip", d.addrs[i].IP.String(),
				"rcpt_domain", domain, "err", err)
			unknown = true
			continue
		}
		n = min(max(n, 0), len(rest))
		if n == 0 {
			continue
		}
		part := env
		part.To = rest[:n:n]
		results = append(results, d.clients[i].Deliver(ctx, domain, part)...)
		rest = rest[n:]
	}
	if len(rest) == 0 {
		return results
	}
	if d.warmup.Spill != nil && !unknown {
		part := env
		part.To = rest
		return append(results, d.warmup.Spill.Deliver(ctx, domain, part)...)
	}
	msg, enhanced := warmupUsedUp, "4.7.0"
	if unknown {
		msg, enhanced = warmupUnknown, "4.3.0"
	}
	for _, r := range rest {
		results = append(results, mta.Result{Rcpt: r, Status: mta.Deferred, Code: 451, EnhancedCode: enhanced, Message: msg})
	}
	return results
}

// Close closes the idle connections of every address.
func (d *Deliverer) Close() error {
	for _, c := range d.clients {
		_ = c.Close()
	}
	return nil
}
