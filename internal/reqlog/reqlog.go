// Package reqlog is the API request log's writer: requests hand their
// entries to Log, which never blocks, and a background loop writes them to
// PostgreSQL in batches (COPY) at least once a second, so an entry is
// readable within a few seconds. Close writes everything still buffered.
// When the buffer is full an entry is dropped and counted, so a slow
// database never slows requests down. Body and Prefix redact the bodies an
// entry keeps: secrets never reach the log, whole or cut.
package reqlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/posthaste/posthaste/internal/store"
)

// Store writes entries.
type Store interface {
	InsertRequestLogs(ctx context.Context, entries []store.RequestLog) error
	EnsureRequestLogPartitions(ctx context.Context, from time.Time, days int) error
}

// Config tunes a Writer; zero values take the defaults.
type Config struct {
	Buffer   int           // entries waiting to be written; default 10,000
	Batch    int           // most entries per COPY; default 1,000
	Interval time.Duration // longest wait before a partial batch is written; default 1 s
	// Dropped counts entries lost to a full buffer or a failed write; may be nil.
	Dropped prometheus.Counter
	Logger  *slog.Logger
}

// Writer buffers entries and writes them in batches. Safe for concurrent use.
type Writer struct {
	cfg   Config
	store Store
	in    chan store.RequestLog
	done  chan struct{}

	mu     sync.RWMutex // guards closed against Log racing Close
	closed bool

	days map[time.Time]bool // days whose partitions exist; loop goroutine only
}

// New starts a Writer; Close stops it.
func New(cfg Config, st Store) *Writer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 10_000
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1_000
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{cfg: cfg, store: st, in: make(chan store.RequestLog, cfg.Buffer),
		done: make(chan struct{}), days: map[time.Time]bool{}}
	go w.loop()
	return w
}

// Log queues an entry without blocking. It returns false (and counts the
// loss) when the buffer is full or the writer is closed.
func (w *Writer) Log(e store.RequestLog) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.closed {
		select {
		case w.in <- e:
			return true
		default:
		}
	}
	w.drop(1)
	return false
}

func (w *Writer) drop(n int) {
	if w.cfg.Dropped != nil {
		w.cfg.Dropped.Add(float64(n))
	}
}

// Close stops accepting entries and writes every buffered one, waiting at
// most until ctx ends. Call it after the HTTP server has finished its
// requests.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.in)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Writer) loop() {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	batch := make([]store.RequestLog, 0, w.cfg.Batch)
	flush := func() {
		if len(batch) > 0 {
			w.write(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case e, ok := <-w.in:
			if !ok {
				flush()
				return
			}
			batch = append(batch, e)
			if len(batch) == w.cfg.Batch {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

// write writes one batch, creating missing daily partitions first, and
// tries once more after a second; a batch that still fails is dropped and
// counted.
func (w *Writer) write(batch []store.RequestLog) {
	var err error
	for attempt := range 2 {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = w.ensureDays(ctx, batch)
		if err == nil {
			err = w.store.InsertRequestLogs(ctx, batch)
		}
		cancel()
		if err == nil {
			return
		}
	}
	w.drop(len(batch))
	w.cfg.Logger.Error("request log entries lost", "count", len(batch), "err", err)
}

func (w *Writer) ensureDays(ctx context.Context, batch []store.RequestLog) error {
	for _, e := range batch {
		d := e.CreatedAt.UTC().Truncate(24 * time.Hour)
		if w.days[d] {
			continue
		}
		// Today and the week ahead, so a day change needs no wait here.
		if err := w.store.EnsureRequestLogPartitions(ctx, d, 8); err != nil {
			return err
		}
		for i := range 8 {
			w.days[d.AddDate(0, 0, i)] = true
		}
	}
	return nil
}
