package client

import (
	"context"
	"net/http"
)

// EmailsService sends and manages emails.
type EmailsService struct{ c *Client }

// Tag is a name/value label on an email.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Attachment is a file carried by an email: Content (sent base64-encoded)
// or Path (an http(s) URL the server fetches).
type Attachment struct {
	Content     []byte `json:"content,omitempty"`
	Path        string `json:"path,omitempty"`
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
}

// SendEmailRequest is a send object. From, To, Subject and HTML or Text
// are required. ScheduledAt is ISO 8601 or natural language ("in 1 hour",
// "tomorrow at 9am").
type SendEmailRequest struct {
	From        string            `json:"from"`
	To          []string          `json:"to"`
	Subject     string            `json:"subject"`
	HTML        string            `json:"html,omitempty"`
	Text        *string           `json:"text,omitempty"` // nil: derived from HTML; "": no text part
	Cc          []string          `json:"cc,omitempty"`
	Bcc         []string          `json:"bcc,omitempty"`
	ReplyTo     []string          `json:"reply_to,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Attachments []Attachment      `json:"attachments,omitempty"`
	Tags        []Tag             `json:"tags,omitempty"`
	ScheduledAt string            `json:"scheduled_at,omitempty"`
}

// SendOptions modify one send; nil means none.
type SendOptions struct {
	// IdempotencyKey makes retries safe: the same key with the same
	// request within 24 hours returns the first answer and sends nothing.
	IdempotencyKey string
}

// SendEmailResponse is the answer to a send.
type SendEmailResponse struct {
	ID string `json:"id"`
}

// Send accepts one email.
func (s *EmailsService) Send(ctx context.Context, req *SendEmailRequest, opts *SendOptions) (*SendEmailResponse, error) {
	var h map[string]string
	if opts != nil && opts.IdempotencyKey != "" {
		h = map[string]string{"Idempotency-Key": opts.IdempotencyKey}
	}
	var out SendEmailResponse
	if err := s.c.do(ctx, http.MethodPost, "/emails", nil, req, h, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchValidation is the x-batch-validation mode of a batch.
type BatchValidation string

// Batch validation modes.
const (
	// BatchStrict accepts all emails or none (the default).
	BatchStrict BatchValidation = "strict"
	// BatchPermissive accepts the valid emails and lists the others.
	BatchPermissive BatchValidation = "permissive"
)

// BatchOptions modify one batch; nil means none.
type BatchOptions struct {
	IdempotencyKey string
	Validation     BatchValidation // "" leaves the server's default (strict)
}

// BatchError is an email a permissive batch did not accept.
type BatchError struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

// BatchResponse lists the accepted emails in request order and, in
// permissive mode, the refused ones.
type BatchResponse struct {
	Data   []SendEmailResponse `json:"data"`
	Errors []BatchError        `json:"errors"`
}

// SendBatch accepts 1..100 emails (without attachments) in one call.
func (s *EmailsService) SendBatch(ctx context.Context, reqs []SendEmailRequest, opts *BatchOptions) (*BatchResponse, error) {
	h := map[string]string{}
	if opts != nil {
		if opts.IdempotencyKey != "" {
			h["Idempotency-Key"] = opts.IdempotencyKey
		}
		if opts.Validation != "" {
			h["X-Batch-Validation"] = string(opts.Validation)
		}
	}
	if reqs == nil {
		reqs = []SendEmailRequest{}
	}
	var out BatchResponse
	if err := s.c.do(ctx, http.MethodPost, "/emails/batch", nil, reqs, h, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Recipient is one recipient's own state (a Posthaste extension).
type Recipient struct {
	Email  string `json:"email"`
	Status string `json:"status"`
}

// Email is an email object. Timestamps are RFC 3339 strings; HTML and Text
// are nil in lists.
type Email struct {
	Object      string      `json:"object"`
	ID          string      `json:"id"`
	From        string      `json:"from"`
	To          []string    `json:"to"`
	Cc          []string    `json:"cc"`
	Bcc         []string    `json:"bcc"`
	ReplyTo     []string    `json:"reply_to"`
	Subject     string      `json:"subject"`
	HTML        *string     `json:"html"`
	Text        *string     `json:"text"`
	CreatedAt   string      `json:"created_at"`
	ScheduledAt *string     `json:"scheduled_at"`
	LastEvent   string      `json:"last_event"`
	Tags        []Tag       `json:"tags"`
	MessageID   *string     `json:"message_id"`
	Recipients  []Recipient `json:"recipients"`
}

// Get returns one email.
func (s *EmailsService) Get(ctx context.Context, id string) (*Email, error) {
	var out Email
	if err := s.c.do(ctx, http.MethodGet, "/emails/"+escape(id), nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns a page of emails, newest first.
func (s *EmailsService) List(ctx context.Context, opts *ListOptions) (*List[Email], error) {
	var out List[Email]
	if err := s.c.do(ctx, http.MethodGet, "/emails", opts.query(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateEmailRequest reschedules an email.
type UpdateEmailRequest struct {
	ScheduledAt string `json:"scheduled_at"`
}

// Update moves a scheduled email to a new time. Emails that were sent or
// canceled answer a validation_error.
func (s *EmailsService) Update(ctx context.Context, id string, req *UpdateEmailRequest) (*ObjectRef, error) {
	var out ObjectRef
	if err := s.c.do(ctx, http.MethodPatch, "/emails/"+escape(id), nil, req, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel cancels a scheduled email.
func (s *EmailsService) Cancel(ctx context.Context, id string) (*ObjectRef, error) {
	var out ObjectRef
	if err := s.c.do(ctx, http.MethodPost, "/emails/"+escape(id)+"/cancel", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
