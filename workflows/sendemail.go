package workflows

import (
	"cmp"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// DeliveryPolicy is the retry schedule of a send: MX delivery retries
// start after Initial, grow by Backoff up to Max, and stop Expire after the
// first try; Steps is the retry window of its database steps. It travels
// in the workflow input so a run keeps the schedule it started with.
type DeliveryPolicy struct {
	Initial time.Duration
	Backoff float64
	Max     time.Duration
	Expire  time.Duration
	Steps   StepPolicy
	// Heartbeat is Deliver's heartbeat timeout: the attempt of a worker
	// that died is retried this long after its last heartbeat. 0 means
	// DefaultDeliverHeartbeat (histories from before it existed).
	Heartbeat time.Duration
}

// DefaultDeliverHeartbeat retries a dead worker's delivery after a minute.
const DefaultDeliverHeartbeat = time.Minute

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

// Wake is the payload of WakeSignal.
type Wake struct {
	EmailID string
	// ScheduledAt is the email's new time; nil means "look now" (the
	// email was canceled).
	ScheduledAt *time.Time
}

// SendEmail delivers one email: it waits for the scheduled time, builds
// and stores the message (recording `sent`), simulates the sandbox
// recipients, delivers to the other recipients' domains in parallel, one
// Deliver activity per domain on the queue of the sender domain's region,
// and records every outcome. When this workflow's worker serves that
// region itself, Prepare makes the first attempt of a domain (or, in
// histories from before, a local activity does; see deliverLocalFirst).
// PostgreSQL holds the truth about the
// schedule: a WakeSignal cuts a wait short, and Prepare, which claims the
// email, reports a time moved later so the wait starts again.
func SendEmail(ctx workflow.Context, in SendEmailInput) error {
	return sendOne(ctx, in.EmailID, in.ScheduledAt, workflow.GetSignalChannel(ctx, WakeSignal), in.Delivery)
}

// sendOne is SendEmail's body for one email; SendBatch runs it for each of
// its emails. wake delivers Wake values meant for this email.
func sendOne(ctx workflow.Context, emailID string, at *time.Time, wake workflow.ReceiveChannel, delivery DeliveryPolicy) error {
	lctx := workflow.WithLocalActivityOptions(ctx, delivery.Steps.localOptions(stepAttempt))
	var prep contract.PrepareResult
	for {
		if at != nil {
			if err := waitUntil(ctx, *at, wake); err != nil {
				return err
			}
		}
		prep = contract.PrepareResult{}
		if err := workflow.ExecuteLocalActivity(lctx, contract.PrepareName, contract.PrepareInput{EmailID: emailID}).
			Get(ctx, &prep); err != nil {
			return failIfPermanent(lctx, emailID, err)
		}
		if prep.NotDue == nil {
			break
		}
		at = prep.NotDue
	}
	if prep.Skip {
		return nil
	}
	// Whether a group's first attempt runs locally is decided by Prepare's
	// result (DeliveryGroup.Local), which its marker records: histories
	// from before local-first delivery replay without Local and so without
	// it. No GetVersion is needed, and none is called: its marker and the
	// search-attribute upsert that goes with it cost two history events
	// and a visibility write per email. Histories recorded with that
	// marker still replay (the SDK skips version markers without a
	// matching call, and their upsert).
	futures := startDeliveries(ctx, emailID, prep, delivery)
	var events []contract.EventInput
	for _, r := range prep.Sandbox {
		for _, t := range r.Events {
			events = append(events, sandboxEvent(r.Address, t))
		}
	}
	if len(events) > 0 {
		if err := workflow.ExecuteLocalActivity(lctx, contract.RecordEventsName, contract.RecordEventsInput{
			EmailID: emailID, TeamID: prep.TeamID, Events: events,
		}).Get(ctx, nil); err != nil {
			return err
		}
	}
	return recordUndelivered(ctx, emailID, prep, futures, delivery)
}

// startDeliveries starts the delivery of each group of a prepared email
// (sendOne's and PrepareBatch's): a Deliver activity on the queue of the group's region
// and pool, or a first attempt run locally (deliverLocalFirst) when
// Prepare says this worker serves it. The futures are the groups', in
// order.
func startDeliveries(ctx workflow.Context, emailID string, prep contract.PrepareResult, delivery DeliveryPolicy) []workflow.Future {
	futures := make([]workflow.Future, len(prep.Groups))
	for i, g := range prep.Groups {
		opts := workflow.ActivityOptions{
			TaskQueue:              DeliverTaskQueue(g.Region, g.Pool),
			StartToCloseTimeout:    30 * time.Minute,
			ScheduleToCloseTimeout: delivery.Expire,
			HeartbeatTimeout:       cmp.Or(delivery.Heartbeat, DefaultDeliverHeartbeat),
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:        delivery.Initial,
				BackoffCoefficient:     delivery.Backoff,
				MaximumInterval:        delivery.Max,
				NonRetryableErrorTypes: []string{contract.ErrTypePermanent},
			},
		}
		in := contract.DeliverInput{
			EmailID: emailID, TeamID: prep.TeamID, Domain: g.Domain, Recipients: g.Recipients, TLS: g.TLS, ReturnPath: g.ReturnPath,
			Pool: g.Pool,
		}
		if g.Local {
			in.Region = g.Region
			futures[i] = deliverLocalFirst(ctx, in, g.First, opts, delivery.Initial)
			continue
		}
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), contract.DeliverName, in)
	}
	return futures
}

