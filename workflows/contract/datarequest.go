package contract

import (
	"github.com/google/uuid"
)

// Registered names of the activities of DataRequest.
const (
	StartDataRequestName    = "StartDataRequest"
	ExportDataRequestName   = "ExportDataRequest"
	EraseDataRequestName    = "EraseDataRequest"
	EraseSubjectHistoryName = "EraseSubjectHistory"
	FinishDataRequestName   = "FinishDataRequest"
)

// DataRequestExport is the type of an export request
// (StartDataRequestResult.Type; store.DataRequestExport).
const DataRequestExport = "export"

// DataRequestInput names a data request.
type DataRequestInput struct {
	RequestID uuid.UUID
}

// StartDataRequestResult is what the workflow needs to know of a request.
type StartDataRequestResult struct {
	Type string
	// Ended: the request already completed or failed.
	Ended bool
}

// FinishDataRequestInput ends a request.
type FinishDataRequestInput struct {
	RequestID uuid.UUID
	// Reason, when set, ends the request failed.
	Reason string
}
