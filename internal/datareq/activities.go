package datareq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// ForgottenDataRequests counts, in an erasure's found, the earlier
// requests about the same address whose address and archive it removed.
const ForgottenDataRequests = "data_requests"

// dataRequestCancelTimeout bounds waking one canceled email's workflow.
const dataRequestCancelTimeout = 10 * time.Second

// inFlightPage is how many emails in flight to an erased address one
// query lists.
const inFlightPage = 100

// SubjectEraser destroys what Temporal histories hold about one address
// of one team (the payload codec's per-(team, address) key), so that no
// readable history names it afterwards. Processes cache keys for a bounded
// time: the DataRequest workflow waits that long before it reports the
// erasure completed.
type SubjectEraser interface {
	Erase(ctx context.Context, teamID uuid.UUID, address string) error
}

// EmailWaker wakes the workflow of a canceled scheduled email so that it
// ends at once (submit.Waker; worker.Waker implements it).
type EmailWaker interface {
	Wake(ctx context.Context, ref store.EmailRef, at *time.Time) error
}

// EmailWorkflows is the part of Temporal an erasure acts on: the
// workflows of the emails in flight to the erased address, which it stops
// and starts again; worker.Starter implements it.
type EmailWorkflows interface {
	// Running reports whether the workflow that sends the email (its
	// own, its batch's, or its latest restart, see worker.EmailWorkflowID)
	// has a run that is still open.
	Running(ctx context.Context, ref store.EmailRef) (bool, error)
	// Restart starts a SendEmail workflow for the email under the ID of
	// restart number ref.Restarts. An ID that was already used is not an
	// error: that restart exists.
	Restart(ctx context.Context, ref store.EmailRef, scheduledAt *time.Time) error
	// Terminate ends the open run of the workflow that sends the email,
	// recording reason (no personal data) in its history. A workflow that
	// does not run is not an error.
	Terminate(ctx context.Context, ref store.EmailRef, reason string) error
}

