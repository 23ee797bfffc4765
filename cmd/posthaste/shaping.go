package main

import (
	"log/slog"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/shaping"
	"github.com/posthaste/posthaste/internal/telemetry"
)

// newShaper returns the traffic shaper of outbound delivery
// (POSTHASTE_SHAPING, POSTHASTE_SHAPING_WAIT), nil when shaping is off.
// With REDIS_URL its limits hold across every process sharing that Redis;
// without, within this process only, which `posthaste dev` (one process)
// and a single worker need: several delivering workers set REDIS_URL.
// metrics may be nil.
func newShaper(cfg config.Config, metrics *telemetry.Metrics, logger *slog.Logger) (*shaping.Shaper, error) {
	if cfg.Delivery.Shaping == nil {
		return nil, nil
	}
	scfg := shaping.Config{
		Rules:    cfg.Delivery.Shaping,
		RedisURL: cfg.Limits.RedisURL,
		MaxWait:  cfg.Delivery.ShapingWait,
		Logger:   logger.With("component", "shaping"),
	}
	if scfg.RedisURL == "" {
		// Right for one process (dev); several workers each apply the
		// whole limit.
		logger.Info("traffic shaping limits are kept in this process: set REDIS_URL to share them between workers")
	}
	if metrics != nil {
		scfg.Metrics = shaping.Metrics{Connections: metrics.MTAConnections, Messages: metrics.MTAMessages,
			Held: metrics.MTAShapingHeld, Backoffs: metrics.MTABackoffs}
	}
	return shaping.New(scfg)
}

// closeShaper closes sh, which may be nil.
func closeShaper(sh *shaping.Shaper) {
	if sh != nil {
		_ = sh.Close()
	}
}
