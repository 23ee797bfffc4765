package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows"
)

// bareTaskQueue is the bench's own task queue on dev's Temporal server, apart
// from Posthaste's queues.
const bareTaskQueue = "posthaste-bench"

// Registered names equal the Go names, so workflows can reference the
// activity through a nil *benchActivities and the name still matches.
const (
	oneActivityName      = "OneActivity"
	oneLocalActivityName = "OneLocalActivity"
	noopName             = "Noop"
)

// NoopInput and NoopOutput are the no-op activity's input and output.
type NoopInput struct{ Seq int }
type NoopOutput struct{ Seq int }

// benchActivities holds the reference activities (no dependencies).
type benchActivities struct{}

// Noop returns its input.
func (*benchActivities) Noop(_ context.Context, in NoopInput) (NoopOutput, error) {
	return NoopOutput(in), nil
}

var a *benchActivities

// OneActivity runs Noop once as a regular activity.
func OneActivity(ctx workflow.Context, in NoopInput) (NoopOutput, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out NoopOutput
	err := workflow.ExecuteActivity(ctx, a.Noop, in).Get(ctx, &out)
	return out, err
}

// OneLocalActivity runs Noop once as a local activity.
func OneLocalActivity(ctx workflow.Context, in NoopInput) (NoopOutput, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out NoopOutput
	err := workflow.ExecuteLocalActivity(ctx, a.Noop, in).Get(ctx, &out)
	return out, err
}

// bareKind chooses the reference workflow.
type bareKind string

const (
	bareActivity      bareKind = "one activity"
	bareLocalActivity bareKind = "one local activity"
)

func (k bareKind) workflowName() string {
	if k == bareLocalActivity {
		return oneLocalActivityName
	}
	return oneActivityName
}

// dialTemporal connects to the "default" namespace of the server at hostPort.
// The SDK logs warnings and errors only.
func dialTemporal(ctx context.Context, hostPort string) (client.Client, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  hostPort,
		Namespace: "default",
		Logger:    sdklog.NewStructuredLogger(logger),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s: %w", hostPort, err)
	}
	return c, nil
}

// startBareWorker runs the reference workflows and activity on
// bareTaskQueue with the SDK's default worker options.
func startBareWorker(c client.Client) (worker.Worker, error) {
	w := worker.New(c, bareTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(OneActivity, workflow.RegisterOptions{Name: oneActivityName})
	w.RegisterWorkflowWithOptions(OneLocalActivity, workflow.RegisterOptions{Name: oneLocalActivityName})
	w.RegisterActivityWithOptions((&benchActivities{}).Noop, activity.RegisterOptions{Name: noopName})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the bench worker: %w", err)
	}
	return w, nil
}

// connectBare dials dev's Temporal and starts a bare worker on it (see
// startBareWorker); stop stops the worker and closes the client.
func connectBare(ctx context.Context, hostPort string) (c client.Client, stop func(), err error) {
	c, err = dialTemporal(ctx, hostPort)
	if err != nil {
		return nil, nil, err
	}
	w, err := startBareWorker(c)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, func() { w.Stop(); c.Close() }, nil
}

// bareResult is one bare run.
type bareResult struct {
	kind      bareKind
	rate      rate          // workflows completed, first start to last result
	startedIn time.Duration // first start to last start answered
	startP50  time.Duration
	startP99  time.Duration
}

func (r bareResult) String() string {
	s := fmt.Sprintf("%-18s n=%-6d %8.1f workflows/s  in %s  (all started in %s; StartWorkflowExecution p50 %s p99 %s)",
		r.kind, r.rate.n, r.rate.perSecond(), fmtDur(r.rate.elapsed), fmtDur(r.startedIn), fmtDur(r.startP50), fmtDur(r.startP99))
	if t := r.rate.cpuText("workflow"); t != "" {
		s += "; " + t
	}
	return s
}

