package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// inFlightPage is how many emails in flight to an erased address one
// query lists.
const inFlightPage = 100

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
func (a *DataRequests) stopInFlight(ctx context.Context, requestID uuid.UUID, sub store.Subject) (int, error) {
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
func (a *DataRequests) restartErased(ctx context.Context, requestID uuid.UUID, teamID uuid.UUID) error {
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
func (a *DataRequests) restartStopped(ctx context.Context, e store.InFlightEmail) error {
	at := a.now().Add(a.restartDelay())
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

func (a *DataRequests) restartDelay() time.Duration {
	if d := a.dataRequestConfig.RestartDelay; d > 0 {
		return d
	}
	return DefaultRestartDelay
}
