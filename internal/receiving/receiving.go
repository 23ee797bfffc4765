// Package receiving is the area of inbound mail. Its Service is received
// mail as the API and the dashboard see it: a team's received emails,
// their attachments and raw messages, and its inbound budget; it is the
// one way the HTTP API and the dashboard read what was received. It also
// holds the activity of the inbound workflow, ProcessInbound (Activities):
// acting on each message the MX accepted, whether a bounce or complaint
// about an email we sent (recorded on the email, the address suppressed),
// a mail to a mailto unsubscribe address, or mail to a receiving domain
// (stored, parsed, with an email.received event). The MX listener
// (internal/mxlisten), the routing of recipients (internal/inroute) and
// the parsers (internal/reports, internal/received) are elsewhere.
package receiving

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/store"
)

// MaxInlineBytes bounds the inline images one HTML body embeds as data
// URIs (InlineImages); larger ones keep their cid: reference.
const MaxInlineBytes = 10 << 20

// Store is the part of the store the Service reads (*store.Received).
type Store interface {
	ListReceivedEmails(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.ReceivedEmail, bool, error)
	GetReceivedEmail(ctx context.Context, teamID, id uuid.UUID) (store.ReceivedEmail, error)
	ReceivedAttachmentContent(ctx context.Context, teamID, emailID, id uuid.UUID) (store.ReceivedAttachment, error)
	ReceivedRaw(ctx context.Context, teamID, id uuid.UUID) ([]byte, error)
	InboundUsage(ctx context.Context, team uuid.UUID, now time.Time) (inmail.Usage, error)
}

var _ Store = (*store.Received)(nil)

// Service reads a team's received mail. Errors: store.ErrNotFound for what
// the team does not have. Safe for concurrent use.
type Service struct {
	store Store
}

// New returns a Service over the store's received mail (st.Received).
func New(st Store) *Service { return &Service{store: st} }

// List lists the team's received emails, newest first.
func (s *Service) List(ctx context.Context, team uuid.UUID, p store.Page) ([]store.ReceivedEmail, bool, error) {
	return s.store.ListReceivedEmails(ctx, team, p)
}

// Get returns the team's received email with this id.
func (s *Service) Get(ctx context.Context, team, id uuid.UUID) (store.ReceivedEmail, error) {
	return s.store.GetReceivedEmail(ctx, team, id)
}

// Attachment returns an attachment of the team's received email, with its
// content.
func (s *Service) Attachment(ctx context.Context, team, email, id uuid.UUID) (store.ReceivedAttachment, error) {
	return s.store.ReceivedAttachmentContent(ctx, team, email, id)
}

// Raw returns the team's received email as it arrived.
func (s *Service) Raw(ctx context.Context, team, id uuid.UUID) ([]byte, error) {
	return s.store.ReceivedRaw(ctx, team, id)
}

// InlineOptions choose which inline attachments InlineImages embeds.
type InlineOptions struct {
	// ImagesOnly embeds only attachments of an image/ content type (the
	// dashboard's preview); otherwise any inline attachment the HTML
	// refers to (the API's html_format=data_uri, as Resend does).
	ImagesOnly bool
}

// InlineImages returns e's HTML body (e has one) with its cid: references
// to e's inline attachments replaced by data: URIs, at most
// MaxInlineBytes of them.
func (s *Service) InlineImages(ctx context.Context, e store.ReceivedEmail, o InlineOptions) (string, error) {
	html := *e.HTML
	budget := MaxInlineBytes
	for _, a := range e.Attachments {
		if a.ContentID == "" || a.Size > budget || (o.ImagesOnly && !strings.HasPrefix(a.ContentType, "image/")) ||
			!strings.Contains(html, "cid:"+a.ContentID) {
			continue
		}
		full, err := s.store.ReceivedAttachmentContent(ctx, e.TeamID, e.ID, a.ID)
		if err != nil {
			return "", err
		}
		budget -= a.Size
		html = strings.ReplaceAll(html, "cid:"+a.ContentID,
			"data:"+a.ContentType+";base64,"+base64.StdEncoding.EncodeToString(full.Content))
	}
	return html, nil
}

// Usage is what the team received on the day of now and keeps stored, the
// figures its inbound budget (inmail.Budget) limits.
func (s *Service) Usage(ctx context.Context, team uuid.UUID, now time.Time) (inmail.Usage, error) {
	return s.store.InboundUsage(ctx, team, now)
}
