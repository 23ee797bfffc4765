package store

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EmailFilter narrows an email listing; zero fields do not filter.
type EmailFilter struct {
	Status    string // last_event
	Recipient string // substring of any recipient address, case-insensitive
	Domain    string // sender domain
	Since     time.Time
	Until     time.Time
}

// ListEmailsFiltered lists a team's emails, newest first, without bodies.
func (s *Emails) ListEmailsFiltered(ctx context.Context, teamID uuid.UUID, f EmailFilter, p Page) ([]Email, bool, error) {
	q := `SELECT ` + emailListColumns + ` FROM email WHERE team_id = @team`
	args := pgx.NamedArgs{"team": teamID}
	if f.Status != "" {
		q += ` AND last_event = @status`
		args["status"] = f.Status
	}
	if f.Domain != "" {
		q += ` AND from_domain = @domain`
		args["domain"] = strings.ToLower(f.Domain)
	}
	if f.Recipient != "" {
		q += ` AND EXISTS (SELECT 1 FROM unnest(rcpt_addrs) AS r(address) WHERE r.address ILIKE @rcpt)`
		args["rcpt"] = "%" + escapeLike(f.Recipient) + "%"
	}
	if !f.Since.IsZero() {
		q += ` AND created_at >= @since`
		args["since"] = f.Since
	}
	if !f.Until.IsZero() {
		q += ` AND created_at < @until`
		args["until"] = f.Until
	}
	return listPage(ctx, s.Store, p, q, args, scanEmail)
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// SenderDomains lists the sender domains a team has used, for filters.
func (s *Emails) SenderDomains(ctx context.Context, teamID uuid.UUID) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT from_domain FROM email WHERE team_id = @team ORDER BY 1`,
		pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}
