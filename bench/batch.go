package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/posthaste/posthaste/client"
)

// BatchBenchConfig configures BatchBench.
type BatchBenchConfig struct {
	BaseURL     string        // the API, e.g. "http://127.0.0.1:3000"
	APIKey      string        // a key of a team that may use the sandbox sender
	Concurrency int           // calls in flight; 0 → 8
	Duration    time.Duration // per mode; 0 → 5 s
	BatchSize   int           // emails per batch call; 0 → 100
}

// BatchBenchResult is accepted emails per second through single sends and
// through batches, measured one after the other against the same server.
type BatchBenchResult struct {
	SinglePerSecond float64
	BatchPerSecond  float64
	BatchSize       int
	// Latency of one call, mean.
	SingleLatency, BatchLatency time.Duration
}

// Ratio is how many times more emails per second batches accept.
func (r BatchBenchResult) Ratio() float64 {
	if r.SinglePerSecond == 0 {
		return 0
	}
	return r.BatchPerSecond / r.SinglePerSecond
}

// MaxAcceptRatio is the requirement on AcceptRatio: accepting a batch of
// 100 takes at most 5 times as long as accepting one email.
const MaxAcceptRatio = 5

// AcceptRatio is how many times as long a batch call takes as a single
// send, both as mean latencies under the same load.
func (r BatchBenchResult) AcceptRatio() float64 {
	if r.SingleLatency == 0 {
		return 0
	}
	return float64(r.BatchLatency) / float64(r.SingleLatency)
}

// Print writes the result as two table rows and the two ratios.
func (r BatchBenchResult) Print(w io.Writer) {
	fmt.Fprintf(w, "accepted emails/s, single sends (POST /emails):            %8.0f  (%v per call)\n",
		r.SinglePerSecond, r.SingleLatency.Round(10*time.Microsecond))
	fmt.Fprintf(w, "accepted emails/s, batches of %3d (POST /emails/batch):    %8.0f  (%v per call)\n",
		r.BatchSize, r.BatchPerSecond, r.BatchLatency.Round(10*time.Microsecond))
	fmt.Fprintf(w, "batch / single emails/s:                                   %8.1fx\n", r.Ratio())
	fmt.Fprintf(w, "batch of %d accept time / single accept time = %.2f (target ≤ %d)\n",
		r.BatchSize, r.AcceptRatio(), MaxAcceptRatio)
}

// BatchBench measures the accept rate of single sends and of batches with
// the Go client: for Duration each, Concurrency workers send sandbox
// emails (to delivered+N@posthaste.test) as fast as the API accepts them.
// Any error stops the run.
func BatchBench(ctx context.Context, cfg BatchBenchConfig) (BatchBenchResult, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	c, err := client.New(client.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey})
	if err != nil {
		return BatchBenchResult{}, err
	}
	email := func(i int64) client.SendEmailRequest {
		return client.SendEmailRequest{
			From: "Bench <onboarding@posthaste.test>", To: []string{fmt.Sprintf("delivered+%d@posthaste.test", i)},
			Subject: fmt.Sprintf("bench %d", i), HTML: "<p>bench</p>",
		}
	}
	var seq atomic.Int64
	single := func(ctx context.Context) (int, error) {
		req := email(seq.Add(1))
		_, err := c.Emails.Send(ctx, &req, nil)
		return 1, err
	}
	batch := func(ctx context.Context) (int, error) {
		reqs := make([]client.SendEmailRequest, cfg.BatchSize)
		for i := range reqs {
			reqs[i] = email(seq.Add(1))
		}
		res, err := c.Emails.SendBatch(ctx, reqs, nil)
		if err != nil {
			return 0, err
		}
		return len(res.Data), nil
	}
	res := BatchBenchResult{BatchSize: cfg.BatchSize}
	if res.SinglePerSecond, res.SingleLatency, err = benchCalls(ctx, cfg, single); err != nil {
		return res, fmt.Errorf("single sends: %w", err)
	}
	if res.BatchPerSecond, res.BatchLatency, err = benchCalls(ctx, cfg, batch); err != nil {
		return res, fmt.Errorf("batches: %w", err)
	}
	return res, nil
}

// benchCalls runs call from Concurrency workers for Duration and returns
// emails accepted per second and the mean call latency.
func benchCalls(ctx context.Context, cfg BatchBenchConfig, call func(context.Context) (int, error)) (float64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		emails, calls, busy atomic.Int64
		firstErr            error
		once                sync.Once
		wg                  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				n, err := call(ctx)
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				busy.Add(int64(time.Since(t0)))
				emails.Add(int64(n))
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	elapsed := time.Since(start)
	if calls.Load() == 0 {
		return 0, 0, fmt.Errorf("no call finished in %v", cfg.Duration)
	}
	return float64(emails.Load()) / elapsed.Seconds(), time.Duration(busy.Load() / calls.Load()), nil
}
