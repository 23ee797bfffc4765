package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Bounce is Resend's bounce object (after Amazon SES's): the detail of a
// `bounced` event as the email.bounced webhook and the API show it.
type Bounce struct {
	Type           string   `json:"type"`    // Permanent, Transient or Undetermined
	SubType        string   `json:"subType"` // General, NoEmail, MailboxFull, ...
	Message        string   `json:"message"`
	DiagnosticCode []string `json:"diagnosticCode"` // never nil
}

// BounceOf reads the bounce object from the detail of a `bounced` event.
// The detail has the object's keys; diagnosticCode may have come through
// JSON ([]any). Events recorded before diagnosticCode existed carry the
// reply in message, which then stands for it; a missing type is
// Undetermined.
func BounceOf(detail map[string]any) Bounce {
	str := func(k string) string { s, _ := detail[k].(string); return s }
	b := Bounce{Type: str("type"), SubType: str("subType"), Message: str("message"), DiagnosticCode: []string{}}
	if b.Type == "" {
		b.Type = "Undetermined"
	}
	if b.SubType == "" {
		b.SubType = "Undetermined"
	}
	switch d := detail["diagnosticCode"].(type) {
	case []string:
		b.DiagnosticCode = append(b.DiagnosticCode, d...)
	case []any:
		for _, v := range d {
			if s, ok := v.(string); ok {
				b.DiagnosticCode = append(b.DiagnosticCode, s)
			}
		}
	case nil:
		if _, ok := detail["diagnosticCode"]; !ok && b.Message != "" {
			b.DiagnosticCode = append(b.DiagnosticCode, b.Message)
		}
	}
	return b
}

// Bounces returns the bounce object of every bounced recipient of a team's
// email, by recipient address; empty for other teams' emails.
func (s *Emails) Bounces(ctx context.Context, teamID, emailID uuid.UUID) (map[string]Bounce, error) {
	rows, err := s.pool.Query(ctx, `SELECT ev.recipient, ev.detail FROM email_event ev
		JOIN email e ON e.id = ev.email_id
		WHERE ev.email_id = @id AND e.team_id = @team AND ev.type = 'bounced' AND ev.recipient IS NOT NULL`,
		pgx.NamedArgs{"id": emailID, "team": teamID})
	if err != nil {
		return nil, fmt.Errorf("reading bounces of %s: %w", emailID, mapErr(err))
	}
	out := map[string]Bounce{}
	var (
		rcpt   string
		detail map[string]any
	)
	_, err = pgx.ForEachRow(rows, []any{&rcpt, &detail}, func() error {
		out[rcpt] = BounceOf(detail)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading bounces of %s: %w", emailID, mapErr(err))
	}
	return out, nil
}
