package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/store"
)

// WarmupGate is the ippool.Gate of a delivering process: the daily
// allowances of a warm-up schedule, counted in PostgreSQL
// (store.TakeWarmup) so that they hold across processes and restarts.
type WarmupGate struct {
	domains  *store.Domains
	schedule ippool.Schedule
	now      func() time.Time
}

var _ ippool.Gate = (*WarmupGate)(nil)

// NewWarmupGate returns the gate of schedule over st; now is its clock
// (nil: time.Now), whose UTC day is the day counted.
func NewWarmupGate(st *store.Domains, schedule ippool.Schedule, now func() time.Time) *WarmupGate {
	if now == nil {
		now = time.Now
	}
	return &WarmupGate{domains: st, schedule: schedule, now: now}
}

// Take takes up to n messages from a's allowance of today. An address
// the database does not hold (the default pool's implicit address when
// POSTHASTE_IP_POOLS is unset) has no warm-up.
func (g *WarmupGate) Take(ctx context.Context, a ippool.Address, n int) (int, error) {
	if !a.IP.IsValid() {
		return n, nil
	}
	got, err := g.domains.TakeWarmup(ctx, a.IP, n, g.schedule, g.now())
	if errors.Is(err, store.ErrNotFound) {
		return n, nil
	}
	return got, err
}