// runBare starts n workflows of kind with conc concurrent starters, then
// waits for every result (conc at a time, in start order, so the waits
// follow the completions). Any failed workflow fails the run.
func runBare(ctx context.Context, c client.Client, kind bareKind, n, conc int) (bareResult, error) {
	runs := make([]client.WorkflowRun, n)
	lat := make([]time.Duration, n)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	start, cpu := time.Now(), startCPU()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID:                    "bench/" + uuid.NewString(),
					TaskQueue:             bareTaskQueue,
					WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
				}, kind.workflowName(), NoopInput{Seq: i})
				lat[i] = time.Since(t)
				if err != nil {
					fail(fmt.Errorf("starting workflow %d: %w", i, err))
					return
				}
				runs[i] = run
			}
		})
	}
	wg.Wait()
	startedIn := time.Since(start)
	if firstErr != nil {
		return bareResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return bareResult{}, err
	}

	next.Store(0)
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				var out NoopOutput
				if err := runs[i].Get(ctx, &out); err != nil {
					fail(fmt.Errorf("workflow %s: %w", runs[i].GetID(), err))
					return
				}
				if out.Seq != i {
					fail(fmt.Errorf("workflow %s returned %d, want %d", runs[i].GetID(), out.Seq, i))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed, busy := time.Since(start), cpu.used()
	if firstErr != nil {
		return bareResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return bareResult{}, err
	}
	slices.Sort(lat)
	return bareResult{
		kind: kind, rate: rate{n: n, elapsed: elapsed, busy: busy}, startedIn: startedIn,
		startP50: percentile(lat, 0.50), startP99: percentile(lat, 0.99),
	}, nil
}

// history is the event types of one workflow's history, in order.
type history struct {
	workflowID string
	types      []string
}

// emailHistory fetches the history of the SendEmail workflow of emailID.
func emailHistory(ctx context.Context, c client.Client, emailID string) (history, error) {
	return workflowHistory(ctx, c, workflows.EmailWorkflowID(emailID))
}

// workflowHistory fetches the history of the latest run of workflowID.
func workflowHistory(ctx context.Context, c client.Client, workflowID string) (history, error) {
	h := history{workflowID: workflowID}
	it := c.GetWorkflowHistory(ctx, h.workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return h, fmt.Errorf("reading the history of %s: %w", h.workflowID, err)
		}
		h.types = append(h.types, ev.GetEventType().String())
	}
	return h, nil
}

// runBareWarm runs warmup unmeasured workflows of kind, then the measured
// run of n, each with conc concurrent starters.
func runBareWarm(ctx context.Context, c client.Client, kind bareKind, warmup, n, conc int,
	logf func(string, ...any)) (bareResult, error) {
	logf("bare %s: %d warm-up, then %d workflows", kind, warmup, n)
	if _, err := runBare(ctx, c, kind, warmup, conc); err != nil {
		return bareResult{}, fmt.Errorf("warming up bare %s: %w", kind, err)
	}
	br, err := runBare(ctx, c, kind, n, conc)
	if err != nil {
		return bareResult{}, fmt.Errorf("bare %s: %w", kind, err)
	}
	return br, nil
}

// runBareEager runs n one-activity workflows one after the other, each
// started eagerly (StartWorkflowOptions.EnableEagerStart: the server
// hands the first workflow task back in its answer to the start, to the
// worker on the same client, startBareWorker's), and returns each one's
// time from the start request to its result, in run order, and the last
// one's workflow id.
func runBareEager(ctx context.Context, c client.Client, n int) (lat []time.Duration, lastID string, err error) {
	lat = make([]time.Duration, 0, n)
	for i := range n {
		t := time.Now()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                    "bench/eager/" + uuid.NewString(),
			TaskQueue:             bareTaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			EnableEagerStart:      true,
		}, oneActivityName, NoopInput{Seq: i})
		if err != nil {
			return nil, "", fmt.Errorf("starting eager workflow %d: %w", i, err)
		}
		var out NoopOutput
		if err := run.Get(ctx, &out); err != nil {
			return nil, "", fmt.Errorf("workflow %s: %w", run.GetID(), err)
		}
		lat = append(lat, time.Since(t))
		if out.Seq != i {
			return nil, "", fmt.Errorf("workflow %s returned %d, want %d", run.GetID(), out.Seq, i)
		}
		lastID = run.GetID()
	}
	return lat, lastID, nil
}

// eagerAccepted reports whether the server accepted to start workflowID
// eagerly, as the first event of its history records.
func eagerAccepted(ctx context.Context, c client.Client, workflowID string) (bool, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return false, fmt.Errorf("no history of %s", workflowID)
	}
	ev, err := it.Next()
	if err != nil {
		return false, fmt.Errorf("reading the history of %s: %w", workflowID, err)
	}
	return ev.GetWorkflowExecutionStartedEventAttributes().GetEagerExecutionAccepted(), nil
}
