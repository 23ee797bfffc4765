package workflows

import (
	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// ProcessInboundInput starts the ProcessInbound workflow of a message the
// inbound MX accepted.
type ProcessInboundInput struct {
	InboundID uuid.UUID
	// Steps is how long the step retries (a database outage).
	Steps StepPolicy
}

// ProcessInbound processes one message the inbound MX committed (an
// inbound_message row): one local activity reads it, records the
// bounces, delays and complaints it reports about our emails and marks it
// processed. The step is idempotent and retries for Steps.Window, so a
// message accepted while PostgreSQL is down, or a worker that crashes
// mid-step, is processed once the database is back.
func ProcessInbound(ctx workflow.Context, in ProcessInboundInput) (contract.ProcessInboundResult, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(stepAttempt))
	var res contract.ProcessInboundResult
	if err := workflow.ExecuteLocalActivity(lctx, contract.ProcessInboundMessageName,
		contract.ProcessInboundInput{InboundID: in.InboundID}).Get(ctx, &res); err != nil {
		workflow.GetLogger(ctx).Error("processing inbound message failed", "err", err)
		return res, err
	}
	return res, nil
}
