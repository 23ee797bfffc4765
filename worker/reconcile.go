package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/workflows"
)

var (
	_ delivery.EmailWorkflows = (*Starter)(nil)
	_ datareq.EmailWorkflows  = (*Starter)(nil)
)

// Running reports whether the workflow that sends the email
// (EmailWorkflowID) has a run that is still open. A workflow Temporal does
// not know (never started, or removed by the namespace's retention) does
// not run.
func (s *Starter) Running(ctx context.Context, ref store.EmailRef) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id := EmailWorkflowID(ref)
	d, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describing workflow %s: %w", id, err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Restart starts SendEmail for the email under the ID of restart number
// ref.Restarts (workflows.RestartEmailWorkflowID), whether or not the
// email belongs to a batch: Prepare and Deliver skip what is already done.
// An ID already used is not an error.
func (s *Starter) Restart(ctx context.Context, ref store.EmailRef, scheduledAt *time.Time) error {
	if ref.Restarts < 1 {
		return fmt.Errorf("restarting email %s: restart number %d must be at least 1", ref.ID, ref.Restarts)
	}
	return s.startOnce(ctx, workflows.RestartEmailWorkflowID(ref.ID.String(), ref.Restarts), workflows.TaskQueue,
		workflows.SendEmailName,
		workflows.SendEmailInput{EmailID: ref.ID.String(), ScheduledAt: scheduledAt, Delivery: s.delivery})
}

// Terminate terminates the open run of the workflow that sends the email
// (EmailWorkflowID) with reason. A workflow that is not open, or that
// Temporal does not know, is not an error.
func (s *Starter) Terminate(ctx context.Context, ref store.EmailRef, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id := EmailWorkflowID(ref)
	err := s.client.TerminateWorkflow(ctx, id, "", reason)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("terminating workflow %s: %w", id, err)
	}
	return nil
}

// EnsureReconcileSchedule creates the Schedule that runs the Reconcile
// workflow every interval, or, when it exists (every worker calls this at
// start), brings its interval and input up to date. Calling it again is
// harmless.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, every time.Duration, in workflows.ReconcileInput) error {
	return ensureSchedule(ctx, c, "reconcile", client.ScheduleSpec{
		Intervals: []client.ScheduleIntervalSpec{{Every: every}},
	}, &client.ScheduleWorkflowAction{
		ID:        workflows.ReconcileScheduleID,
		Workflow:  workflows.ReconcileName,
		Args:      []any{in},
		TaskQueue: workflows.TaskQueue,
	})
}
