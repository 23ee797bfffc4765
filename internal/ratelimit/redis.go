package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// keyPrefix namespaces Posthaste's buckets in a shared Redis.
const keyPrefix = "posthaste:"

// Redis is a Limiter shared by every process using the same Redis. When
// Redis does not answer, it falls back to a per-process bucket (so the API
// keeps answering, each process then enforcing the limit on its own) and
// logs a warning at most once a minute.
type Redis struct {
	limiter  *redis_rate.Limiter
	fallback *Local
	logger   *slog.Logger
	timeout  time.Duration
	lastWarn atomic.Int64 // unix nanoseconds of the last fallback warning
}

// NewRedis connects to the Redis at url (redis://host:port/db). Close
// releases the connection.
func NewRedis(url string, logger *slog.Logger) (*Redis, func() error, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opts)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Redis{limiter: redis_rate.NewLimiter(rdb), fallback: NewLocal(), logger: logger,
		timeout: 500 * time.Millisecond}, rdb.Close, nil
}

// Allow takes one request from key's shared bucket of limit requests per second.
func (r *Redis) Allow(ctx context.Context, key string, limit int) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := r.limiter.Allow(ctx, keyPrefix+key, redis_rate.PerSecond(limit))
	if err != nil {
		now := time.Now().UnixNano()
		if last := r.lastWarn.Load(); now-last > int64(time.Minute) && r.lastWarn.CompareAndSwap(last, now) {
			r.logger.Warn("redis rate limiter unavailable, limiting per process", "err", err)
		}
		return r.fallback.Allow(ctx, key, limit)
	}
	out := Result{Allowed: res.Allowed > 0, Limit: limit, Remaining: res.Remaining, Reset: res.ResetAfter}
	if !out.Allowed {
		out.RetryAfter = res.RetryAfter
	}
	return out, nil
}