// ActivitiesConfig wires the activities of data subject requests.
type ActivitiesConfig struct {
	// Eraser erases the address from Temporal histories; nil erases
	// nothing there (histories without personal-data encryption).
	Eraser SubjectEraser
	// Waker wakes the workflows of scheduled emails an erasure cancels;
	// nil leaves them to find their email gone when their time comes.
	Waker EmailWaker
	// Workflows stops and restarts the workflows of emails in flight to
	// an erased address; nil leaves them running.
	Workflows EmailWorkflows
	// RestartDelay is how long after an erasure stopped the workflow of an
	// email still being sent to the address its restart waits: long
	// enough for a delivery attempt of the stopped workflow to notice, at
	// its next heartbeat, that it was terminated (the delivery policy's
	// heartbeat timeout, POSTHASTE_DELIVERY_HEARTBEAT). 0 →
	// DefaultRestartDelay.
	RestartDelay time.Duration
	// Logger may be nil.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultRestartDelay is the default ActivitiesConfig.RestartDelay: the
// default heartbeat timeout of Deliver.
const DefaultRestartDelay = time.Minute

// erasedWorkflowReason is the reason an erasure terminates a workflow
// with; it is recorded in the history in the clear.
const erasedWorkflowReason = "A recipient's data is being erased: the email's delivery goes on in a new workflow."

// Activities are the activities of the DataRequest workflow: exporting
// and erasing what a team holds about one address. The worker registers
// each under its name in workflows/contract.
type Activities struct {
	privacy      *store.Privacy
	emails       *store.Emails // canceling, restarting
	svc          *Service      // opens addresses, builds exports
	workflows    EmailWorkflows
	eraser       SubjectEraser
	waker        EmailWaker
	restartDelay time.Duration
	logger       *slog.Logger
	now          func() time.Time
}

// NewActivities returns the activities of DataRequest; svc is the Service
// of this process (its keys open the requests' addresses, its ArchiveTTL
// dates the exports), whose store they use.
func NewActivities(cfg ActivitiesConfig, svc *Service) *Activities {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	delay := cfg.RestartDelay
	if delay <= 0 {
		delay = DefaultRestartDelay
	}
	return &Activities{privacy: svc.store.Privacy, emails: svc.store.Emails, svc: svc, workflows: cfg.Workflows,
		eraser: cfg.Eraser, waker: cfg.Waker, restartDelay: delay, logger: logger.With("component", "activities"),
		now: now}
}

// subject loads a running request and opens its address.
func (a *Activities) subject(ctx context.Context, id uuid.UUID) (store.DataRequest, store.Subject, error) {
	r, err := a.privacy.StartDataRequest(ctx, id)
	if err != nil {
		return r, store.Subject{}, classify(err)
	}
	addr, err := a.svc.Address(r)
	if err != nil || addr == "" {
		if err == nil {
			err = errors.New("the request has no address")
		}
		return r, store.Subject{}, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
	}
	return r, store.Subject{TeamID: r.TeamID, Address: addr}, nil
}

// StartDataRequest marks the request running and returns its type. A
// missing request is a permanent error.
func (a *Activities) StartDataRequest(ctx context.Context, in contract.DataRequestInput) (contract.StartDataRequestResult, error) {
	r, err := a.privacy.StartDataRequest(ctx, in.RequestID)
	if err != nil {
		return contract.StartDataRequestResult{}, classify(err)
	}
	ended := r.Status == store.DataRequestCompleted || r.Status == store.DataRequestFailed
	return contract.StartDataRequestResult{Type: r.Type, Ended: ended}, nil
}

// ExportDataRequest builds the archive of an export request and completes
// it. A retry rebuilds the archive from the start.
func (a *Activities) ExportDataRequest(ctx context.Context, in contract.DataRequestInput) error {
	r, sub, err := a.subject(ctx, in.RequestID)
	if err != nil {
		return err
	}
	exp, err := a.svc.BuildExport(ctx, r, sub.Address, a.now())
	if errors.Is(err, ErrNoKeys) {
		return temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
	}
	if err != nil {
		return fmt.Errorf("exporting data request %s: %w", r.ID, err)
	}
	_, err = a.privacy.FinishDataRequest(ctx, r.ID, store.DataRequestOutcome{Found: exp.Found,
		ArchiveSize: &exp.Size, ExpiresAt: &exp.ExpiresAt})
	return err
}

// EraseDataRequest cancels the scheduled emails to or from the address
// (through the cancel path of the API, waking their workflows), stops the
// emails still being sent to it and restarts them for their other
// recipients (stopInFlight), then deletes or anonymises everything the team holds about it in PostgreSQL
// (store.EraseSubject) and records the counts of the first run. A rerun
// after a crash finishes the job.
func (a *Activities) EraseDataRequest(ctx context.Context, in contract.DataRequestInput) error {
	r, sub, err := a.subject(ctx, in.RequestID)
	if err != nil {
		return err
	}
	canceled := 0
	for {
		ids, err := a.privacy.SubjectScheduledEmails(ctx, sub, 100)
		if err != nil {
			return err
		}
		for _, id := range ids {
			ref, err := a.emails.CancelEmail(ctx, sub.TeamID, id)
			var se *store.StateError
			if errors.As(err, &se) || errors.Is(err, store.ErrNotFound) {
				continue // sent or gone meanwhile
			}
			if err != nil {
				return err
			}
			canceled++
			if ref.Started && a.waker != nil {
				wctx, cancel := context.WithTimeout(ctx, dataRequestCancelTimeout)
				if err := a.waker.Wake(wctx, ref, nil); err != nil {
					a.logger.Warn("waking the workflow of a canceled email", "team_id", sub.TeamID,
						"email_id", id, "err", err)
				}
				cancel()
			}
		}
		if len(ids) < 100 {
			break
		}
	}
	inFlight, err := a.stopInFlight(ctx, r.ID, sub)
	if err != nil {
		return fmt.Errorf("stopping the emails in flight of data request %s: %w", r.ID, err)
	}
	counts, err := a.privacy.EraseSubject(ctx, sub, 0)
	if err != nil {
		return fmt.Errorf("erasing data request %s: %w", r.ID, err)
	}
	if err := a.restartErased(ctx, r.ID, sub.TeamID); err != nil {
		return fmt.Errorf("restarting the emails in flight of data request %s: %w", r.ID, err)
	}
	counts[store.CanceledEmails] = canceled
	counts[store.InFlightEmails] = inFlight
	// Earlier requests about the same person keep it sealed (and an
	// export its archive): forget them too.
	earlier, err := a.privacy.SealedDataRequests(ctx, sub.TeamID, r.ID)
	if err != nil {
		return err
	}
	svc := a.svc
	for _, e := range earlier {
		addr, err := svc.Address(e)
		if err != nil {
			a.logger.Warn("opening the address of a data request", "team_id", sub.TeamID, "err", err)
			continue
		}
		if addr != sub.Address {
			continue
		}
		if err := a.privacy.ForgetDataRequest(ctx, sub.TeamID, e.ID); err != nil {
			return err
		}
		counts[ForgottenDataRequests]++
	}
	return a.privacy.SetDataRequestFound(ctx, r.ID, counts)
}

// EraseSubjectHistory destroys the address's key of the Temporal payload
// codec (ActivitiesConfig.Eraser), when there is one.
func (a *Activities) EraseSubjectHistory(ctx context.Context, in contract.DataRequestInput) error {
	if a.eraser == nil {
		return nil
	}
	_, sub, err := a.subject(ctx, in.RequestID)
	if err != nil {
		return err
	}
	if err := a.eraser.Erase(ctx, sub.TeamID, sub.Address); err != nil {
		return fmt.Errorf("erasing the address from workflow histories: %w", err)
	}
	return nil
}

// FinishDataRequest ends a request completed (an erasure then forgets its
// address) or failed, once; the audit log records it.
func (a *Activities) FinishDataRequest(ctx context.Context, in contract.FinishDataRequestInput) error {
	_, err := a.privacy.FinishDataRequest(ctx, in.RequestID, store.DataRequestOutcome{Failed: in.Reason != "",
		Reason: in.Reason})
	return classify(err)
}

// stopInFlight brings every email still being sent to the erased address
// to a state that survives the loss of the address's codec key: the
// payloads of its workflow's history are encrypted under that key, so
// after the erasure the workflow could not go on and the email's other
// recipients would never get an outcome. For each such email it
// terminates the workflow that sends it (the batch's, for an email of a
// batch), ends the address's recipients `canceled` (they are then
// anonymised with the rest of the email), and starts the email, and the
// other open emails of a terminated batch, again under new restart
// workflow IDs, RestartDelay from now; Prepare and Deliver skip the
// recipients that have an outcome, so the new runs' histories name only
// the others and nobody gets the email twice. An email whose workflow
// has not started yet (its outbox entry waits) only has its recipients
// canceled. It returns how many emails it found.
//
// The order makes a rerun after a crash finish the job: terminating
// before canceling means an email is found again until its recipients
// are canceled, and restartErased, run after the anonymisation, restarts
// those canceled whose restart did not happen.
func (a *Activities) stopInFlight(ctx context.Context, requestID uuid.UUID, sub store.Subject) (int, error) {
	found := 0
	for {
		list, err := a.privacy.SubjectInFlightEmails(ctx, sub, inFlightPage)
		if err != nil {
			return found, err
		}
		for _, e := range list {
			if e.Started && a.workflows != nil {
				if err := a.workflows.Terminate(ctx, e.EmailRef, erasedWorkflowReason); err != nil {
					return found, fmt.Errorf("stopping the workflow of email %s: %w", e.ID, err)
				}
			}
			if _, err := a.privacy.CancelSubjectRecipients(ctx, sub, e.ID, requestID); err != nil {
				return found, err
			}
			found++
			if !e.Started || a.workflows == nil {
				continue
			}
			again := []store.InFlightEmail{e}
			if e.BatchID != nil && e.Restarts == 0 {
				// The batch's workflow ended for all of its emails.
				if again, err = a.privacy.OpenBatchEmails(ctx, sub.TeamID, *e.BatchID); err != nil {
					return found, err
				}
			}
			for _, o := range again {
				// Another email of the batch may name the address too.
				if _, err := a.privacy.CancelSubjectRecipients(ctx, sub, o.ID, requestID); err != nil {
					return found, err
				}
				if err := a.restartStopped(ctx, o); err != nil {
					return found, err
				}
			}
		}
		if len(list) < inFlightPage {
			return found, nil
		}
	}
}

// restartErased restarts the emails whose recipient the erasure canceled
// and that still have recipients without an outcome but no running
// workflow: those whose restart a crash of stopInFlight left undone.
func (a *Activities) restartErased(ctx context.Context, requestID uuid.UUID, teamID uuid.UUID) error {
	if a.workflows == nil {
		return nil
	}
	list, err := a.privacy.ErasureCanceledEmails(ctx, teamID, requestID)
	if err != nil {
		return err
	}
	for _, e := range list {
		if !e.Started {
			continue // its workflow starts from the outbox
		}
		running, err := a.workflows.Running(ctx, e.EmailRef)
		if err != nil {
			return fmt.Errorf("asking for the workflow of email %s: %w", e.ID, err)
		}
		if running {
			continue
		}
		if err := a.restartStopped(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// restartStopped starts the next restart of an email whose workflow an
// erasure terminated, RestartDelay from now (or at its scheduled time, if
// later), so that a delivery attempt of the terminated workflow has
// stopped before the new one delivers.
func (a *Activities) restartStopped(ctx context.Context, e store.InFlightEmail) error {
	at := a.now().Add(a.restartDelay)
	if e.ScheduledAt != nil && e.ScheduledAt.After(at) {
		at = *e.ScheduledAt
	}
	next := e.EmailRef
	next.Restarts++
	if err := a.restart(ctx, next, &at); err != nil {
		return fmt.Errorf("restarting the workflow of email %s: %w", e.ID, err)
	}
	a.logger.Info("restarted the workflow of an email whose recipient was erased", "team_id", e.TeamID,
		"email_id", e.ID, "attempt", next.Restarts)
	return nil
}

// restart starts the workflow of restart number ref.Restarts, then
// records it: a crash between the two starts the same ID again, which is
// harmless.
func (a *Activities) restart(ctx context.Context, ref store.EmailRef, at *time.Time) error {
	if err := a.workflows.Restart(ctx, ref, at); err != nil {
		return err
	}
	return a.emails.RecordRestart(ctx, ref.ID, ref.Restarts)
}

// classify makes a missing request a permanent error; anything else stays
// retryable.
func classify(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return contract.Permanent(err)
	}
	return err
}
