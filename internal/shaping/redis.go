package shaping

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/posthaste/posthaste/internal/ratelimit"
)

// keyPrefix namespaces the shaping state in a shared Redis.
const keyPrefix = "posthaste:shaping:"

// clockLua sets now, in microseconds since the epoch, from ARGV[1], or
// from Redis's clock when ARGV[1] is empty: every process then shares one
// clock.
const clockLua = `
redis.replicate_commands()
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
`

// acquireLua: KEYS[1] is a sorted set of lease ids scored by expiry (µs).
// ARGV[2] is the id, ARGV[3] the limit, ARGV[4] the lease's time to live
// in µs. Returns 1 when the lease was added.
var acquireLua = redis.NewScript(clockLua + `
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
local ttl = tonumber(ARGV[4])
redis.call("ZADD", KEYS[1], now + ttl, ARGV[2])
redis.call("PEXPIRE", KEYS[1], math.ceil(ttl / 1000))
return 1
`)

// renewLua moves the expiry of lease ARGV[2] of KEYS[1], if it is still
// there, to now + ARGV[3] µs.
var renewLua = redis.NewScript(clockLua + `
local ttl = tonumber(ARGV[3])
if redis.call("ZADD", KEYS[1], "XX", "CH", now + ttl, ARGV[2]) == 1 then
  local left = redis.call("PTTL", KEYS[1])
  if left < ttl / 1000 then
    redis.call("PEXPIRE", KEYS[1], math.ceil(ttl / 1000))
  end
end
return 1
`)

// liveLua counts the live leases of KEYS[1].
var liveLua = redis.NewScript(clockLua + `
return redis.call("ZCOUNT", KEYS[1], "(" .. now, "+inf")
`)

// backoffLua: KEYS[1] is a hash of level and until (µs). ARGV[2] and
// ARGV[3] are the initial and the longest pause in µs. Returns until.
var backoffLua = redis.NewScript(clockLua + `
local level = tonumber(redis.call("HGET", KEYS[1], "level")) or 0
local untilv = tonumber(redis.call("HGET", KEYS[1], "until")) or 0
if untilv > now then
  return string.format("%.0f", untilv)
end
local initial = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
level = level + 1
local d = initial
for i = 2, level do
  if d >= max then break end
  d = d * 2
end
d = math.min(d, max)
untilv = now + d
redis.call("HSET", KEYS[1], "level", level, "until", string.format("%.0f", untilv))
redis.call("PEXPIRE", KEYS[1], math.ceil((d + max) / 1000))
return string.format("%.0f", untilv)
`)

// relaxLua lowers the level of KEYS[1] by one once its pause is over.
var relaxLua = redis.NewScript(clockLua + `
local level = tonumber(redis.call("HGET", KEYS[1], "level"))
if not level then
  return 0
end
local untilv = tonumber(redis.call("HGET", KEYS[1], "until")) or 0
if untilv > now then
  return level
end
if level <= 1 then
  redis.call("DEL", KEYS[1])
  return 0
end
redis.call("HINCRBY", KEYS[1], "level", -1)
return level - 1
`)

// pausedLua returns the end of the pause of KEYS[1] in µs (0 without
// one) and its level.
var pausedLua = redis.NewScript(clockLua + `
local level = tonumber(redis.call("HGET", KEYS[1], "level")) or 0
local untilv = tonumber(redis.call("HGET", KEYS[1], "until")) or 0
if untilv > now then
  return {string.format("%.0f", untilv), level}
end
return {"0", level}
`)

// redisBackend keeps the state in Redis, shared by every process using
// it. When Redis does not answer, it falls back to a per-process state
// (delivery goes on, each process then enforcing the limits on its own)
// and logs a warning at most once a minute.
type redisBackend struct {
	rdb      *redis.Client
	clock    bool // pass the Shaper's clock instead of Redis's
	fallback *local
	logger   *slog.Logger
	timeout  time.Duration
	lastWarn atomic.Int64
}

