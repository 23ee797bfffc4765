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

// Script is GCRA (Rate) in Redis, for one request against one or more
// buckets at once: each key holds its bucket's theoretical arrival time
// (TAT) in microseconds since the Unix epoch, and the request is allowed
// when every bucket's TAT, advanced by one interval, stays within one
// period of now; then all of them advance, or none does. Arithmetic
// happens on the distance to now, small enough for a Lua number to keep
// fractions of a microsecond; the stored TAT is rounded down, which errs
// by less than a microsecond per request in the requester's favour.
//
// KEYS are the buckets. ARGV[1] is now in microseconds since the epoch,
// or empty to read Redis's clock, which every process then shares;
// ARGV[2i] and ARGV[2i+1] are the limit (also the burst) and the period
// in microseconds of KEYS[i].
//
// It returns {wait µs (0: allowed), remaining, reset µs}, the last two of
// the first bucket: the requests it would still allow and the time until
// it is full again. The API's Redis limiter and the per-destination
// shaping both run it.
var Script = redis.NewScript(`
redis.replicate_commands()
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local wait = 0
local ahead = {}
local after = {}
for i = 1, #KEYS do
  local limit = tonumber(ARGV[2 * i])
  local period = tonumber(ARGV[2 * i + 1])
  ahead[i] = 0
  local tat = tonumber(redis.call("GET", KEYS[i]))
  if tat and tat > now then
    ahead[i] = tat - now
  end
  after[i] = ahead[i] + period / limit
  if after[i] > period then
    wait = math.max(wait, after[i] - period)
  end
end
if wait > 0 then
  return {math.ceil(wait), 0, math.ceil(ahead[1])}
end
for i = 1, #KEYS do
  local stored = math.floor(now + after[i])
  redis.call("SET", KEYS[i], string.format("%.0f", stored), "PX", math.max(1, math.ceil((stored - now) / 1000)))
end
local period = tonumber(ARGV[3])
return {0, math.floor((period - after[1]) / (period / tonumber(ARGV[2]))), math.ceil(after[1])}
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
	// Timeout bounds each call to Redis before the per-process fallback
	// answers instead; 0 means 500ms. Tests of the shared bucket raise it
	// so a busy machine does not turn them into tests of the fallback.
	Timeout time.Duration
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
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	return &Redis{rdb: rdb, now: cfg.Now, fallback: NewLocal(LocalConfig{Now: cfg.Now}), logger: logger,
		timeout: timeout}, rdb.Close, nil
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
	v, err := Script.Run(ctx, r.rdb, []string{keyPrefix + key}, at, limit, period.Microseconds()).Int64Slice()
	if err == nil && len(v) != 3 {
		err = fmt.Errorf("rate limit script returned %d values, want 3", len(v))
	}
	if err != nil {
		t := time.Now().UnixNano()
		if last := r.lastWarn.Load(); t-last > int64(time.Minute) && r.lastWarn.CompareAndSwap(last, t) {
			r.logger.Warn("redis rate limiter unavailable, limiting per process", "err", err)
		}
		return r.fallback.AllowPer(ctx, key, limit, period)
	}
	return Result{Allowed: v[0] == 0, Limit: limit, Remaining: int(v[1]),
		RetryAfter: time.Duration(v[0]) * time.Microsecond, Reset: time.Duration(v[2]) * time.Microsecond}, nil
}
