package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/activities"
)

// a gives compile-checked activity signatures; it is never dereferenced.
var a *activities.Activities

// DeliveryPolicy is the retry schedule of MX delivery: retries start after
// Initial, grow by Backoff up to Max, and stop Expire after the first try.
// It travels in the workflow input so a run keeps the schedule it started
// with.
type DeliveryPolicy struct {
	Initial time.Duration
	Backoff float64
	Max     time.Duration
	Expire  time.Duration
}

// DefaultDeliveryPolicy retries within minutes at first and gives up after
// 72 hours.
var DefaultDeliveryPolicy = DeliveryPolicy{
	Initial: time.Minute, Backoff: 2, Max: 2 * time.Hour, Expire: 72 * time.Hour,
}

// SendEmailInput starts the SendEmail workflow of one accepted email.
type SendEmailInput struct {
	EmailID     string
	ScheduledAt *time.Time
	Delivery    DeliveryPolicy
}

// localOptions are for short, idempotent database steps.
var localOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
	},
}

// SendEmail delivers one email: it waits for the scheduled time, builds
// and stores the message (recording `sent`), simulates the sandbox
// recipients, delivers to the other recipients' domains in parallel, one
// Deliver activity per domain on the queue of the sender domain's region,
// and records every outcome.
func SendEmail(ctx workflow.Context, in SendEmailInput) error {
	if in.ScheduledAt != nil {
		if d := in.ScheduledAt.Sub(workflow.Now(ctx)); d > 0 {
			if err := workflow.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions)
	var prep activities.PrepareResult
	if err := workflow.ExecuteLocalActivity(lctx, a.Prepare, activities.PrepareInput{EmailID: in.EmailID}).
		Get(ctx, &prep); err != nil {
		return err
	}
	if prep.Skip {
		return nil
	}

	futures := make([]workflow.Future, len(prep.Groups))
	for i, g := range prep.Groups {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              DeliverTaskQueue(g.Region),
			StartToCloseTimeout:    30 * time.Minute,
			ScheduleToCloseTimeout: in.Delivery.Expire,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:        in.Delivery.Initial,
				BackoffCoefficient:     in.Delivery.Backoff,
				MaximumInterval:        in.Delivery.Max,
				NonRetryableErrorTypes: []string{activities.ErrTypePermanent},
			},
		})
		futures[i] = workflow.ExecuteActivity(actx, a.Deliver, activities.DeliverInput{
			EmailID: in.EmailID, Domain: g.Domain, Recipients: g.Recipients, TLS: g.TLS, ReturnPath: g.ReturnPath,
		})
	}

	var events []activities.EventInput
	for _, r := range prep.Sandbox {
		for _, t := range r.Events {
			events = append(events, sandboxEvent(r.Address, t))
		}
	}
	if len(events) > 0 {
		if err := workflow.ExecuteLocalActivity(lctx, a.RecordEvents, activities.RecordEventsInput{
			EmailID: in.EmailID, Events: events,
		}).Get(ctx, nil); err != nil {
			return err
		}
	}

	// A delivery that never succeeded within its policy ends as a transient
	// bounce of the recipients it still held.
	var expired []activities.EventInput
	for i, f := range futures {
		err := f.Get(ctx, nil)
		if err == nil {
			continue
		}
		var canceled *temporal.CanceledError
		if errors.As(err, &canceled) {
			return err
		}
		for _, rcpt := range prep.Groups[i].Recipients {
			expired = append(expired, activities.EventInput{
				Type: activities.EventBounced, Recipient: rcpt,
				Detail: activities.BounceDetail("Transient", "General", err.Error()),
			})
		}
	}
	if len(expired) > 0 {
		return workflow.ExecuteLocalActivity(lctx, a.RecordEvents, activities.RecordEventsInput{
			EmailID: in.EmailID, Events: expired,
		}).Get(ctx, nil)
	}
	return nil
}

func sandboxEvent(rcpt, typ string) activities.EventInput {
	ev := activities.EventInput{Type: typ, Recipient: rcpt}
	switch typ {
	case activities.EventBounced:
		ev.Detail = activities.BounceDetail("Permanent", "General",
			"550 5.1.1 The sandbox address bounced@"+"posthaste.test always bounces.")
	case activities.EventComplained:
		ev.Detail = map[string]any{"feedback_type": "abuse"}
	case activities.EventSuppressed:
		ev.Detail = map[string]any{"reason": "The sandbox address suppressed@posthaste.test is always on the suppression list."}
	}
	return ev
}
