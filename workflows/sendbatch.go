package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// SendBatchInput starts the SendBatch workflow of one accepted batch.
type SendBatchInput struct {
	BatchID  string
	Delivery DeliveryPolicy
}

// SendBatch sends the emails of a batch (POST /emails/batch). It lists
// them with one local activity, then runs SendEmail's steps for each email
// concurrently inside this one workflow: every email keeps its own row,
// events, schedule (a timer each) and cancel/reschedule, while the batch
// costs one workflow start and one history instead of a hundred. A
// WakeSignal names the email it is for. An email whose steps fail does
// not stop the others; the workflow then fails with the first error.
func SendBatch(ctx workflow.Context, in SendBatchInput) error {
	lctx := workflow.WithLocalActivityOptions(ctx, in.Delivery.Steps.localOptions(stepAttempt))
	var batch contract.LoadBatchResult
	if err := workflow.ExecuteLocalActivity(lctx, contract.LoadBatchName, contract.LoadBatchInput{BatchID: in.BatchID}).
		Get(ctx, &batch); err != nil {
		return err
	}
	wakes := make(map[string]workflow.Channel, len(batch.Emails))
	for _, e := range batch.Emails {
		wakes[e.EmailID] = workflow.NewBufferedChannel(ctx, 64)
	}
	signals := workflow.GetSignalChannel(ctx, WakeSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var w Wake
			signals.Receive(ctx, &w)
			if ch, ok := wakes[w.EmailID]; ok {
				ch.SendAsync(w)
			}
		}
	})

	wg := workflow.NewWaitGroup(ctx)
	errs := make([]error, len(batch.Emails))
	for i, e := range batch.Emails {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			var at *time.Time
			if e.ScheduledAt != nil {
				t := *e.ScheduledAt
				at = &t
			}
			errs[i] = sendOne(ctx, e.EmailID, at, wakes[e.EmailID], in.Delivery)
		})
	}
	wg.Wait(ctx)
	for i, err := range errs {
		if err != nil {
			workflow.GetLogger(ctx).Error("email of batch failed", "email_id", batch.Emails[i].EmailID, "err", err)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
