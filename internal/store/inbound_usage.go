package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/inmail"
)

// The inbound budget's counters (migration 00039): per team and UTC day,
// the messages its receiving domains received and their bytes. The
// budget itself (inmail.Budget) is the inbound MX's; the store only
// counts.

// inboundUsageDays is the window of the storage count: inbound messages
// are kept 30 days (expiringTables), so the bytes of the last 30 days are
// what is kept, give or take the day retention is part-way through.
const inboundUsageDays = 30

// usageQuery reads a team's inmail.Usage at @day.
const usageQuery = `SELECT
		coalesce((SELECT sum(messages) FROM inbound_usage WHERE team_id = @team AND day = @day), 0)::bigint,
		coalesce((SELECT sum(bytes) FROM inbound_usage WHERE team_id = @team
			AND day > @day::date - @days::int), 0)::bigint,
		coalesce(t.inbound_daily_messages, 0), coalesce(t.inbound_storage_bytes, 0)
	FROM team t WHERE t.id = @team`

func usageDay(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// InboundUsage is what team's receiving domains received at now: today's
// messages (UTC) and the bytes of the last 30 days, with the team's own
// limits. A team that does not exist has none.
func (s *Received) InboundUsage(ctx context.Context, team uuid.UUID, now time.Time) (inmail.Usage, error) {
	var u inmail.Usage
	err := s.pool.QueryRow(ctx, usageQuery, pgx.NamedArgs{"team": team, "day": usageDay(now), "days": inboundUsageDays}).
		Scan(&u.Messages, &u.Bytes, &u.MaxMessages, &u.MaxBytes)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return inmail.Usage{}, fmt.Errorf("reading inbound usage: %w", mapErr(err))
	}
	return u, nil
}

// SetBudget makes Accept count each message for a receiving domain in the
// transaction that stores it and refuse it (inmail.ErrOverBudget) when
// it takes its team over b. Call it before serving.
func (in *Inbound) SetBudget(b inmail.Budget) { in.budget = b }

// countUsage counts m for each team with a recipient at a receiving
// domain, in tx, and fails with inmail.ErrOverBudget when that takes the
// team over its budget. The row lock of the team's day serializes racing
// accepts, so the check sees every message committed before. The rows
// are locked in the order of their team ids, so that two messages for the
// same teams, their recipients in another order, cannot deadlock.
func (in *Inbound) countUsage(ctx context.Context, tx pgx.Tx, m inmail.Message) error {
	day := usageDay(m.ReceivedAt)
	var teams []uuid.UUID
	for _, r := range m.Recipients {
		if t := r.Route.TeamID; r.Route.Kind == inmail.RouteReceiving && !slices.Contains(teams, t) {
			teams = append(teams, t)
		}
	}
	slices.SortFunc(teams, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, t := range teams {
		// A team without a budget counts in a slot taken in turn, without
		// waiting for the team's other accepts; one with a budget (its
		// own, or the default) in slot 0, whose row lock makes the check
		// below exact.
		dm, db := in.budget.Limits(inmail.Usage{})
		var slot int
		err := tx.QueryRow(ctx, `INSERT INTO inbound_usage (team_id, day, slot, messages, bytes)
			SELECT t.id, @day, CASE WHEN @limited::boolean OR t.inbound_daily_messages IS NOT NULL
				OR t.inbound_storage_bytes IS NOT NULL THEN 0 ELSE @slot END, 1, @size
			FROM team t WHERE t.id = @team
			ON CONFLICT (team_id, day, slot) DO UPDATE SET messages = inbound_usage.messages + 1,
				bytes = inbound_usage.bytes + excluded.bytes
			RETURNING slot`,
			pgx.NamedArgs{"team": t, "day": day, "limited": dm > 0 || db > 0, "slot": 1 + int(in.usageSlot.Add(1)%15),
				"size": m.Len()}).Scan(&slot)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the team is gone; its message goes with it
		}
		if err != nil {
			return fmt.Errorf("counting inbound usage: %w", mapErr(err))
		}
		if slot != 0 {
			continue
		}
		var u inmail.Usage
		if err := tx.QueryRow(ctx, usageQuery, pgx.NamedArgs{"team": t, "day": day, "days": inboundUsageDays}).
			Scan(&u.Messages, &u.Bytes, &u.MaxMessages, &u.MaxBytes); err != nil {
			return fmt.Errorf("reading inbound usage: %w", mapErr(err))
		}
		if in.budget.Over(u) {
			return fmt.Errorf("accepting for team %s: %w", t, inmail.ErrOverBudget)
		}
	}
	return nil
}
