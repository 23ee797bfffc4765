// Package outbox starts the workflows of accepted work. The accepting
// transaction writes an outbox entry next to the email row; a Dispatcher
// drains the entries and starts one workflow each. Workflow IDs are
// deterministic and duplicate starts are rejected by Temporal, so an entry
// started twice (a crash between the start and the delete) starts one
// workflow. Entries left behind by a crash are found by the next drain.
//
// Each entry backs off on its own: a failed start makes the entry due
// again later and later (RetryInitial doubling up to RetryMax), so entries
// that cannot start never hold back the others. An entry that can never
// start (ErrUnstartable, or its email is gone) or that kept failing for
// GiveUpAfter is ended: its emails become `failed` and the entry is
// deleted.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
)

// ErrUnstartable marks a start error that retrying cannot fix: Temporal
// refused the workflow's ID or input, or the entry's kind is unknown. A
// Starter wraps it into the error it returns.
var ErrUnstartable = errors.New("the workflow can never start")

// Starter starts the workflow of an outbox entry. Starting a workflow that
// was already started must return nil; an error that retrying cannot fix
// wraps ErrUnstartable.
type Starter interface {
	Start(ctx context.Context, item store.OutboxItem) error
}

// Drainer is the part of the store the dispatcher uses.
type Drainer interface {
	DrainOutbox(ctx context.Context, limit int, start func(context.Context, []store.OutboxItem) []store.OutboxResult) (int, error)
	FailOutboxWork(ctx context.Context, item store.OutboxItem, reason string) (int, error)
}

// Config tunes a Dispatcher.
type Config struct {
	Batch       int           // entries claimed per drain; 0 → 128
	Concurrency int           // workflow starts in flight; 0 → 32
	Poll        time.Duration // drain at least this often; 0 → 1 s
	// RetryInitial is the wait after an entry's first failed start; each
	// further failure doubles it, up to RetryMax. 0 → 1 s and 5 min.
	RetryInitial time.Duration
	RetryMax     time.Duration
	// An entry whose start failed GiveUpAttempts times and that is older
	// than GiveUpAfter is ended (POSTHASTE_OUTBOX_GIVE_UP). 0 → 10 and 24 h.
	GiveUpAttempts int
	GiveUpAfter    time.Duration
	// Now is the clock entries are aged with; nil → time.Now.
	Now func() time.Time
	// Listener wakes the dispatcher when entries were committed by any
	// process; nil: it drains only every Poll and when Notify is called.
	Listener Listener
}

// Listener calls woke for every commit that inserted outbox entries, on
// a connection of its own, after calling listening once it listens; it
// returns when ctx ends (nil) or its connection fails. store.Store's
// ListenOutbox is one.
type Listener interface {
	ListenOutbox(ctx context.Context, listening, woke func()) error
}

// Waits between attempts to listen again after the connection failed;
// the dispatcher polls meanwhile.
const (
	relistenInitial = 100 * time.Millisecond
	relistenMax     = 10 * time.Second
)

// Reasons an entry ends, as Ended reports them.
const (
	EndUnstartable = "unstartable" // the start failed with ErrUnstartable
	EndGaveUp      = "gave_up"     // the start kept failing for GiveUpAfter
	EndMissing     = "missing"     // the entry's email or batch no longer exists
)

// The reasons ended emails fail with, as the API and webhooks show them.
const (
	reasonUnstartable = "Sending this email could not be started."
	reasonGaveUp      = "Sending this email could not be started in time."
)

// maxLastError bounds the error text kept with an entry.
const maxLastError = 1000

// Dispatcher drains the outbox. Construct with New, run with Run.
type Dispatcher struct {
	cfg     Config
	store   Drainer
	starter Starter
	logger  *slog.Logger
	poke    chan struct{}
	// Started is called with the time each started entry waited, for metrics. May be nil.
	Started func(wait time.Duration)
	// Ended is called with the kind and the End* reason of each entry
	// ended without a start, for metrics. May be nil.
	Ended func(kind, reason string)
}

// New returns a Dispatcher.
func New(cfg Config, st Drainer, starter Starter, logger *slog.Logger) *Dispatcher {
	if cfg.Batch <= 0 {
		cfg.Batch = 128
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.RetryInitial <= 0 {
		cfg.RetryInitial = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 5 * time.Minute
	}
	if cfg.GiveUpAttempts <= 0 {
		cfg.GiveUpAttempts = 10
	}
	if cfg.GiveUpAfter <= 0 {
		cfg.GiveUpAfter = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, store: st, starter: starter, logger: logger.With("component", "outbox"),
		poke: make(chan struct{}, 1)}
}

// Notify tells the dispatcher that new entries were committed. It never blocks.
func (d *Dispatcher) Notify() {
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// Run drains until ctx ends. With a Listener it also listens, and listens
// again whenever the connection fails.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.cfg.Listener != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); d.listen(ctx) }()
	}
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		for {
			n, err := d.Drain(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				d.logger.Warn("draining outbox", "err", err)
				break
			}
			if n < d.cfg.Batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.poke:
		case <-t.C:
		}
	}
}

