package submit

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/received"
	"github.com/posthaste/posthaste/internal/store"
)

// SentAttachment is one attachment of a sent email, as Resend's
// GET /emails/{id}/attachments lists it.
type SentAttachment struct {
	// ID names the attachment for good: it is derived from the email's id
	// and the attachment's place in it (attachmentID).
	ID                 uuid.UUID
	Filename           string // "" when it has none
	ContentType        string
	ContentDisposition string // "attachment" or "inline"
	ContentID          string // without angle brackets; "" when none
	Content            []byte
}

// attachmentSpace is the name space of the attachment ids (RFC 9562 §5.5).
var attachmentSpace = uuid.MustParse("6f1d7c0e-3b0a-4c55-9a53-5f7e2d0c8a41")

// attachmentID is the id of the attachment at position n of an email.
// Attachments have no row id of their own (API emails keep them by
// position, SMTP emails inside the submitted message), so the id is a
// name-based UUID: stable across reads, unguessable without the email's
// id, and never shared between two emails.
func attachmentID(email uuid.UUID, n int) uuid.UUID {
	name := make([]byte, 0, 24)
	name = append(name, email[:]...)
	name = binary.BigEndian.AppendUint64(name, uint64(n))
	return uuid.NewSHA1(attachmentSpace, name)
}

// sourceLimits bound the parse of a submitted message for its attachments:
// the message was accepted under MaxMessageSize, so only the parts and
// nesting need bounds, those of received mail.
var sourceLimits = received.Limits{MaxBytes: MaxMessageSize + 1}

// Attachments returns the attachments of the team's email, in order:
// those accepted over the API, or those of the message submitted over
// SMTP, parsed out of it with the walker of received mail.
// store.ErrNotFound when the team has no such email.
func (s *Emails) Attachments(ctx context.Context, team, id uuid.UUID) ([]SentAttachment, error) {
	c, err := s.store.SentContent(ctx, team, id)
	if err != nil {
		return nil, err
	}
	out := make([]SentAttachment, 0, len(c.Attachments))
	for _, a := range c.Attachments {
		disp := "attachment"
		if a.ContentID != "" && c.HasHTML { // as internal/mime builds it
			disp = "inline"
		}
		out = append(out, SentAttachment{ID: attachmentID(id, a.Position), Filename: a.Filename,
			ContentType: a.ContentType, ContentDisposition: disp, ContentID: a.ContentID, Content: a.Content})
	}
	if c.Source == nil {
		return out, nil
	}
	m, err := received.Parse(c.Source, sourceLimits)
	if err != nil {
		return nil, fmt.Errorf("parsing the submitted message of email %s: %w", id, err)
	}
	for i, a := range m.Attachments {
		disp := a.ContentDisposition
		if disp != "inline" {
			disp = "attachment"
		}
		out = append(out, SentAttachment{ID: attachmentID(id, i), Filename: a.Filename, ContentType: a.ContentType,
			ContentDisposition: disp, ContentID: a.ContentID, Content: a.Content})
	}
	return out, nil
}

// Attachment returns one attachment of the team's email by its id;
// store.ErrNotFound when the team has no such email or the email no such
// attachment.
func (s *Emails) Attachment(ctx context.Context, team, id, attachment uuid.UUID) (SentAttachment, error) {
	atts, err := s.Attachments(ctx, team, id)
	if err != nil {
		return SentAttachment{}, err
	}
	for _, a := range atts {
		if a.ID == attachment {
			return a, nil
		}
	}
	return SentAttachment{}, store.ErrNotFound
}
