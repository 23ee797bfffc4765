package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// SendBatchInput starts the SendBatch workflow of one accepted batch.
type SendBatchInput struct {
	BatchID  string
	Delivery DeliveryPolicy
}

// batchPrepareChange is the GetVersion change ID under which SendBatch
// prepares the emails that are due when it starts together
// (prepareTogether); histories recorded before it (DefaultVersion) run
// SendEmail's steps for every email.
const batchPrepareChange = "batch-prepare"

// SendBatch sends the emails of a batch (POST /emails/batch, and each
// chunk of a broadcast). It lists them with one local activity, then
// prepares those due now together (prepareTogether: one PrepareBatch and
// one RecordBatchEvents for all of them instead of a Prepare and a
// RecordEvents each) and runs SendEmail's steps for the others (scheduled
// later, moved later meanwhile, or left to prepare alone) concurrently
// inside this one workflow: every email keeps its own row, events,
// schedule (a timer each), cancel/reschedule and delivery groups, while
// the batch costs one workflow start and one history instead of a
// hundred. A WakeSignal names the email it is for. An email whose steps
// fail does not stop the others; the workflow then fails with the first
// error.
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

	s := &batchSends{emails: batch.Emails, wakes: wakes, delivery: in.Delivery,
		wg: workflow.NewWaitGroup(ctx), errs: make([]error, len(batch.Emails))}
	var recordErr error
	if workflow.GetVersion(ctx, batchPrepareChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		for i, e := range batch.Emails {
			var at *time.Time
			if e.ScheduledAt != nil {
				t := *e.ScheduledAt
				at = &t
			}
			s.alone(ctx, i, at)
		}
	} else {
		recordErr = s.prepareTogether(ctx, lctx)
	}
	s.wg.Wait(ctx)
	for i, err := range s.errs {
		if err != nil {
			workflow.GetLogger(ctx).Error("email of batch failed", "email_id", batch.Emails[i].EmailID, "err", err)
		}
	}
	for _, err := range s.errs {
		if err != nil {
			return err
		}
	}
	return recordErr
}

// batchSends are the emails of a SendBatch run and the coroutines that
// send them: errs[i] is the outcome of emails[i].
type batchSends struct {
	emails   []contract.BatchEmail
	wakes    map[string]workflow.Channel
	delivery DeliveryPolicy
	wg       workflow.WaitGroup
	errs     []error
}

// alone runs SendEmail's steps for email i in a coroutine of its own,
// waiting until at first (nil: now).
func (s *batchSends) alone(ctx workflow.Context, i int, at *time.Time) {
	s.wg.Add(1)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer s.wg.Done()
		id := s.emails[i].EmailID
		s.errs[i] = sendOne(ctx, id, at, s.wakes[id], s.delivery)
	})
}

// prepareTogether prepares the emails due now with one PrepareBatch, runs
// SendEmail's steps alone for the others, and for each prepared email
// fails it (a permanent error of its own), skips it (canceled), hands it
// back to SendEmail's steps (moved later, or an error of its own) or
// starts the delivery of its groups in a coroutine of its own, as sendOne
// would. The sandbox outcomes of all prepared emails are recorded with one
// RecordBatchEvents, whose error it returns. When PrepareBatch fails
// after retrying for the steps' window (a database outage), so does every
// due email, as its own Prepare would have; when it fails otherwise (a
// permanent error, which PrepareBatch does not return, or an answer for
// other emails), every due email is prepared alone.
func (s *batchSends) prepareTogether(ctx, lctx workflow.Context) error {
	now := workflow.Now(ctx)
	var due []int
	var ids []string
	for i, e := range s.emails {
		if e.ScheduledAt != nil && e.ScheduledAt.After(now) {
			t := *e.ScheduledAt
			s.alone(ctx, i, &t)
			continue
		}
		due = append(due, i)
		ids = append(ids, e.EmailID)
	}
	if len(due) == 0 {
		return nil
	}
	var res contract.PrepareBatchResult
	err := workflow.ExecuteLocalActivity(lctx, contract.PrepareBatchName, contract.PrepareBatchInput{EmailIDs: ids}).
		Get(ctx, &res)
	if _, permanent := contract.PermanentReason(err); err != nil && !permanent {
		// Retried for the steps' whole window (a database outage): each
		// email's own Prepare would have failed too.
		for _, i := range due {
			s.errs[i] = err
		}
		return nil
	}
	if err == nil && len(res.Emails) != len(due) {
		err = errors.New("PrepareBatch answered for other emails")
	}
	if err != nil {
		workflow.GetLogger(ctx).Warn("preparing the batch's emails together failed; preparing them one by one", "err", err)
		for _, i := range due {
			s.alone(ctx, i, nil)
		}
		return nil
	}
	record := contract.RecordBatchEventsInput{TeamID: res.TeamID}
	for k, p := range res.Emails {
		i := due[k]
		switch {
		case p.EmailID != s.emails[i].EmailID, p.Alone:
			s.alone(ctx, i, nil)
		case p.Failed != "":
			s.fail(ctx, i, p.Failed)
		case p.Result.Skip:
		case p.Result.NotDue != nil:
			s.alone(ctx, i, p.Result.NotDue)
		default:
			prep := p.Result
			prep.TeamID = res.TeamID
			if len(prep.Groups) > 0 {
				s.deliver(ctx, i, prep)
			}
			var events []contract.EventInput
			for _, r := range prep.Sandbox {
				for _, t := range r.Events {
					events = append(events, sandboxEvent(r.Address, t))
				}
			}
			if len(events) > 0 {
				record.Emails = append(record.Emails, contract.RecordEventsInput{EmailID: p.EmailID, Events: events})
			}
		}
	}
	if len(record.Emails) == 0 {
		return nil
	}
	return workflow.ExecuteLocalActivity(lctx, contract.RecordBatchEventsName, record).Get(ctx, nil)
}

// fail ends email i `failed` with reason, as failIfPermanent does, in a
// coroutine of its own.
func (s *batchSends) fail(ctx workflow.Context, i int, reason string) {
	s.wg.Add(1)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer s.wg.Done()
		lctx := workflow.WithLocalActivityOptions(ctx, s.delivery.Steps.localOptions(stepAttempt))
		s.errs[i] = workflow.ExecuteLocalActivity(lctx, contract.FailEmailName, contract.FailEmailInput{
			EmailID: s.emails[i].EmailID, Reason: reason,
		}).Get(ctx, nil)
	})
}

// deliver delivers the groups of prepared email i in a coroutine of its
// own and records the outcome of those that never succeeded.
func (s *batchSends) deliver(ctx workflow.Context, i int, prep contract.PrepareResult) {
	s.wg.Add(1)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer s.wg.Done()
		id := s.emails[i].EmailID
		futures := startDeliveries(ctx, id, prep, s.delivery)
		s.errs[i] = recordUndelivered(ctx, id, prep, futures, s.delivery)
	})
}