// recordUndelivered waits for the groups' deliveries (startDeliveries) and
// ends the recipients of a group whose delivery never succeeded within
// its policy as a transient bounce, and those of one that failed
// permanently (not through the MX's answer, which Deliver records itself)
// as failed. A canceled delivery is returned as it is.
func recordUndelivered(ctx workflow.Context, emailID string, prep contract.PrepareResult, futures []workflow.Future,
	delivery DeliveryPolicy) error {
	var expired []contract.EventInput
	for i, f := range futures {
		err := f.Get(ctx, nil)
		if err == nil {
			continue
		}
		var canceled *temporal.CanceledError
		if errors.As(err, &canceled) {
			return err
		}
		if reason, ok := contract.PermanentReason(err); ok {
			for _, rcpt := range prep.Groups[i].Recipients {
				expired = append(expired, contract.EventInput{
					Type: contract.EventFailed, Recipient: rcpt, Detail: map[string]any{"reason": reason},
				})
			}
			continue
		}
		for _, rcpt := range prep.Groups[i].Recipients {
			expired = append(expired, contract.EventInput{
				Type: contract.EventBounced, Recipient: rcpt,
				Detail: contract.BounceDetail("Transient", "General", expiredMessage(err), nil),
			})
		}
	}
	if len(expired) == 0 {
		return nil
	}
	lctx := workflow.WithLocalActivityOptions(ctx, delivery.Steps.localOptions(stepAttempt))
	return workflow.ExecuteLocalActivity(lctx, contract.RecordEventsName, contract.RecordEventsInput{
		EmailID: emailID, TeamID: prep.TeamID, Events: expired,
	}).Get(ctx, nil)
}

// LocalDeliverTimeout bounds the local first attempt of a delivery. Nearly
// every delivery takes seconds; while a local activity runs the SDK keeps
// the workflow task alive by completing it and asking for a new one every
// few seconds (a few history events each time), so a few minutes bound that
// cost, while an MX slow enough to need the RFC 5321 timeouts (up to ten
// minutes a step) is left to the regular Deliver and its thirty minutes.
// The attempt itself stops delivering 20 s earlier (see
// delivery.DeliverLocal) so that the MX's answers reach the result.
const LocalDeliverTimeout = 5 * time.Minute

// deliverLocalFirst delivers one group with a first attempt run as a local
// activity in this workflow's worker, which serves the group's region
// (DeliveryGroup.Local), instead of a regular activity and its round trip
// through the Temporal server; when Prepare made that attempt itself
// (first, DeliveryGroup.First), its result stands for the local activity's
// and none runs. When that attempt succeeds or fails
// permanently, so does the returned future. When it fails otherwise (a
// deferral, a database error, its timeout), the regular Deliver takes over
// on the region's queue with opts (the policy of a delivery without a local
// attempt), after a durable timer of initial so that a deferral is not
// retried at once, as its retry would not be; the MX answers the local
// attempt got and could not record reach it in DeliverInput.Answered, so it
// records them and does not send to those recipients again.
func deliverLocalFirst(ctx workflow.Context, in contract.DeliverInput, first *contract.DeliverLocalResult,
	opts workflow.ActivityOptions, initial time.Duration) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		start := workflow.Now(ctx)
		res, err := firstAttempt(ctx, in, first)
		if err == nil && res.Done {
			settle.Set(nil, nil)
			return
		}
		var canceled *temporal.CanceledError
		if _, permanent := contract.PermanentReason(err); permanent || errors.As(err, &canceled) {
			settle.Set(nil, err)
			return
		}
		if err := workflow.Sleep(ctx, initial); err != nil {
			settle.Set(nil, err)
			return
		}
		in.Answered = res.Answered
		if opts.ScheduleToCloseTimeout > 0 {
			// The delivery's retry period started with the local attempt.
			opts.ScheduleToCloseTimeout = max(opts.ScheduleToCloseTimeout-workflow.Now(ctx).Sub(start), time.Second)
		}
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), contract.DeliverName, in).Get(ctx, nil)
		var app *temporal.ApplicationError
		if err != nil && res.Retry != "" && !errors.As(err, &app) && !errors.As(err, &canceled) {
			// No regular attempt ended before the retry period did (it
			// timed out): the local attempt's reason is the last known,
			// and the bounce names it.
			err = temporal.NewApplicationErrorWithCause(res.Retry, errTypeLocalAttempt, err)
		}
		settle.Set(nil, err)
	})
	return f
}

