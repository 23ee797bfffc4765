// Package shaping limits outbound SMTP traffic per destination provider
// and source address, as large mailbox providers expect of senders.
//
// MX hosts are grouped into providers by name suffix (ProviderOf: Gmail,
// Outlook, Yahoo, and Default for every other host). For each provider
// (each host of Default on its own: it is a catch-all, not one receiver)
// and source address a Shaper bounds the connections open at once (idle
// pooled ones included), the messages per connection, and the messages
// per second and per hour (Limits, POSTHASTE_SHAPING). With Redis
// (REDIS_URL) the limits hold across every process that shares it:
// connections are leases in a sorted set that expire unless renewed (a
// crashed process frees its slots within a couple of minutes), rates are
// GCRA buckets, all updated by Lua scripts on Redis's clock. Without Redis
// they hold within the process, which is right for `posthaste dev` (one
// process) and for a single worker; deployments with several delivering
// workers set REDIS_URL. PostgreSQL is not used instead: every message
// and connection would cost a write to the database that acceptance and
// outcomes already load, and Redis is where the API's rate limits are
// shared already. When Redis stops answering, each process falls back to
// its own state and delivery goes on.
//
// Shaping is adaptive: a reply that asks to slow down (SlowDown: any 421,
// or a 4.7.x reply whose text speaks of rates, too many connections or
// messages, throttling or a busy server) pauses the provider for that source address, in every
// process, for Limits.Backoff, doubling on each further request up to
// Limits.BackoffMax; the pause ends by itself and each later success
// lowers the next one again.
//
// A caller that finds no room waits up to Config.MaxWait, then gets a
// *HeldError: package mta defers the recipients with it, and the
// delivery workflow's retry policy tries again later, so that a held
// delivery never keeps a worker's slot for long.
package shaping

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

const (
	// leaseTTL is how long a connection lease lives without renewal; the
	// Shaper renews its live leases every third of it.
	leaseTTL = 2 * time.Minute
	// pollInterval is how often a caller waiting for a connection slot
	// looks again.
	pollInterval = 50 * time.Millisecond
)

// Config configures a Shaper.
type Config struct {
	// Rules are the limits per provider; providers missing from it have
	// none. Use DefaultRules or ParseRules.
	Rules Rules
	// RedisURL, when set, shares the limits between processes
	// (REDIS_URL); empty keeps them in this process.
	RedisURL string
	// MaxWait is how long Open and Send wait for room before they give up
	// with a *HeldError (POSTHASTE_SHAPING_WAIT); 0 gives up at once.
	MaxWait time.Duration
	// Now is the clock of the limits; nil means Redis's clock with Redis,
	// else time.Now. Tests pass a settable clock with MaxWait 0: waits
	// run on real timers.
	Now func() time.Time
	// Metrics, when set, receives the counts; any field may be nil.
	Metrics Metrics
	// Logger receives back-off events; nil discards them.
	Logger *slog.Logger
}

// Metrics are the Prometheus vectors a Shaper updates, all labelled by
// provider and source (the source address, or "default").
type Metrics struct {
	// Connections is the connections this process holds open.
	Connections *prometheus.GaugeVec
	// Messages counts messages let through by Send.
	Messages *prometheus.CounterVec
	// Held counts deliveries held back, with a third label, reason:
	// connections, rate or backoff.
	Held *prometheus.CounterVec
	// Backoffs counts replies that asked to slow down.
	Backoffs *prometheus.CounterVec
}

// Shaper applies Rules. It is safe for concurrent use; Close stops it.
type Shaper struct {
	rules   Rules
	be      backend
	now     func() time.Time
	maxWait time.Duration
	metrics Metrics
	log     *slog.Logger
	closeFn func() error

	// levels caches the back-off levels above 0 last read per key, so
	// that a success relaxes only where there is something to relax.
	levels sync.Map

	mu     sync.Mutex
	leases map[*Lease]struct{}
	stop   chan struct{}
	done   chan struct{}
}

