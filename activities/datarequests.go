package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// ForgottenDataRequests counts, in an erasure's found, the earlier
// requests about the same address whose address and archive it removed.
const ForgottenDataRequests = "data_requests"

// dataRequestCancelTimeout bounds waking one canceled email's workflow.
const dataRequestCancelTimeout = 10 * time.Second

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

// DataRequestConfig wires the data request activities.
type DataRequestConfig struct {
	// Eraser erases the address from Temporal histories; nil erases
	// nothing there (histories without personal-data encryption).
	Eraser SubjectEraser
	// Waker wakes the workflows of scheduled emails an erasure cancels;
	// nil leaves them to find their email gone when their time comes.
	Waker EmailWaker
	// ArchiveTTL is how long export archives can be downloaded
	// (POSTHASTE_DATA_EXPORT_TTL); 0 → datareq.DefaultArchiveTTL.
	ArchiveTTL time.Duration
	// RestartDelay is how long after an erasure stopped the workflow of an
	// email still being sent to the address its restart waits: long
	// enough for a delivery attempt of the stopped workflow to notice, at
	// its next heartbeat, that it was terminated (the delivery policy's
	// heartbeat timeout, POSTHASTE_DELIVERY_HEARTBEAT). 0 →
	// DefaultRestartDelay.
	RestartDelay time.Duration
}

// DefaultRestartDelay is the default DataRequestConfig.RestartDelay: the
// default heartbeat timeout of Deliver.
const DefaultRestartDelay = time.Minute

// erasedWorkflowReason is the reason an erasure terminates a workflow
// with; it is recorded in the history in the clear.
const erasedWorkflowReason = "A recipient's data is being erased: the email's delivery goes on in a new workflow."

// subject loads a running request and opens its address.
func (a *DataRequests) subject(ctx context.Context, id uuid.UUID) (store.DataRequest, store.Subject, error) {
	r, err := a.privacy.StartDataRequest(ctx, id)
	if err != nil {
		return r, store.Subject{}, classify(err)
	}
	addr, err := a.requests.Address(r)
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
func (a *DataRequests) StartDataRequest(ctx context.Context, in contract.DataRequestInput) (contract.StartDataRequestResult, error) {
	r, err := a.privacy.StartDataRequest(ctx, in.RequestID)
	if err != nil {
		return contract.StartDataRequestResult{}, classify(err)
	}
	ended := r.Status == store.DataRequestCompleted || r.Status == store.DataRequestFailed
	return contract.StartDataRequestResult{Type: r.Type, Ended: ended}, nil
}

// ExportDataRequest builds the archive of an export request and completes
// it. A retry rebuilds the archive from the start.
func (a *DataRequests) ExportDataRequest(ctx context.Context, in contract.DataRequestInput) error {
	r, sub, err := a.subject(ctx, in.RequestID)
	if err != nil {
		return err
	}
	exp, err := a.requests.BuildExport(ctx, r, sub.Address, a.now())
	if errors.Is(err, datareq.ErrNoKeys) {
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
func (a *DataRequests) EraseDataRequest(ctx context.Context, in contract.DataRequestInput) error {
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
			if ref.Started && a.dataRequestConfig.Waker != nil {
				wctx, cancel := context.WithTimeout(ctx, dataRequestCancelTimeout)
				if err := a.dataRequestConfig.Waker.Wake(wctx, ref, nil); err != nil {
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
	svc := a.requests
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
// codec (Config.DataRequests.Eraser), when there is one.
func (a *DataRequests) EraseSubjectHistory(ctx context.Context, in contract.DataRequestInput) error {
	if a.dataRequestConfig.Eraser == nil {
		return nil
	}
	_, sub, err := a.subject(ctx, in.RequestID)
	if err != nil {
		return err
	}
	if err := a.dataRequestConfig.Eraser.Erase(ctx, sub.TeamID, sub.Address); err != nil {
		return fmt.Errorf("erasing the address from workflow histories: %w", err)
	}
	return nil
}

// FinishDataRequest ends a request completed (an erasure then forgets its
// address) or failed, once; the audit log records it.
func (a *DataRequests) FinishDataRequest(ctx context.Context, in contract.FinishDataRequestInput) error {
	_, err := a.privacy.FinishDataRequest(ctx, in.RequestID, store.DataRequestOutcome{Failed: in.Reason != "",
		Reason: in.Reason})
	return classify(err)
}
