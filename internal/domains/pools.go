package domains

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// PoolAddresses returns the addresses of the IP pools the team's mail can
// leave from, with where their warm-up stands on day (UTC): the default
// pool, shared by every team, and the pools assigned to the team or its
// domains; another team's dedicated pool is never included. Addresses come
// grouped by pool, in the store's order.
func (s *Service) PoolAddresses(ctx context.Context, teamID uuid.UUID, defaultPool string, day time.Time) ([]store.WarmupAddress, error) {
	addrs, err := s.store.Domains.WarmupAddresses(ctx, day)
	if err != nil {
		return nil, err
	}
	own, err := s.store.Domains.TeamIPPools(ctx, teamID)
	if err != nil {
		return nil, err
	}
	shown := map[string]bool{defaultPool: true}
	for _, name := range own {
		shown[name] = true
	}
	out := addrs[:0]
	for _, a := range addrs {
		if shown[a.Pool] {
			out = append(out, a)
		}
	}
	return out, nil
}
