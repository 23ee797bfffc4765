package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TrackedRecipient is what an open or click names: one recipient of an
// email, as the tracking endpoints see it.
type TrackedRecipient struct {
	Address string
	Status  string // the recipient's state (an Event* constant)
	// DeliveredAt is when the recipient's mail was delivered; zero when it
	// was not (yet).
	DeliveredAt time.Time
}

// Trackable says whether opens and clicks are recorded for a recipient in
// state status: only once it was delivered (and maybe already opened or
// clicked), never over a later state (a bounce reported after delivery, a
// complaint), so that the email's last_event moves to opened or clicked
// only from delivered mail.
func Trackable(status string) bool {
	return status == EventDelivered || status == EventOpened || status == EventClicked
}

// TrackedRecipient returns recipient number index (from 0, in the order of
// the email's recipients) of an email of team teamID; ErrNotFound when the
// team has no such email or the email no such recipient.
func (s *Emails) TrackedRecipient(ctx context.Context, teamID, emailID uuid.UUID, index int) (TrackedRecipient, error) {
	var r TrackedRecipient
	var delivered *time.Time
	err := s.pool.QueryRow(ctx, `SELECT e.rcpt_addrs[@n], e.rcpt_status[@n],
			(SELECT min(ev.created_at) FROM email_event ev
				WHERE ev.email_id = e.id AND ev.type = '`+EventDelivered+`' AND ev.recipient = e.rcpt_addrs[@n])
		FROM email e WHERE e.id = @id AND e.team_id = @team AND @n BETWEEN 1 AND cardinality(e.rcpt_addrs)`,
		pgx.NamedArgs{"id": emailID, "team": teamID, "n": index + 1}).Scan(&r.Address, &r.Status, &delivered)
	if err != nil {
		return TrackedRecipient{}, mapErr(err)
	}
	if delivered != nil {
		r.DeliveredAt = *delivered
	}
	return r, nil
}

// IsTeamTrackingHost reports whether host (lower case, without port) is
// the tracking host <tracking_subdomain>.<name> of a live domain of team
// teamID with open or click tracking on.
func (s *Emails) IsTeamTrackingHost(ctx context.Context, teamID uuid.UUID, host string) (bool, error) {
	sub, name, ok := strings.Cut(host, ".")
	if !ok || sub == "" || name == "" {
		return false, nil
	}
	var found bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM domain WHERE team_id = @team AND name = @name
		AND tracking_subdomain = @sub AND deleted_at IS NULL AND (open_tracking OR click_tracking))`,
		pgx.NamedArgs{"team": teamID, "name": name, "sub": sub}).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("looking up tracking host: %w", mapErr(err))
	}
	return found, nil
}
