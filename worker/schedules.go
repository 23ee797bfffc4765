package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// scheduleTry bounds one attempt to create or update a Schedule.
const scheduleTry = 10 * time.Second

// KeepSchedules makes sure the Schedules exist and are up to date. It
// tries each ensure function (EnsureRetentionSchedule,
// EnsureReconcileSchedule, bound to their arguments) once before it
// returns, so that they normally exist by the time the process reports
// ready, and retries those that failed in the background, waiting a
// second and then twice as long each time up to a minute, until they
// succeed or stop is called. A Temporal server that has just restarted
// after a crash can take a while to answer schedule updates: that must not
// keep a worker from starting. stop waits for the retries to end.
func KeepSchedules(logger *slog.Logger, ensures ...func(context.Context) error) (stop func()) {
	return keepSchedules(logger, time.Second, ensures...)
}

func keepSchedules(logger *slog.Logger, backoff time.Duration, ensures ...func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(context.Background())
	try := func(ensure func(context.Context) error) error {
		tctx, tcancel := context.WithTimeout(ctx, scheduleTry)
		defer tcancel()
		return ensure(tctx)
	}
	var wg sync.WaitGroup
	for _, ensure := range ensures {
		err := try(ensure)
		if err == nil {
			continue
		}
		logger.Warn("schedule not up to date yet; retrying in the background", "err", err)
		wg.Go(func() {
			wait := backoff
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				if err := try(ensure); err == nil {
					logger.Info("schedule up to date")
					return
				} else if ctx.Err() == nil {
					logger.Warn("schedule not up to date yet; retrying", "err", err, "retry_in", min(2*wait, time.Minute))
				}
				wait = min(2*wait, time.Minute)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}
