package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SQLSTATEs raised by quota_take (migrations 00004 and 00038): over the
// quota; a fast take that could not prove it fits.
const (
	quotaExceededCode  = "PH429"
	quotaTakeExactCode = "PH430"
)

// errQuotaTakeExactly means a quota take on the fast path found the team
// near its limit: the transaction was aborted and is to be retried with
// an exact take.
var errQuotaTakeExactly = errors.New("quota near its limit: retry the take exactly")

// ErrQuotaExceeded matches a *QuotaExceededError with errors.Is.
var ErrQuotaExceeded = errors.New("monthly quota exceeded")

// QuotaExceededError means accepting the email would pass the team's
// monthly quota; nothing was written.
type QuotaExceededError struct {
	Used int64 // the team's usage of the month, unchanged
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("monthly quota exceeded (%d used)", e.Used)
}

// Is makes errors.Is(err, ErrQuotaExceeded) true.
func (e *QuotaExceededError) Is(target error) bool { return target == ErrQuotaExceeded }

// QuotaMonth is the calendar month (UTC) that usage at t counts against.
func QuotaMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// QuotaUsed returns the recipients a team's accepted emails counted in the
// month of t.
func (s *Accounts) QuotaUsed(ctx context.Context, teamID uuid.UUID, t time.Time) (int64, error) {
	var used int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(used), 0)::bigint FROM quota_usage
		WHERE team_id = @team AND month = @month`,
		pgx.NamedArgs{"team": teamID, "month": QuotaMonth(t)}).Scan(&used)
	return used, mapErr(err)
}

// Plan is a monthly plan of SPEC.md §8.
type Plan struct {
	Name          string
	MonthlyEmails int64
	PriceUSD      int
}

// Plans lists the plans, smallest first.
func (s *Accounts) Plans(ctx context.Context) ([]Plan, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, monthly_emails, price_usd FROM plan ORDER BY monthly_emails`)
	if err != nil {
		return nil, mapErr(err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Plan, error) {
		var p Plan
		err := r.Scan(&p.Name, &p.MonthlyEmails, &p.PriceUSD)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading plans: %w", mapErr(err))
	}
	return ps, nil
}

// SetPlan assigns a plan to a team. ErrNotFound for an unknown team or plan.
func (s *Accounts) SetPlan(ctx context.Context, teamID uuid.UUID, plan string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE team SET plan = @plan WHERE id = @team`,
		pgx.NamedArgs{"team": teamID, "plan": plan})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// SetRateLimit sets a team's request rate (requests per second, burst the
// same); 0 returns the team to the default. ErrNotFound for an unknown team.
func (s *Accounts) SetRateLimit(ctx context.Context, teamID uuid.UUID, perSecond int) error {
	var v *int
	if perSecond > 0 {
		v = &perSecond
	}
	tag, err := s.pool.Exec(ctx, `UPDATE team SET rate_limit = @limit WHERE id = @team`,
		pgx.NamedArgs{"team": teamID, "limit": v})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