// New returns a Shaper for cfg.
func New(cfg Config) (*Shaper, error) {
	s := &Shaper{rules: cfg.Rules, now: cfg.Now, maxWait: cfg.MaxWait, metrics: cfg.Metrics, log: cfg.Logger,
		closeFn: func() error { return nil }, leases: map[*Lease]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.RedisURL != "" {
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("parsing REDIS_URL: %w", err)
		}
		rdb := redis.NewClient(opts)
		s.be = &redisBackend{rdb: rdb, clock: cfg.Now != nil, fallback: newLocal(), logger: s.log,
			timeout: 500 * time.Millisecond}
		s.closeFn = rdb.Close
	} else {
		s.be = newLocal()
	}
	if s.now == nil {
		s.now = time.Now
	}
	go s.renewLoop()
	return s, nil
}

// Close stops renewing leases and releases Redis. Leases still held
// expire by themselves.
func (s *Shaper) Close() error {
	close(s.stop)
	<-s.done
	return s.closeFn()
}

// dest is where limits are kept: a provider, or for Default each MX host
// on its own.
type dest struct {
	provider string // for Limits and metrics
	name     string // for keys and messages: the provider, or the host
}

func destOf(host string) dest {
	p := ProviderOf(host)
	if p == Default {
		return dest{p, Default + "/" + strings.ToLower(strings.TrimSuffix(host, "."))}
	}
	return dest{p, p}
}

// display names d in messages: the provider, or the host.
func (d dest) display() string { return strings.TrimPrefix(d.name, Default+"/") }

func key(kind string, d dest, source string) string { return kind + ":" + d.name + ":" + source }

// HeldError says that a delivery was held back. Destination is the
// provider, or for Default the MX host. Reason is "connections", "rate"
// or "backoff"; RetryAfter, when not zero, is when room is expected.
type HeldError struct {
	Destination, Source string
	Reason              string
	RetryAfter          time.Duration
	detail              string
}

func (e *HeldError) Error() string {
	msg := fmt.Sprintf("traffic shaping holds mail to %s from %s: %s", e.Destination, e.Source, e.detail)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf("; room expected in %v", e.RetryAfter.Round(time.Millisecond))
	}
	return msg
}

func (s *Shaper) held(d dest, source, reason string, retry time.Duration, detail string) *HeldError {
	if s.metrics.Held != nil {
		s.metrics.Held.WithLabelValues(d.provider, source, reason).Inc()
	}
	return &HeldError{Destination: d.display(), Source: source, Reason: reason, RetryAfter: retry, detail: detail}
}

