package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyPrefix namespaces Posthaste's buckets in a shared Redis.
const keyPrefix = "posthaste:"

// gcra takes one request from a bucket with GCRA, the generic cell rate
// algorithm: the key holds the bucket's theoretical arrival time (TAT), in
// microseconds since the Unix epoch, and a request is allowed when the TAT
// it would leave is no more than one period (the burst) ahead of now.
// Arithmetic happens on the distance to now, small enough for a Lua
// number to keep fractions of a microsecond; the stored TAT is rounded
// down, which errs by less than a microsecond per request in the
// requester's favour.
//
// KEYS[1] is the bucket. ARGV[1] is the rate in requests per period (also
// the burst). ARGV[2] is now in microseconds since the epoch, or empty to
// read Redis's clock, which every process then shares. ARGV[3] is the
// period in microseconds (one second when absent).
//
// It returns {allowed (0 or 1), remaining, retry after µs, reset µs}.
var gcra = redis.NewScript(`
redis.replicate_commands()
local rate = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local period = tonumber(ARGV[3]) or 1000000
local interval = period / rate
local ahead = 0
local tat = tonumber(redis.call("GET", KEYS[1]))
if tat and tat > now then
  ahead = tat - now
end
local after = ahead + interval
local room = period - after
if room < 0 then
  return {0, 0, math.ceil(-room), math.ceil(ahead)}
end
local stored = math.floor(now + after)
redis.call("SET", KEYS[1], string.format("%.0f", stored), "PX", math.max(1, math.ceil((stored - now) / 1000)))
return {1, math.floor(room / interval), 0, math.ceil(after)}
`)

// RedisConfig configures a Redis limiter.
type RedisConfig struct {
	// URL locates the Redis (redis://host:port/db; REDIS_URL).
	URL string
	// Now, when set, is the clock of the buckets instead of Redis's own
	// (which keeps the processes sharing a bucket on one clock). Tests
	// pass a settable clock instead of sleeping; it also clocks the
	// per-process fallback.
	Now func() time.Time
}

// Redis is a Limiter shared by every process using the same Redis. When
// Redis does not answer, it falls back to a per-process bucket (so the API
// keeps answering, each process then enforcing the limit on its own) and
// logs a warning at most once a minute.
type Redis struct {
	rdb      *redis.Client
	now      func() time.Time // nil: Redis's clock
	fallback *Local
	logger   *slog.Logger
	timeout  time.Duration
	lastWarn atomic.Int64 // unix nanoseconds of the last fallback warning
}

// NewRedis connects to the Redis at cfg.URL; logger may be nil. The
// returned function closes the connection.
func NewRedis(cfg RedisConfig, logger *slog.Logger) (*Redis, func() error, error) {
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opts)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Redis{rdb: rdb, now: cfg.Now, fallback: NewLocal(LocalConfig{Now: cfg.Now}), logger: logger,
		timeout: 500 * time.Millisecond}, rdb.Close, nil
}

// Allow takes one request from key's shared bucket of limit requests per second.
func (r *Redis) Allow(ctx context.Context, key string, limit int) (Result, error) {
	return r.AllowPer(ctx, key, limit, time.Second)
}

// AllowPer takes one request from key's shared bucket of limit requests
// per period, the burst being limit too.
func (r *Redis) AllowPer(ctx context.Context, key string, limit int, period time.Duration) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	at := "" // Redis's clock
	if r.now != nil {
		at = strconv.FormatInt(r.now().UnixMicro(), 10)
	}
	v, err := gcra.Run(ctx, r.rdb, []string{keyPrefix + key}, limit, at, period.Microseconds()).Int64Slice()
	if err == nil && len(v) != 4 {
		err = fmt.Errorf("rate limit script returned %d values, want 4", len(v))
	}
	if err != nil {
		t := time.Now().UnixNano()
		if last := r.lastWarn.Load(); t-last > int64(time.Minute) && r.lastWarn.CompareAndSwap(last, t) {
			r.logger.Warn("redis rate limiter unavailable, limiting per process", "err", err)
		}
		return r.fallback.AllowPer(ctx, key, limit, period)
	}
	return Result{Allowed: v[0] == 1, Limit: limit, Remaining: int(v[1]),
		RetryAfter: time.Duration(v[2]) * time.Microsecond, Reset: time.Duration(v[3]) * time.Microsecond}, nil
}
