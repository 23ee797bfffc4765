package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/pooldeliver"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
)

// senders is the delivery.Senders of a process: a Deliverer for each IP
// pool it serves, the default pool under "".
type senders struct {
	byPool map[string]*pooldeliver.Deliverer
	// queues are the pools as worker.Config.Pools names them ("" the
	// default pool), in the order served.
	queues []string
}

var _ delivery.Senders = (*senders)(nil)

func (s *senders) Sender(pool string) (delivery.Deliverer, bool) {
	d, ok := s.byPool[pool]
	if !ok {
		return nil, false
	}
	return d, true
}

// Close closes every pool's idle connections.
func (s *senders) Close() {
	for _, d := range s.byPool {
		_ = d.Close()
	}
}

// syncPools writes POSTHASTE_IP_POOLS into the database (store.SyncIPPools):
// the database is the truth about pools, their addresses and who sends
// from which; the configuration only adds to it and retires the addresses
// it no longer lists.
func syncPools(ctx context.Context, st *store.Store, pools []ippool.Pool) error {
	in := make([]store.IPPool, len(pools))
	for i, p := range pools {
		in[i] = storePool(p)
	}
	if err := st.Domains.SyncIPPools(ctx, in); err != nil {
		return fmt.Errorf("syncing POSTHASTE_IP_POOLS into the database: %w", err)
	}
	return nil
}

func storePool(p ippool.Pool) store.IPPool {
	out := store.IPPool{Name: p.Name}
	for _, a := range p.Addresses {
		out.Addresses = append(out.Addresses, store.IPAddress{IP: a.IP, EHLOName: a.Hostname})
	}
	return out
}

// newSenders builds the Deliverers of the pools named in want (nil: the
// default pool and every pool of the database that has addresses), with
// the addresses the database lists when the process starts: a pool added
// or changed later is served after a restart. The default pool without
// addresses in the database (POSTHASTE_IP_POOLS unset) sends from
// POSTHASTE_SOURCE_IP, or the system's choice, as POSTHASTE_HOSTNAME.
// Every address keeps to the warm-up schedule (POSTHASTE_WARMUP_SCHEDULE),
// counted in the database; what a pool has no allowance left for waits,
// or spills to the default pool when POSTHASTE_WARMUP_OVERFLOW is spill
// and this process delivers from it.
func newSenders(ctx context.Context, cfg config.Delivery, base mta.Config, st *store.Store, want []string,
	logger *slog.Logger) (*senders, error) {
	stored, err := st.Domains.IPPools(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading IP pools: %w", err)
	}
	addrs := map[string][]ippool.Address{}
	var all []string
	for _, p := range stored {
		for _, a := range p.Addresses {
			addrs[p.Name] = append(addrs[p.Name], ippool.Address{IP: a.IP, Hostname: a.EHLOName})
		}
		if len(addrs[p.Name]) > 0 {
			all = append(all, p.Name)
		} else if p.Name != cfg.DefaultPool {
			logger.Warn("IP pool without addresses: its mail waits until a worker serves it", "pool", p.Name)
		}
	}
	implicitDefault := len(addrs[cfg.DefaultPool]) == 0
	if implicitDefault {
		implicit := ippool.Address{Hostname: cfg.Hostname}
		if cfg.SourceIP != nil {
			ip, err := ippool.ParseIP(cfg.SourceIP.String())
			if err != nil {
				return nil, fmt.Errorf("POSTHASTE_SOURCE_IP: %w", err)
			}
			implicit.IP = ip
		}
		addrs[cfg.DefaultPool] = []ippool.Address{implicit}
	}
	names := want
	if names == nil {
		names = append([]string{cfg.DefaultPool}, all...)
	}
	// The default pool comes first, so that the others can spill to it.
	names = slices.Clone(names)
	if i := slices.Index(names, cfg.DefaultPool); i > 0 {
		names = slices.Insert(slices.Delete(names, i, i+1), 0, cfg.DefaultPool)
	}
	var warmup pooldeliver.Warmup
	if len(cfg.Warmup) > 0 {
		warmup.Gate = delivery.NewWarmupGate(st.Domains, cfg.Warmup, nil)
	}
	s := &senders{byPool: map[string]*pooldeliver.Deliverer{}}
	for _, name := range names {
		key := name
		if name == cfg.DefaultPool {
			key = ""
		}
		if _, dup := s.byPool[key]; dup {
			continue
		}
		if err := ippool.ValidName(name); err != nil {
			s.Close()
			return nil, usageError{err}
		}
		if len(addrs[name]) == 0 {
			s.Close()
			return nil, usageError{fmt.Errorf("IP pool %q has no addresses (known pools with addresses: %v)", name,
				slices.Concat([]string{cfg.DefaultPool}, all))}
		}
		w := warmup
		if key == "" && implicitDefault {
			w.Gate = nil // an address of the configuration, not of the database: no warm-up
		}
		if key != "" && cfg.WarmupOverflow == config.WarmupSpill {
			w.Spill = s.byPool[""] // nil when this process does not deliver from the default pool: wait
		}
		d, err := pooldeliver.New(base, addrs[name], w)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("IP pool %s: %w", name, err)
		}
		s.byPool[key] = d
		s.queues = append(s.queues, key)
		logger.Info("delivering from IP pool", "pool", name, "default", key == "", "addresses", addrStrings(addrs[name]),
			"warmup_spill", w.Spill != nil)
	}
	return s, nil
}

func addrStrings(as []ippool.Address) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
