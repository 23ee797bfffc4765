package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// AccountHealthName is the registered name of the AccountHealth workflow.
const AccountHealthName = "AccountHealth"

// AccountHealthScheduleID is the Temporal Schedule that starts
// AccountHealth every POSTHASTE_HEALTH_INTERVAL.
const AccountHealthScheduleID = "account-health"

// AccountHealthInput configures the account health evaluation; the
// Schedule `account-health` starts AccountHealth with it.
type AccountHealthInput struct {
	// Window is the span over which the rates are counted
	// (POSTHASTE_HEALTH_WINDOW).
	Window time.Duration
	// Pause makes a crossing of a pause threshold pause the team's
	// sending (POSTHASTE_HEALTH_PAUSE).
	Pause bool
}

// AccountHealth evaluates every team's account health once and sends the
// pending notices of crossings (CheckAccountHealth, in
// internal/health/notices). A notice that cannot be sent stays pending for
// the next run; a failed evaluation is retried a few times, then left to
// the next run.
func AccountHealth(ctx workflow.Context, in AccountHealthInput) (contract.CheckAccountHealthResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 10 * time.Second,
			MaximumAttempts: 3,
		},
	})
	var res contract.CheckAccountHealthResult
	err := workflow.ExecuteActivity(ctx, contract.CheckAccountHealthName,
		contract.CheckAccountHealthInput{Window: in.Window, Pause: in.Pause}).Get(ctx, &res)
	if err != nil {
		return res, err
	}
	if res.Crossed > 0 || res.Failed > 0 {
		workflow.GetLogger(ctx).Info("account health evaluated", "crossed", res.Crossed, "sent", res.Sent,
			"failed", res.Failed)
	}
	return res, nil
}
