package receiving

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/received"
	"github.com/posthaste/posthaste/internal/store"
)

// receive stores a message's copy for each receiving domain of its
// recipients (parsed with internal/received, bounded) and records an
// email.received event for each; it returns how many it stored now. A
// copy already stored (a retried step) is neither stored nor announced
// again. A message too large to parse is stored with its header fields
// only: the raw message stays downloadable.
func (a *Activities) receive(ctx context.Context, m store.InboundMessage) (int, error) {
	var (
		domains []uuid.UUID
		rcpts   = map[uuid.UUID][]string{}
	)
	for _, r := range m.Recipients {
		if r.Kind != inmail.RouteReceiving {
			continue
		}
		if !slices.Contains(domains, r.DomainID) {
			domains = append(domains, r.DomainID)
		}
		rcpts[r.DomainID] = append(rcpts[r.DomainID], r.Address)
	}
	if len(domains) == 0 {
		return 0, nil
	}
	parsed, err := received.Parse(m.Raw, received.Limits{})
	if errors.Is(err, received.ErrTooLarge) {
		parsed, err = received.Parse(headerOf(m.Raw), received.Limits{})
	}
	if err != nil {
		// Not a message at all: store what the envelope says.
		parsed = received.Email{From: m.MailFrom, To: []string{}, Cc: []string{}, ReplyTo: []string{}}
	}
	stored := 0
	for _, d := range domains {
		id, err := uuid.NewV7()
		if err != nil {
			return stored, err
		}
		e := store.ReceivedEmail{ID: id, TeamID: m.TeamID, DomainID: d, InboundID: m.ID, From: parsed.From,
			To: parsed.To, Cc: parsed.Cc, Bcc: []string{}, ReplyTo: parsed.ReplyTo, ReceivedFor: rcpts[d],
			Subject: parsed.Subject, MessageID: parsed.MessageID, Text: parsed.Text, HTML: parsed.HTML,
			Headers: parsed.Headers, CreatedAt: m.ReceivedAt}
		for _, at := range parsed.Attachments {
			aid, err := uuid.NewV7()
			if err != nil {
				return stored, err
			}
			e.Attachments = append(e.Attachments, store.ReceivedAttachment{ID: aid, EmailID: id,
				Filename: at.Filename, ContentType: at.ContentType, ContentDisposition: at.ContentDisposition,
				ContentID: at.ContentID, Size: len(at.Content), Content: at.Content})
		}
		_, inserted, err := a.received.InsertReceivedEmail(ctx, e)
		if err != nil {
			return stored, fmt.Errorf("storing received email of %s: %w", m.ID, err)
		}
		if inserted {
			stored++
		}
	}
	if stored > 0 && a.outbox != nil {
		a.outbox.Notify() // the events may have queued webhook messages
	}
	return stored, nil
}

// headerOf is the header of a raw message, up to the first empty line.
func headerOf(raw []byte) []byte {
	for i := 0; i+3 < len(raw); i++ {
		if raw[i] == '\r' && raw[i+1] == '\n' && raw[i+2] == '\r' && raw[i+3] == '\n' {
			return raw[:i+4]
		}
	}
	return raw
}