// firstAttempt is the result of a group's first, local attempt: the one
// Prepare made (first), or that of a DeliverLocal run now. A permanent
// failure is the error, as DeliverLocal returns it.
func firstAttempt(ctx workflow.Context, in contract.DeliverInput, first *contract.DeliverLocalResult) (contract.DeliverLocalResult, error) {
	if first != nil {
		if first.Permanent != "" {
			return contract.DeliverLocalResult{}, temporal.NewNonRetryableApplicationError(first.Permanent, contract.ErrTypePermanent, nil)
		}
		return *first, nil
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    LocalDeliverTimeout,
		ScheduleToCloseTimeout: LocalDeliverTimeout,
		// One attempt: the retries are the regular activity's.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var res contract.DeliverLocalResult
	err := workflow.ExecuteLocalActivity(lctx, contract.DeliverLocalName, in).Get(ctx, &res)
	return res, err
}

// errTypeLocalAttempt is the type of the error that carries a local
// attempt's reason when no regular attempt ended with one.
const errTypeLocalAttempt = "LocalAttempt"

// failIfPermanent ends the email `failed` when err is permanent (the
// message cannot be built or signed, its domain or key is gone): retrying
// cannot send it, and an accepted email must reach an outcome. The
// workflow then completes. Any other error is returned.
func failIfPermanent(lctx workflow.Context, emailID string, err error) error {
	reason, ok := contract.PermanentReason(err)
	if !ok {
		return err
	}
	return workflow.ExecuteLocalActivity(lctx, contract.FailEmailName, contract.FailEmailInput{
		EmailID: emailID, Reason: reason,
	}).Get(lctx, nil)
}

// waitUntil sleeps on a durable timer until at. A Wake received meanwhile
// replaces the time (nil: stop waiting now).
func waitUntil(ctx workflow.Context, at time.Time, wake workflow.ReceiveChannel) error {
	for {
		d := at.Sub(workflow.Now(ctx))
		if d <= 0 {
			return nil
		}
		tctx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, d)
		var (
			fired    bool
			timerErr error
			w        Wake
		)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(f workflow.Future) { fired, timerErr = true, f.Get(ctx, nil) })
		sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &w) })
		sel.Select(ctx)
		if fired {
			cancel()
			return timerErr
		}
		cancel()
		if w.ScheduledAt == nil {
			return nil
		}
		at = *w.ScheduledAt
	}
}

func sandboxEvent(rcpt, typ string) contract.EventInput {
	ev := contract.EventInput{Type: typ, Recipient: rcpt}
	switch typ {
	case contract.EventBounced:
		// As SES's mailbox simulator reports its bounce address. Sandbox
		// addresses never enter the suppression list.
		const reply = "550 5.1.1 The sandbox address bounced@" + "posthaste.test always bounces."
		ev.Detail = contract.BounceDetail("Permanent", "General",
			"The recipient's address does not exist: "+reply, []string{"smtp; " + reply})
	case contract.EventComplained:
		ev.Detail = map[string]any{"feedback_type": "abuse"}
	case contract.EventSuppressed:
		ev.Detail = map[string]any{"reason": "The sandbox address suppressed@posthaste.test is always on the suppression list."}
	}
	return ev
}

// expiredMessage says why a delivery that never succeeded within its
// policy ended: the last error's message, without the activity error's
// framing.
func expiredMessage(err error) string {
	msg := err.Error()
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		msg = app.Message()
	}
	return "Delivery did not succeed before the retry period ended: " + msg
}