// listen keeps the Listener listening until ctx ends. Each time it starts
// listening the dispatcher drains, for the entries committed while it was
// not.
func (d *Dispatcher) listen(ctx context.Context) {
	wait, lost := relistenInitial, false
	for {
		err := d.cfg.Listener.ListenOutbox(ctx, func() {
			wait = relistenInitial
			if lost {
				d.logger.Info("listening for outbox entries again")
				lost = false
			}
			d.Notify()
		}, d.Notify)
		if ctx.Err() != nil {
			return
		}
		lost = true
		d.logger.Warn("listening for outbox entries failed; polling until it listens again",
			"err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, relistenMax)
	}
}

// Drain claims up to Batch due entries once and starts them; it returns
// how many it claimed. Run calls it; tests may call it directly.
func (d *Dispatcher) Drain(ctx context.Context) (int, error) {
	return d.store.DrainOutbox(ctx, d.cfg.Batch, d.startAll)
}

// startAll starts items concurrently and returns what became of each.
// Entries of the same kind and ref (webhook wake-ups, many per endpoint)
// are started once: every one of them was committed before the claim, so
// one start serves them all.
func (d *Dispatcher) startAll(ctx context.Context, items []store.OutboxItem) []store.OutboxResult {
	var (
		mu  sync.Mutex
		res = make([]store.OutboxResult, 0, len(items))
		wg  sync.WaitGroup
		sem = make(chan struct{}, d.cfg.Concurrency)
	)
	type key struct {
		kind string
		ref  [16]byte
	}
	dups := map[key][]int64{}
	unique := items[:0:0]
	for _, it := range items {
		k := key{it.Kind, it.Ref}
		if _, ok := dups[k]; !ok {
			unique = append(unique, it)
		}
		dups[k] = append(dups[k], it.ID)
	}
	for _, it := range unique {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, ok := d.start(ctx, it)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range dups[key{it.Kind, it.Ref}] {
				r.ID = id
				res = append(res, r)
			}
		}()
	}
	wg.Wait()
	return res
}

// start starts one entry and says what became of it; ok is false when ctx
// ended first (the entry stays as it was).
func (d *Dispatcher) start(ctx context.Context, it store.OutboxItem) (r store.OutboxResult, ok bool) {
	log := d.logger.With("kind", it.Kind, "ref", it.Ref, "team_id", it.TeamID, "attempt", it.Attempts+1)
	if it.Missing {
		log.Warn("dropping outbox entry: its emails no longer exist")
		d.ended(it, EndMissing)
		return store.OutboxResult{Done: true}, true
	}
	began := d.cfg.Now()
	err := d.starter.Start(ctx, it)
	if err == nil {
		now := d.cfg.Now()
		if d.Started != nil {
			d.Started(now.Sub(it.CreatedAt))
		}
		log.Debug("workflow started", "waited_ms", telemetry.Milliseconds(began.Sub(it.CreatedAt)),
			"took_ms", telemetry.Milliseconds(now.Sub(began)))
		return store.OutboxResult{Done: true}, true
	}
	if ctx.Err() != nil {
		return store.OutboxResult{}, false
	}
	switch {
	case errors.Is(err, ErrUnstartable):
		return d.end(ctx, log, it, EndUnstartable, reasonUnstartable, err), true
	case it.Attempts+1 >= d.cfg.GiveUpAttempts && d.cfg.Now().Sub(it.CreatedAt) >= d.cfg.GiveUpAfter:
		return d.end(ctx, log, it, EndGaveUp, reasonGaveUp, err), true
	}
	wait := d.backoff(it.Attempts)
	log.Warn("starting workflow failed; retrying", "retry_in", wait, "err", err)
	return d.retry(wait, err), true
}

// end fails the entry's emails and deletes it; if the emails cannot be
// failed now, the entry is tried again later.
func (d *Dispatcher) end(ctx context.Context, log *slog.Logger, it store.OutboxItem, why, reason string, cause error) store.OutboxResult {
	failed := 0
	if it.Kind != store.OutboxWebhook { // a webhook wake-up has no emails to fail
		n, err := d.store.FailOutboxWork(ctx, it, reason)
		if err != nil {
			log.Error("failing the emails of an outbox entry that cannot start", "err", err, "cause", cause)
			return d.retry(d.backoff(it.Attempts), cause)
		}
		failed = n
	}
	log.Error("ending outbox entry that cannot start", "why", why, "failed_recipients", failed, "err", cause)
	d.ended(it, why)
	return store.OutboxResult{Done: true}
}

func (d *Dispatcher) ended(it store.OutboxItem, why string) {
	if d.Ended != nil {
		d.Ended(it.Kind, why)
	}
}

func (d *Dispatcher) retry(wait time.Duration, err error) store.OutboxResult {
	msg := err.Error()
	if len(msg) > maxLastError {
		msg = strings.ToValidUTF8(msg[:maxLastError], "") // PostgreSQL text is valid UTF-8
	}
	return store.OutboxResult{RetryIn: wait, Error: msg}
}

// backoff is the wait after an entry's failed start when attempts starts
// had failed before it: RetryInitial doubled attempts times, at most
// RetryMax.
func (d *Dispatcher) backoff(attempts int) time.Duration {
	wait := d.cfg.RetryInitial
	for range attempts {
		if wait >= d.cfg.RetryMax/2 {
			return d.cfg.RetryMax
		}
		wait *= 2
	}
	return min(wait, d.cfg.RetryMax)
}
