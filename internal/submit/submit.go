// Package submit is the one "accept mail" use case shared by the HTTP API
// and the SMTP gateway: it decodes and validates a send request, checks that
// the team may use the sender and recipients, and durably accepts the email
// in one transaction (the email row, its recipients, its first event and an
// outbox entry). The workflow that delivers it is started afterwards by the
// outbox dispatcher, so acceptance never waits on Temporal.
package submit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
)

// Store is the part of the store the service uses.
type Store interface {
	InsertEmail(ctx context.Context, e store.Email) (quotaUsed int64, err error)
	TeamMembers(ctx context.Context, teamID uuid.UUID, emails []string) (map[string]bool, error)
}

// Notifier is told when new outbox entries were committed.
type Notifier interface{ Notify() }

// Sender is the team (and key scope) a submission acts for.
type Sender struct {
	TeamID   uuid.UUID
	KeyID    uuid.UUID
	DomainID *uuid.UUID // a sending key limited to one domain; nil for any
}

// Config wires a Service.
type Config struct {
	Store    Store
	Notifier Notifier // may be nil
	Fetcher  Fetcher  // fetches `path` attachments; nil refuses them
	Logger   *slog.Logger
	Now      func() time.Time // nil → time.Now
}

// Service accepts email. Safe for concurrent use.
type Service struct {
	store  Store
	notify Notifier
	fetch  Fetcher
	logger *slog.Logger
	now    func() time.Time
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, notify: cfg.Notifier, fetch: cfg.Fetcher, logger: cfg.Logger, now: cfg.Now}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Accepted is an email Send accepted.
type Accepted struct {
	ID uuid.UUID
	// QuotaUsed is the team's usage of the month (recipients of accepted
	// emails) including this email.
	QuotaUsed int64
}

// Send validates and accepts one email. Rejections the caller can fix are
// *Error; a send over the team's monthly quota is a *store.QuotaExceededError
// (errors.Is store.ErrQuotaExceeded) and is not accepted; anything else is
// an internal failure. Every recipient (to, cc and bcc, each address once)
// counts against the quota.
func (s *Service) Send(ctx context.Context, from Sender, req SendRequest) (Accepted, error) {
	now := s.now()
	e, err := req.Validate(ctx, ValidateOptions{Now: now, Fetch: s.fetch})
	if err != nil {
		return Accepted{}, err
	}
	if err := s.authorize(ctx, from, e); err != nil {
		return Accepted{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Accepted{}, fmt.Errorf("making email id: %w", err)
	}
	row := toRow(id, from.TeamID, e, now)
	used, err := s.store.InsertEmail(ctx, row)
	if err != nil {
		return Accepted{}, fmt.Errorf("accepting email: %w", err)
	}
	if s.notify != nil {
		s.notify.Notify()
	}
	s.logger.Debug("email accepted", "team_id", from.TeamID, "email_id", id)
	return Accepted{ID: id, QuotaUsed: used}, nil
}

// authorize checks that the team may send from e.From to its recipients.
func (s *Service) authorize(ctx context.Context, from Sender, e Email) error {
	if !sandbox.IsDomain(e.From.Domain) {
		return Errorf(KindForbidden, "from",
			"The %s domain is not verified. Add and verify your domain, or send from %s to test.",
			e.From.Domain, sandbox.Sender)
	}
	if !strings.EqualFold(e.From.Addr(), sandbox.Sender) {
		return Errorf(KindForbidden, "from",
			"The sandbox domain %s can only send from %s.", sandbox.Domain, sandbox.Sender)
	}
	// The sandbox sender writes to the sandbox addresses and to the team's
	// own members, nobody else.
	var others []string
	for _, list := range [][]Address{e.To, e.Cc, e.Bcc} {
		for _, a := range list {
			if _, ok := sandbox.Outcome(a.Addr()); !ok {
				others = append(others, a.Addr())
			}
		}
	}
	if len(others) == 0 {
		return nil
	}
	members, err := s.store.TeamMembers(ctx, from.TeamID, others)
	if err != nil {
		return fmt.Errorf("checking team members: %w", err)
	}
	for _, o := range others {
		if !members[strings.ToLower(o)] {
			return Errorf(KindForbidden, "to",
				"You can only send testing emails from %s to your own team's addresses or to the sandbox "+
					"addresses delivered@, bounced@, complained@ and suppressed@%s. To send to %s, verify a domain.",
				sandbox.Sender, sandbox.Domain, o)
		}
	}
	return nil
}

func toRow(id, team uuid.UUID, e Email, now time.Time) store.Email {
	row := store.Email{
		ID:           id,
		TeamID:       team,
		From:         e.From.String(),
		FromDomain:   e.From.Domain,
		To:           display(e.To),
		Cc:           display(e.Cc),
		Bcc:          display(e.Bcc),
		ReplyTo:      display(e.ReplyTo),
		Subject:      e.Subject,
		GenerateText: e.GenerateText,
		ScheduledAt:  e.ScheduledAt,
		LastEvent:    store.EventQueued,
		CreatedAt:    now.UTC(),
	}
	if e.ScheduledAt != nil {
		row.LastEvent = store.EventScheduled
	}
	if e.HTML != "" {
		row.HTML = &e.HTML
	}
	if e.Text != "" || !e.GenerateText {
		row.Text = &e.Text
	}
	for _, h := range e.Headers {
		row.Headers = append(row.Headers, store.Header{Name: h.Name, Value: h.Value})
	}
	for _, t := range e.Tags {
		row.Tags = append(row.Tags, store.Tag{Name: t.Name, Value: t.Value})
	}
	for _, a := range e.Attachments {
		row.Attachments = append(row.Attachments, store.Attachment{
			Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID, Content: a.Content,
		})
	}
	seen := map[string]bool{}
	for _, g := range []struct {
		kind string
		list []Address
	}{{"to", e.To}, {"cc", e.Cc}, {"bcc", e.Bcc}} {
		for _, a := range g.list {
			key := strings.ToLower(a.Addr())
			if seen[key] {
				continue // one delivery per address, whatever fields name it
			}
			seen[key] = true
			row.Recipients = append(row.Recipients, store.Recipient{
				Address: a.Addr(), Kind: g.kind, Domain: a.Domain, Status: row.LastEvent,
			})
		}
	}
	return row
}

func display(list []Address) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	return out
}
