package ippool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/posthaste/posthaste/internal/mta"
)

// Deliverer delivers the mail of one pool, each envelope from the next of
// the pool's addresses in turn: an mta.Client per address, bound to it
// and saying its EHLO name. Each client keeps its own idle connections, so
// a connection opened from one address never carries mail of another. It
// is safe for concurrent use; Close closes every client.
type Deliverer struct {
	clients []*mta.Client
	next    atomic.Uint64
}

// NewDeliverer returns a Deliverer over addrs, whose clients share base
// (resolver, port, relay, egress policy, timeouts) but for their source
// address and EHLO name. An Address without IP (the default pool when
// POSTHASTE_IP_POOLS is unset and POSTHASTE_SOURCE_IP is too) lets the
// system choose the source address.
func NewDeliverer(base mta.Config, addrs []Address) (*Deliverer, error) {
	if len(addrs) == 0 {
		return nil, errors.New("a pool needs at least one address")
	}
	d := &Deliverer{}
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
// each Result names the source address in SourceIP.
func (d *Deliverer) Deliver(ctx context.Context, domain string, env mta.Envelope) []mta.Result {
	i := (d.next.Add(1) - 1) % uint64(len(d.clients))
	return d.clients[i].Deliver(ctx, domain, env)
}

// Close closes the idle connections of every address.
func (d *Deliverer) Close() error {
	for _, c := range d.clients {
		_ = c.Close()
	}
	return nil
}
