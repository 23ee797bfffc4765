package workflows

import (
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// DataRequestInput starts the DataRequest workflow of one request.
type DataRequestInput struct {
	RequestID uuid.UUID
	// Steps is how long each step retries (a database outage).
	Steps StepPolicy
	// EraseWait is how long an erasure waits, after destroying the
	// address's key of the Temporal payload codec, before it reports
	// completed: the bound of the codec's per-process key cache, after
	// which no process can read the address from a history any more.
	// 0 → DefaultEraseWait.
	EraseWait time.Duration
}

// DefaultEraseWait covers the payload codec's key cache (about 30 s).
const DefaultEraseWait = 35 * time.Second

// dataRequestAttempt bounds one try of building an export or erasing: a
// team with much mail takes a while.
const dataRequestAttempt = 30 * time.Minute

// dataRequestFailedReason is the reason a request that cannot go on shows.
const dataRequestFailedReason = "The request could not be completed."

// DataRequest runs a data subject request (POST /data-requests). An
// export builds the archive and completes the request in one step. An
// erasure cancels the address's scheduled emails and erases it from
// PostgreSQL, then from Temporal histories (datareq.SubjectEraser),
// waits out the codec's key cache on a durable timer, erases PostgreSQL
// once more (what was written meanwhile) and completes the request, which
// then forgets the address. Every step is idempotent and
// retries for Steps.Window; a step that fails for good ends the request
// failed.
func DataRequest(ctx workflow.Context, in DataRequestInput) error {
	short := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(stepAttempt))
	long := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(dataRequestAttempt))
	req := contract.DataRequestInput{RequestID: in.RequestID}
	var st contract.StartDataRequestResult
	if err := workflow.ExecuteLocalActivity(short, contract.StartDataRequestName, req).Get(ctx, &st); err != nil {
		return failDataRequest(short, in.RequestID, err)
	}
	if st.Ended {
		return nil
	}
	if st.Type == contract.DataRequestExport {
		if err := workflow.ExecuteLocalActivity(long, contract.ExportDataRequestName, req).Get(ctx, nil); err != nil {
			return failDataRequest(short, in.RequestID, err)
		}
		return nil
	}
	if err := workflow.ExecuteLocalActivity(long, contract.EraseDataRequestName, req).Get(ctx, nil); err != nil {
		return failDataRequest(short, in.RequestID, err)
	}
	if err := workflow.ExecuteLocalActivity(short, contract.EraseSubjectHistoryName, req).Get(ctx, nil); err != nil {
		return failDataRequest(short, in.RequestID, err)
	}
	wait := in.EraseWait
	if wait <= 0 {
		wait = DefaultEraseWait
	}
	if err := workflow.Sleep(ctx, wait); err != nil {
		return err
	}
	// A second pass finds what was written while the first ran: request
	// log entries of requests then in flight (the log is written up to a
	// second late), a webhook message of a delivery then under way.
	if err := workflow.ExecuteLocalActivity(long, contract.EraseDataRequestName, req).Get(ctx, nil); err != nil {
		return failDataRequest(short, in.RequestID, err)
	}
	return workflow.ExecuteLocalActivity(short, contract.FinishDataRequestName,
		contract.FinishDataRequestInput{RequestID: in.RequestID}).Get(ctx, nil)
}

// failDataRequest ends the request failed after the step error cause and
// returns cause, so the workflow fails too.
func failDataRequest(ctx workflow.Context, id uuid.UUID, cause error) error {
	workflow.GetLogger(ctx).Error("data request failed", "err", cause)
	if err := workflow.ExecuteLocalActivity(ctx, contract.FinishDataRequestName,
		contract.FinishDataRequestInput{RequestID: id, Reason: dataRequestFailedReason}).Get(ctx, nil); err != nil {
		return err
	}
	return cause
}
