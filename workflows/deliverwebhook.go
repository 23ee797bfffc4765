package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// DeliverWebhookInput starts (or continues) the delivery of an endpoint.
type DeliverWebhookInput struct {
	WebhookID string
	// Steps is the retry window of a delivery pass that fails (the
	// database is down).
	Steps StepPolicy
}

// passesPerRun bounds a run's history: after this many delivery passes the
// workflow continues as new.
const passesPerRun = 200

// webhookPassAttempt bounds one delivery pass, run as a local activity
// (no round trip through the server per pass): a pass stops starting
// attempts after 30 s and an attempt takes at most 15 s. A failing pass
// (the database is down) is retried on the input's StepPolicy.
const webhookPassAttempt = 2 * time.Minute

// DeliverWebhook delivers an endpoint's webhook messages, one workflow per
// endpoint (ID webhook/<id>), so an email costs its endpoints no workflow
// at all. Messages live in PostgreSQL, written in the transaction of the
// event they report; the outbox wakes this workflow with the wake signal
// (signal-with-start). Each pass (the DeliverWebhooks activity) posts every
// message whose turn has come, in order per email, and reports when the
// next retry is due; the workflow then sleeps on a durable timer until
// then or until woken. It ends when the endpoint is disabled or deleted
// (enabling it again starts it anew) and continues as new every
// passesPerRun passes.
func DeliverWebhook(ctx workflow.Context, in DeliverWebhookInput) error {
	wake := workflow.GetSignalChannel(ctx, WebhookWakeSignal)
	lctx := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(webhookPassAttempt))
	for pass := 0; ; pass++ {
		drain(wake)
		var res contract.DeliverWebhooksResult
		if err := workflow.ExecuteLocalActivity(lctx, contract.DeliverWebhooksName,
			contract.DeliverWebhooksInput{WebhookID: in.WebhookID}).Get(ctx, &res); err != nil {
			return err
		}
		if res.Stop {
			return nil
		}
		if pass+1 >= passesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			drain(wake)
			return workflow.NewContinueAsNewError(ctx, DeliverWebhookName, in)
		}
		if res.More {
			continue
		}
		if err := sleepOrWake(ctx, wake, res.NextAt); err != nil {
			return err
		}
	}
}

// sleepOrWake waits for a wake signal or, when next is set, until next.
func sleepOrWake(ctx workflow.Context, wake workflow.ReceiveChannel, next *time.Time) error {
	if wake.ReceiveAsync(nil) {
		return nil
	}
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	var timerErr error
	var cancel workflow.CancelFunc = func() {}
	if next != nil {
		d := next.Sub(workflow.Now(ctx))
		if d <= 0 {
			return nil
		}
		var tctx workflow.Context
		tctx, cancel = workflow.WithCancel(ctx)
		sel.AddFuture(workflow.NewTimer(tctx, d), func(f workflow.Future) { timerErr = f.Get(ctx, nil) })
	}
	sel.Select(ctx)
	cancel()
	if timerErr != nil && ctx.Err() != nil {
		return timerErr
	}
	return nil
}

// drain consumes pending wake signals: the pass about to run serves them.
func drain(c workflow.ReceiveChannel) {
	for c.ReceiveAsync(nil) {
	}
}
