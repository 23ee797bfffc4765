// Package outbox starts the workflows of accepted work. The accepting
// transaction writes an outbox entry next to the email row; a Dispatcher
// drains the entries and starts one workflow each. Workflow IDs are
// deterministic and duplicate starts are rejected by Temporal, so an entry
// started twice (a crash between the start and the delete) starts one
// workflow. Entries left behind by a crash are found by the next drain.
package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/store"
)

// Starter starts the workflow of an outbox entry. Starting a workflow that
// was already started must return nil.
type Starter interface {
	Start(ctx context.Context, item store.OutboxItem) error
}

// Drainer is the part of the store the dispatcher uses.
type Drainer interface {
	DrainOutbox(ctx context.Context, limit int, start func(context.Context, []store.OutboxItem) []int64) (int, error)
}

// Config tunes a Dispatcher.
type Config struct {
	Batch       int           // entries claimed per drain; 0 → 128
	Concurrency int           // workflow starts in flight; 0 → 32
	Poll        time.Duration // drain at least this often; 0 → 1 s
}

// Dispatcher drains the outbox. Construct with New, run with Run.
type Dispatcher struct {
	cfg     Config
	store   Drainer
	starter Starter
	logger  *slog.Logger
	poke    chan struct{}
	// Started is called with the time each started entry waited, for metrics. May be nil.
	Started func(wait time.Duration)
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

// Run drains until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		for {
			n, err := d.store.DrainOutbox(ctx, d.cfg.Batch, d.startAll)
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

// startAll starts items concurrently and returns the ids that started.
// Entries of the same kind and ref (webhook wake-ups, many per endpoint)
// are started once: every one of them was committed before the claim, so
// one start serves them all.
func (d *Dispatcher) startAll(ctx context.Context, items []store.OutboxItem) []int64 {
	var (
		mu   sync.Mutex
		done = make([]int64, 0, len(items))
		wg   sync.WaitGroup
		sem  = make(chan struct{}, d.cfg.Concurrency)
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
			if err := d.starter.Start(ctx, it); err != nil {
				if ctx.Err() == nil {
					d.logger.Warn("starting workflow", "kind", it.Kind, "ref", it.Ref, "team_id", it.TeamID, "err", err)
				}
				return
			}
			if d.Started != nil {
				d.Started(time.Since(it.CreatedAt))
			}
			mu.Lock()
			done = append(done, dups[key{it.Kind, it.Ref}]...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return done
}