// sleep waits d unless that would end past deadline or ctx ends first; it
// reports whether it waited.
func sleep(ctx context.Context, deadline time.Time, d time.Duration) bool {
	if d <= 0 {
		d = time.Millisecond
	}
	if time.Now().Add(d).After(deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pausedFor returns how long d is paused for source, 0 when it is not.
func (s *Shaper) pausedFor(ctx context.Context, d dest, source string) time.Duration {
	now := s.now()
	k := key("backoff", d, source)
	until, level, err := s.be.paused(ctx, k, now)
	if err != nil {
		s.log.Warn("reading a traffic shaping pause", "destination", d.name, "source_ip", source, "err", err)
		return 0
	}
	if level > 0 {
		s.levels.Store(k, level)
	} else {
		s.levels.Delete(k)
	}
	if until.IsZero() {
		return 0
	}
	return until.Sub(now)
}

// Open waits, up to Config.MaxWait, until a connection from source to
// the MX host may open: no pause runs and a connection slot is free. The
// caller releases the returned Lease when the connection closes. The
// error is a *HeldError, or the context's. ready, when not nil, is asked
// each time Open finds every slot taken: when it reports true (the caller
// found an idle connection of its own, which holds a slot already) Open
// returns a nil Lease and a nil error at once.
func (s *Shaper) Open(ctx context.Context, host, source string, ready func() bool) (*Lease, error) {
	d := destOf(host)
	lim := s.rules[d.provider]
	deadline := time.Now().Add(s.maxWait)
	k := key("conns", d, source)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if p := s.pausedFor(ctx, d, source); p > 0 {
			if !sleep(ctx, deadline, p) {
				return nil, s.held(d, source, "backoff", p, d.display()+" asked to slow down")
			}
			continue
		}
		l := &Lease{s: s, key: k, dest: d, source: source, perConn: lim.PerConnection}
		if lim.Connections <= 0 {
			s.track(l)
			return l, nil
		}
		l.id = leaseID()
		now := s.now()
		ok, err := s.be.acquire(ctx, k, l.id, lim.Connections, now, now.Add(leaseTTL))
		if err != nil {
			s.log.Warn("taking a connection slot: not limiting", "destination", d.name, "source_ip", source, "err", err)
			ok = true
		}
		if ok {
			s.track(l)
			return l, nil
		}
		if ready != nil && ready() {
			return nil, nil
		}
		if !sleep(ctx, deadline, pollInterval) {
			return nil, s.held(d, source, "connections", 0,
				fmt.Sprintf("all %d connections allowed are open", lim.Connections))
		}
	}
}

func leaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Send waits, up to Config.MaxWait, until one more message may go from
// source to the MX host: no pause runs and the rate buckets have room; then
// it takes that room. The error is a *HeldError, or the context's.
func (s *Shaper) Send(ctx context.Context, host, source string) error {
	d := destOf(host)
	lim := s.rules[d.provider]
	var bs []bucket
	if lim.PerSecond > 0 {
		bs = append(bs, bucket{key("sec", d, source), lim.PerSecond, time.Second})
	}
	if lim.PerHour > 0 {
		bs = append(bs, bucket{key("hour", d, source), lim.PerHour, time.Hour})
	}
	deadline := time.Now().Add(s.maxWait)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p := s.pausedFor(ctx, d, source); p > 0 {
			if !sleep(ctx, deadline, p) {
				return s.held(d, source, "backoff", p, d.display()+" asked to slow down")
			}
			continue
		}
		var wait time.Duration
		if len(bs) > 0 {
			var err error
			if wait, err = s.be.take(ctx, bs, s.now()); err != nil {
				s.log.Warn("taking a message from the rate limits: not limiting", "destination", d.name, "source_ip", source, "err", err)
				wait = 0
			}
		}
		if wait == 0 {
			if s.metrics.Messages != nil {
				s.metrics.Messages.WithLabelValues(d.provider, source).Inc()
			}
			return nil
		}
		if !sleep(ctx, deadline, wait) {
			return s.held(d, source, "rate", wait, "at its limit of "+rateText(lim))
		}
	}
}

// rateText says lim's message rates in words.
func rateText(lim Limits) string {
	var parts []string
	if lim.PerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%d messages a second", lim.PerSecond))
	}
	if lim.PerHour > 0 {
		parts = append(parts, fmt.Sprintf("%d messages an hour", lim.PerHour))
	}
	return strings.Join(parts, " and ")
}

// Observe learns from an MX host's reply to mail from source: a reply
// that asks to slow down (SlowDown) pauses the host's provider (for
// Default, the host) for source, a success (2xx) lowers the next pause.
func (s *Shaper) Observe(ctx context.Context, host, source string, code int, enhanced, text string) {
	d := destOf(host)
	k := key("backoff", d, source)
	switch {
	case code/100 == 2:
		// Only when the last look (before the message) found a level:
		// most successes then cost no round trip.
		if lv, ok := s.levels.Load(k); !ok || lv.(int) <= 0 {
			return
		}
		if err := s.be.relax(ctx, k, s.now()); err != nil {
			s.log.Warn("relaxing a traffic shaping pause", "destination", d.name, "source_ip", source, "err", err)
		}
		if lv, ok := s.levels.Load(k); ok && lv.(int) > 1 {
			s.levels.Store(k, lv.(int)-1)
		} else {
			s.levels.Delete(k)
		}
	case SlowDown(code, enhanced, text):
		lim := s.rules[d.provider]
		initial, longest := lim.Backoff, lim.BackoffMax
		if initial <= 0 {
			initial = time.Minute
		}
		longest = max(longest, initial)
		now := s.now()
		until, err := s.be.backoff(ctx, k, now, initial, longest)
		if err != nil {
			s.log.Warn("starting a traffic shaping pause", "destination", d.name, "source_ip", source, "err", err)
			return
		}
		if s.metrics.Backoffs != nil {
			s.metrics.Backoffs.WithLabelValues(d.provider, source).Inc()
		}
		s.log.Warn("asked to slow down: pausing", "destination", d.name, "remote_server", host, "source_ip", source,
			"smtp_code", code, "reply", strings.TrimSpace(enhanced+" "+text), "pause", until.Sub(now).Round(time.Second))
	}
}

