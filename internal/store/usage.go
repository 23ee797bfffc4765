package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TeamUsage is what a team has used and may use, as GET /usage answers it.
type TeamUsage struct {
	// PlanEmails is the monthly volume of the team's plan.
	PlanEmails int64
	// RateLimit is the team's own requests per second; 0 is the default.
	RateLimit int
	// MonthUsed is the recipients counted against the quota in the month.
	MonthUsed int64
	// DaySent is the recipients of the emails accepted since the day's
	// start (suppressed ones included, as the quota counts them but for
	// the suppression list).
	DaySent int64
	// DayReceived and MonthReceived count the received emails since the
	// day's and the month's start.
	DayReceived, MonthReceived int64
	// Contacts, Segments, Broadcasts and Domains count the team's rows
	// (live domains only).
	Contacts, Segments, Broadcasts, Domains int64
}

// TeamUsage counts the team's usage of the day starting at day and of the
// month starting at month (the quota's month: QuotaMonth). ErrNotFound for
// an unknown team.
func (s *Insights) TeamUsage(ctx context.Context, teamID uuid.UUID, day, month time.Time) (TeamUsage, error) {
	var u TeamUsage
	var rate *int
	// Emails and received emails have UUIDv7 ids: the id bounds use their
	// (team_id, id) indexes.
	err := s.pool.QueryRow(ctx, `SELECT p.monthly_emails, t.rate_limit,
		  (SELECT coalesce(sum(used), 0)::bigint FROM quota_usage WHERE team_id = t.id AND month = @month),
		  (SELECT coalesce(sum(cardinality(rcpt_addrs)), 0)::bigint FROM email
		    WHERE team_id = t.id AND id >= @day_id),
		  (SELECT count(*) FROM received_email WHERE team_id = t.id AND id >= @day_id),
		  (SELECT count(*) FROM received_email WHERE team_id = t.id AND id >= @month_id),
		  (SELECT count(*) FROM contact WHERE team_id = t.id),
		  (SELECT count(*) FROM segment WHERE team_id = t.id),
		  (SELECT count(*) FROM broadcast WHERE team_id = t.id),
		  (SELECT count(*) FROM domain WHERE team_id = t.id AND deleted_at IS NULL)
		FROM team t JOIN plan p ON p.name = t.plan WHERE t.id = @team`,
		pgx.NamedArgs{"team": teamID, "month": QuotaMonth(month), "day_id": idFloor(day), "month_id": idFloor(month)}).
		Scan(&u.PlanEmails, &rate, &u.MonthUsed, &u.DaySent, &u.DayReceived, &u.MonthReceived,
			&u.Contacts, &u.Segments, &u.Broadcasts, &u.Domains)
	if err != nil {
		return TeamUsage{}, fmt.Errorf("counting the usage of team %s: %w", teamID, mapErr(err))
	}
	if rate != nil {
		u.RateLimit = *rate
	}
	return u, nil
}

// idFloor is the smallest UUIDv7 of t's millisecond: every id made at t
// or later sorts at or above it.
func idFloor(t time.Time) uuid.UUID {
	var id uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[:6], ms[2:])
	id[6] = 0x70
	id[8] = 0x80
	return id
}
