package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// MaxBatch is the largest number of emails in one batch (API.md).
const MaxBatch = 100

func tooManyEmails(n int) error {
	return Errorf(KindValidation, "", "A batch holds between 1 and %d emails; this one has %d.", MaxBatch, n)
}

// BatchMode is the x-batch-validation mode of a batch.
type BatchMode string

// Batch validation modes.
const (
	// BatchStrict accepts all emails or none; the first invalid email's
	// error names its index.
	BatchStrict BatchMode = "strict"
	// BatchPermissive accepts the valid emails and reports the others.
	BatchPermissive BatchMode = "permissive"
)

// BatchItem is one element of a batch request: the decoded send object or
// the error that decoding it gave.
type BatchItem struct {
	Request SendRequest
	Err     error
}

// DecodeBatch decodes the body of POST /emails/batch: a JSON array of send
// objects. A body that is not an array is an *Error; an element that does
// not decode keeps its error in its item, so that permissive batches can
// report it by index.
func DecodeBatch(data []byte) ([]BatchItem, error) {
	// Validated once here; the splitting below relies on it.
	if !json.Valid(data) {
		return nil, Errorf(KindValidation, "", "The request body is not valid JSON.")
	}
	raws, err := arrayElements("", data, MaxBatch)
	var tm *tooMany
	if errors.As(err, &tm) {
		return nil, tooManyEmails(tm.N)
	}
	if err != nil {
		return nil, Errorf(KindValidation, "", "The request body must be a JSON array of emails.")
	}
	items := make([]BatchItem, len(raws))
	for i, raw := range raws {
		var r SendRequest
		if err := r.decodeValid(raw); err != nil {
			items[i].Err = err
		} else {
			items[i].Request = r
		}
	}
	return items, nil
}

// BatchOptions modify one batch.
type BatchOptions struct {
	IdempotencyKey *string
	Mode           BatchMode // "" is BatchStrict
}

// BatchError is a rejected email of a permissive batch.
type BatchError struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

// BatchResult is the answer to a batch: the ids of the accepted emails in
// request order and, in permissive mode, the rejected ones.
type BatchResult struct {
	Data   []SendResult `json:"data"`
	Errors []BatchError `json:"errors,omitempty"`
	// Replayed: see SendResult.
	Replayed bool `json:"-"`
	// QuotaUsed: see SendResult.
	QuotaUsed int64 `json:"-"`
}

// SendBatch validates and accepts up to MaxBatch emails as one batch: one
// transaction writes every email row and one outbox entry, whose SendBatch
// workflow sends them all. Attachments are refused. In strict mode any
// invalid email rejects the batch with an *Error naming its index; in
// permissive mode the valid emails are accepted and the others listed in
// Errors (a batch with no valid email accepts nothing and is not
// remembered under its idempotency key).
func (s *Service) SendBatch(ctx context.Context, from Sender, items []BatchItem, opts BatchOptions) (BatchResult, error) {
	var res BatchResult
	mode := opts.Mode
	if mode == "" {
		mode = BatchStrict
	}
	if mode != BatchStrict && mode != BatchPermissive {
		return res, Errorf(KindValidation, "x-batch-validation",
			"Invalid `x-batch-validation` header. Use `strict` or `permissive`.")
	}
	if len(items) == 0 || len(items) > MaxBatch {
		return res, tooManyEmails(len(items))
	}
	for i, it := range items {
		if it.Err == nil && len(it.Request.Attachments) > 0 {
			return res, Errorf(KindValidation, fmt.Sprintf("[%d].attachments", i),
				"Attachments are not supported in batch emails (the email at index %d has some). "+
					"Send emails with attachments one at a time with POST /emails.", i)
		}
	}
	// The request as its idempotency key remembers it, if it has one.
	var request []any
	if opts.IdempotencyKey != nil {
		request = append(make([]any, 0, len(items)+1), mode)
		for _, it := range items {
			if it.Err != nil {
				request = append(request, it.Err.Error())
			} else {
				request = append(request, it.Request)
			}
		}
	}
	claim, replayed, err := s.claimOrReplay(ctx, from.TeamID, opts.IdempotencyKey, EndpointBatch, request, &res)
	if err != nil || replayed {
		res.Replayed = replayed
		return res, err
	}
	accepted := false
	defer s.finish(ctx, claim, &accepted)
	if err := s.checkPaused(ctx, from.TeamID); err != nil {
		return res, err
	}

	now := s.now()
	rows := make([]store.Email, 0, len(items))
	res.Data = make([]SendResult, 0, len(items))
	// Each sender domain is loaded once for the whole batch, and its
	// insights read it from there.
	known := senderDomains{}
	templates := map[string]store.Template{}
	topics := map[uuid.UUID]bool{}
	for i, it := range items {
		err := it.Err
		var e Email
		var d *store.Domain
		req := it.Request
		if err == nil {
			req, err = s.applyTemplate(ctx, from.TeamID, req, templates)
		}
		if err == nil {
			e, err = req.Validate(ctx, ValidateOptions{Now: now})
		}
		if err == nil {
			d, err = s.authorize(ctx, from, e, false, known)
		}
		if err == nil {
			err = s.checkTopic(ctx, from.TeamID, e.TopicID, topics)
		}
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				return BatchResult{}, err
			}
			if mode == BatchStrict {
				return BatchResult{}, &Error{Kind: se.Kind, Field: se.Field,
					Message: fmt.Sprintf("The email at index %d is invalid: %s", i, se.Message)}
			}
			res.Errors = append(res.Errors, BatchError{Index: i, Message: se.Message})
			continue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return BatchResult{}, fmt.Errorf("making email id: %w", err)
		}
		row := toRow(id, from.TeamID, e, now)
		row.DomainID = domainID(d)
		rows = append(rows, row)
		res.Data = append(res.Data, SendResult{ID: id})
	}
	if mode == BatchPermissive && res.Errors == nil {
		res.Errors = []BatchError{}
	}
	if len(rows) == 0 {
		return res, nil
	}
	batchID, err := uuid.NewV7()
	if err != nil {
		return BatchResult{}, fmt.Errorf("making batch id: %w", err)
	}
	a := store.Acceptance{Emails: rows, BatchID: &batchID, Idempotency: claim.stored()}
	if claim != nil {
		if a.Response, err = json.Marshal(res); err != nil {
			return BatchResult{}, fmt.Errorf("encoding response: %w", err)
		}
	}
	if res.QuotaUsed, err = s.accept(ctx, a, known); err != nil {
		return BatchResult{}, err
	}
	accepted = true
	s.logger.Debug("batch accepted", "team_id", from.TeamID, "batch_id", batchID, "emails", len(rows))
	return res, nil
}