// slowText matches reply texts that speak of sending too fast or too
// much; greyText those of greylisting, which defers one sender and
// recipient pair, not the source.
var (
	slowText = regexp.MustCompile(`(?i)\brate\b|rate[- ]?limit|too many|throttl|unexpected volume|server busy|temporarily deferred`)
	greyText = regexp.MustCompile(`(?i)gr[ae]y[- ]?list`)
)

// SlowDown reports whether a reply asks the sender to slow down: any 421
// (the server closes the channel, RFC 5321 §3.8, which busy providers
// send when a source connects or sends too much: Gmail's "421 4.7.0 Try
// again later, closing connection", Yahoo's "421 4.7.0 [TSS04]"), or a
// 4xx with an RFC 3463 X.7.x code (security or policy status) whose text
// speaks of rates, too many connections or messages, throttling or a busy
// server (Microsoft's "451 4.7.500 Server busy"). "Try again later" alone
// does not count outside a 421: greylisting ("451 4.7.1 Greylisted, try
// again later") and other passing refusals say it too, and pausing a
// whole provider for them would delay all of its mail.
func SlowDown(code int, enhanced, text string) bool {
	if code == 421 {
		return true
	}
	return code/100 == 4 && strings.HasPrefix(enhanced, "4.7.") && slowText.MatchString(text) && !greyText.MatchString(text)
}

// Usage is the shared state of one destination and source.
type Usage struct {
	// Connections is the connections open, in every process sharing the
	// limits.
	Connections int
	// PausedFor is how long the provider stays paused; 0 when it is not.
	PausedFor time.Duration
}

// Usage reads the state of the MX host's provider (for Default, of the
// host) and source, for benchmarks and operators.
func (s *Shaper) Usage(ctx context.Context, host, source string) (Usage, error) {
	d := destOf(host)
	n, err := s.be.live(ctx, key("conns", d, source), s.now())
	if err != nil {
		return Usage{}, fmt.Errorf("counting connections: %w", err)
	}
	return Usage{Connections: n, PausedFor: s.pausedFor(ctx, d, source)}, nil
}

// Lease is one open connection's slot. Its methods are safe on a nil
// Lease (no shaping), which never runs out.
type Lease struct {
	s        *Shaper
	key, id  string // id empty: no connection limit, nothing to release
	dest     dest
	source   string
	perConn  int
	mu       sync.Mutex
	sent     int
	released bool
}

func (s *Shaper) track(l *Lease) {
	s.mu.Lock()
	s.leases[l] = struct{}{}
	s.mu.Unlock()
	if s.metrics.Connections != nil {
		s.metrics.Connections.WithLabelValues(l.dest.provider, l.source).Inc()
	}
}

// Sent counts one more message over the connection.
func (l *Lease) Sent() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
}

// Spent reports whether the connection carried the messages its
// provider allows per connection and must close.
func (l *Lease) Spent() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.perConn > 0 && l.sent >= l.perConn
}

// Release frees the slot; later calls do nothing.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	done := l.released
	l.released = true
	l.mu.Unlock()
	if done {
		return
	}
	s := l.s
	s.mu.Lock()
	delete(s.leases, l)
	s.mu.Unlock()
	if s.metrics.Connections != nil {
		s.metrics.Connections.WithLabelValues(l.dest.provider, l.source).Dec()
	}
	if l.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.be.release(ctx, l.key, l.id); err != nil {
		s.log.Warn("releasing a connection slot: it expires by itself", "destination", l.dest.name, "source_ip", l.source, "err", err)
	}
}

// renewLoop renews the live leases every third of their time to live.
func (s *Shaper) renewLoop() {
	defer close(s.done)
	t := time.NewTicker(leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.renewAll()
		}
	}
}

// renewAll renews the live leases of this process.
func (s *Shaper) renewAll() {
	s.mu.Lock()
	live := make([]*Lease, 0, len(s.leases))
	for l := range s.leases {
		if l.id != "" {
			live = append(live, l)
		}
	}
	s.mu.Unlock()
	for _, l := range live {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		now := s.now()
		err := s.be.renew(ctx, l.key, l.id, now, now.Add(leaseTTL))
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("renewing a connection slot", "destination", l.dest.name, "source_ip", l.source, "err", err)
		}
	}
}