func (r *redisBackend) run(ctx context.Context, s *redis.Script, keys []string, now time.Time, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	at := ""
	if r.clock {
		at = strconv.FormatInt(now.UnixMicro(), 10)
	}
	prefixed := make([]string, len(keys))
	for i, k := range keys {
		prefixed[i] = keyPrefix + k
	}
	v, err := s.Run(ctx, r.rdb, prefixed, append([]any{at}, args...)...).Result()
	if err != nil {
		t := time.Now().UnixNano()
		if last := r.lastWarn.Load(); t-last > int64(time.Minute) && r.lastWarn.CompareAndSwap(last, t) {
			r.logger.Warn("redis unavailable: traffic shaping limits per process", "err", err)
		}
	}
	return v, err
}

func micros(d time.Duration) int64 { return d.Microseconds() }

func (r *redisBackend) acquire(ctx context.Context, key, id string, limit int, now, expires time.Time) (bool, error) {
	v, err := r.run(ctx, acquireLua, []string{key}, now, id, limit, micros(expires.Sub(now)))
	if err != nil {
		return r.fallback.acquire(ctx, key, id, limit, now, expires)
	}
	n, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("acquire script returned %T", v)
	}
	return n == 1, nil
}

func (r *redisBackend) renew(ctx context.Context, key, id string, now, expires time.Time) error {
	if _, err := r.run(ctx, renewLua, []string{key}, now, id, micros(expires.Sub(now))); err != nil {
		return r.fallback.renew(ctx, key, id, now, expires)
	}
	return nil
}

func (r *redisBackend) release(ctx context.Context, key, id string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_ = r.fallback.release(ctx, key, id)
	if err := r.rdb.ZRem(ctx, keyPrefix+key, id).Err(); err != nil {
		// The lease expires by itself.
		return fmt.Errorf("releasing a connection lease: %w", err)
	}
	return nil
}

func (r *redisBackend) live(ctx context.Context, key string, now time.Time) (int, error) {
	v, err := r.run(ctx, liveLua, []string{key}, now)
	if err != nil {
		return r.fallback.live(ctx, key, now)
	}
	n, _ := v.(int64)
	return int(n), nil
}

func (r *redisBackend) take(ctx context.Context, bs []bucket, now time.Time) (time.Duration, error) {
	keys := make([]string, len(bs))
	args := make([]any, 0, 2*len(bs))
	for i, b := range bs {
		keys[i] = b.key
		args = append(args, b.limit, micros(b.period))
	}
	v, err := r.run(ctx, ratelimit.Script, keys, now, args...)
	if err != nil {
		return r.fallback.take(ctx, bs, now)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return 0, fmt.Errorf("rate limit script returned %v", v)
	}
	n, _ := a[0].(int64)
	return time.Duration(n) * time.Microsecond, nil
}

func (r *redisBackend) backoff(ctx context.Context, key string, now time.Time, initial, max time.Duration) (time.Time, error) {
	v, err := r.run(ctx, backoffLua, []string{key}, now, micros(initial), micros(max))
	if err != nil {
		return r.fallback.backoff(ctx, key, now, initial, max)
	}
	return microTime(v)
}

func (r *redisBackend) relax(ctx context.Context, key string, now time.Time) error {
	if _, err := r.run(ctx, relaxLua, []string{key}, now); err != nil {
		return r.fallback.relax(ctx, key, now)
	}
	return nil
}

func (r *redisBackend) paused(ctx context.Context, key string, now time.Time) (time.Time, int, error) {
	v, err := r.run(ctx, pausedLua, []string{key}, now)
	if err != nil {
		return r.fallback.paused(ctx, key, now)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return time.Time{}, 0, fmt.Errorf("pause script returned %v", v)
	}
	until, err := microTime(a[0])
	level, _ := a[1].(int64)
	return until, int(level), err
}

// microTime reads a script's time in µs since the epoch; "0" is the zero
// time.
func microTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("script returned %T, want a string", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("script returned %q: %w", s, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.UnixMicro(n), nil
}
