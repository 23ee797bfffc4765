package worker

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/internal/health/notices"
	"github.com/posthaste/posthaste/workflows"
	"github.com/posthaste/posthaste/workflows/contract"
)

// RegisterHealth puts the AccountHealth workflow and, when h is not nil,
// its activity on a worker, by their explicit names.
func RegisterHealth(r sdkworker.Registry, h *notices.Activities) {
	r.RegisterWorkflowWithOptions(workflows.AccountHealth, workflow.RegisterOptions{Name: workflows.AccountHealthName})
	if h != nil {
		r.RegisterActivityWithOptions(h.CheckAccountHealth, activity.RegisterOptions{Name: contract.CheckAccountHealthName})
	}
}

// EnsureHealthSchedule creates the Schedule that runs the AccountHealth
// workflow every interval, or, when it exists (every worker calls this at
// start), brings its interval and input up to date. Calling it again is
// harmless.
func EnsureHealthSchedule(ctx context.Context, c client.Client, every time.Duration, in workflows.AccountHealthInput) error {
	return ensureSchedule(ctx, c, "account health", client.ScheduleSpec{
		Intervals: []client.ScheduleIntervalSpec{{Every: every}},
	}, &client.ScheduleWorkflowAction{
		ID:        workflows.AccountHealthScheduleID,
		Workflow:  workflows.AccountHealthName,
		Args:      []any{in},
		TaskQueue: workflows.TaskQueue,
	})
}
