package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// finalStates is FinalStates as an SQL list, for IN.
var finalStates = "(" + sqlStrings(FinalStates) + ")"

// finalStatesArray is FinalStates as a text[] literal.
var finalStatesArray = "ARRAY[" + sqlStrings(FinalStates) + "]"

// sqlStrings quotes constant strings (no quotes in them) as SQL literals
// separated by commas.
func sqlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + s + "'"
	}
	return strings.Join(q, ", ")
}

// PurgeEmails deletes up to limit emails (with their events, attachments
// and built message, by cascade) and up to limit finished
// webhook messages (with their attempts) that stopped changing before t.
// An email qualifies when it has had no event and no update since t, no
// recipient still waiting or being delivered, is not scheduled for later
// and not waiting in the outbox. It returns how many rows it deleted; each
// statement is one short transaction, so a sweep of many calls never holds
// locks for long.
func (s *Privacy) PurgeEmails(ctx context.Context, t time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM email WHERE id IN (
		SELECT e.id FROM email e
		WHERE e.updated_at < @t
		AND e.last_event NOT IN ('scheduled', 'queued')
		AND (e.scheduled_at IS NULL OR e.scheduled_at < @t)
		AND e.rcpt_status <@ `+finalStatesArray+`
		AND NOT EXISTS (SELECT 1 FROM email_event v WHERE v.email_id = e.id AND v.created_at >= @t)
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.ref = e.id)
		ORDER BY e.updated_at
		LIMIT @limit
		FOR UPDATE SKIP LOCKED)`, pgx.NamedArgs{"t": t, "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("purging emails: %w", mapErr(err))
	}
	// Webhook messages whose delivery ended (success or failed) before t,
	// with their attempts by cascade, in the same bounded batches.
	wh, err := s.pool.Exec(ctx, `DELETE FROM webhook_message WHERE id IN (
		SELECT id FROM webhook_message
		WHERE status IN ('success', 'failed') AND updated_at < @t
		ORDER BY updated_at
		LIMIT @limit
		FOR UPDATE SKIP LOCKED)`, pgx.NamedArgs{"t": t, "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("purging webhook messages: %w", mapErr(err))
	}
	return int(tag.RowsAffected() + wh.RowsAffected()), nil
}

// expiringTables are tables whose rows carry their own expiry and are
// deleted in bounded batches once it passed. A table that does not exist
// (yet) is skipped, so an entry can land before its migration. Add a table
// here with the condition that marks its rows expired at @now.
var expiringTables = []struct{ table, expired string }{
	// Idempotency records (API.md: kept 24 hours; expires_at is set on insert).
	{"idempotency_key", "expires_at < @now"},
	// Dashboard sessions and password-reset links, once they no longer work.
	{"dashboard_session", "expires_at < @now"},
	{"password_reset", "expires_at < @now"},
	// Invitations stay listed as expired on the Team page, where an owner
	// can send them again, for 30 days after they stopped working.
	{"invitation", "expires_at < @now::timestamptz - interval '30 days'"},
	// The record of system emails only counts the last hour (see
	// ReserveSystemMail); a day is plenty.
	{"system_mail", "created_at < @now::timestamptz - interval '1 day'"},
	// Inbound messages (bounces, complaints, received mail) are kept 30
	// days like sent mail, processed or not; the received emails parsed
	// from them (received_email, received_attachment) go with them by
	// cascade.
	{"inbound_message", "created_at < @now::timestamptz - interval '30 days'"},
	// The inbound budget's day counters, once outside its 30-day window.
	{"inbound_usage", "day < (@now::timestamptz - interval '31 days')::date"},
	// Account health notices, 30 days after their crossing: by then the
	// window they describe has passed, and one never sent is stale.
	{"health_notice", "created_at < @now::timestamptz - interval '30 days'"},
	// Export archives of data requests, once their download expired.
	{"data_request_archive", "expires_at < @now"},
}

// PurgeExpired deletes up to limit expired rows from each table of
// expiringTables, makes up to limit completed exports whose archive
// expired forget their address, and returns how many rows it changed in
// all.
func (s *Privacy) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	total := 0
	for _, x := range expiringTables {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT to_regclass(@t) IS NOT NULL`,
			pgx.NamedArgs{"t": x.table}).Scan(&exists); err != nil {
			return total, fmt.Errorf("looking up %s: %w", x.table, mapErr(err))
		}
		if !exists {
			continue
		}
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+x.table+` WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM `+x.table+` WHERE `+x.expired+` LIMIT @limit FOR UPDATE SKIP LOCKED))`,
			pgx.NamedArgs{"now": now, "limit": limit})
		if err != nil {
			return total, fmt.Errorf("purging %s: %w", x.table, mapErr(err))
		}
		total += int(tag.RowsAffected())
	}
	// A completed export needs its sealed address only while its archive
	// can be downloaded: once that expired, it forgets the address (as a
	// completed erasure does at once) and keeps its counts.
	tag, err := s.pool.Exec(ctx, `UPDATE data_request SET address = NULL WHERE id = ANY(ARRAY(
		SELECT id FROM data_request WHERE type = '`+DataRequestExport+`' AND status = '`+DataRequestCompleted+`'
		AND address IS NOT NULL AND expires_at < @now LIMIT @limit FOR UPDATE SKIP LOCKED))`,
		pgx.NamedArgs{"now": now, "limit": limit})
	if err != nil {
		return total, fmt.Errorf("forgetting the addresses of expired exports: %w", mapErr(err))
	}
	return total + int(tag.RowsAffected()), nil
}
