package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// utcDay is the UTC calendar day of t, as a date parameter.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// TakeWarmup takes up to n messages from the daily allowance of the
// address ip on the UTC day of now, and returns how many it got (0 to
// n). schedule is the warm-up schedule (ippool.Schedule): schedule[0] is
// the allowance of the address's first day (the UTC day of its
// warmup_started_at), and a day past its end, or an address that is not
// warming up, has no limit. Every take is counted, limited or not, in the
// address's row of the day (table ip_warmup_day), in one statement that
// grants only what is left: concurrent takers, in any process, never
// overshoot the allowance. An address unknown to the database is
// ErrNotFound.
func (s *Domains) TakeWarmup(ctx context.Context, ip netip.Addr, n int, schedule []int64, now time.Time) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	var got int
	err := s.pool.QueryRow(ctx, `WITH a AS (
			SELECT id, CASE WHEN warmup_started_at IS NOT NULL THEN (@schedule::bigint[])[
				greatest(@day::date - (warmup_started_at AT TIME ZONE 'UTC')::date + 1, 1)] END AS allowance
			FROM ip_address WHERE address = @ip)
		INSERT INTO ip_warmup_day AS d (address_id, day, sent, allowance, last_take)
		SELECT id, @day, least(@n, allowance), allowance, least(@n, allowance) FROM a
		ON CONFLICT (address_id, day) DO UPDATE
		SET sent = least(d.sent + @n, EXCLUDED.allowance), allowance = EXCLUDED.allowance,
			last_take = least(d.sent + @n, EXCLUDED.allowance) - d.sent
		WHERE EXCLUDED.allowance IS NULL OR d.sent < EXCLUDED.allowance
		RETURNING last_take`,
		pgx.NamedArgs{"ip": netip.PrefixFrom(ip, ip.BitLen()), "n": n, "schedule": schedule, "day": utcDay(now)}).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		// The allowance is used up, or the address is unknown.
		var known bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ip_address WHERE address = @ip)`,
			pgx.NamedArgs{"ip": netip.PrefixFrom(ip, ip.BitLen())}).Scan(&known); err != nil {
			return 0, mapErr(err)
		}
		if !known {
			return 0, fmt.Errorf("%w: no IP address %s", ErrNotFound, ip)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("taking warm-up allowance of %s: %w", ip, mapErr(err))
	}
	return got, nil
}

// SetWarmup starts the warm-up of the address ip again at start (its
// first day is start's UTC day), or with a nil start marks it done: the
// address then sends without limit. An unknown address is ErrNotFound.
func (s *Domains) SetWarmup(ctx context.Context, ip netip.Addr, start *time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE ip_address SET warmup_started_at = @start WHERE address = @ip`,
		pgx.NamedArgs{"ip": netip.PrefixFrom(ip, ip.BitLen()), "start": start})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: no IP address %s", ErrNotFound, ip)
	}
	return nil
}

// WarmupAddress is one address of a pool with its warm-up state on a day.
type WarmupAddress struct {
	Pool     string
	ID       uuid.UUID
	IP       netip.Addr
	EHLOName string
	// StartedAt is when the warm-up started; nil when the address is not
	// warming up (skipped or done).
	StartedAt *time.Time
	// RetiredAt is when the address left the configuration; nil while it
	// is in use.
	RetiredAt *time.Time
	// Sent is the messages that took the address on the day.
	Sent int64
}

// WarmupAddresses returns every address of every pool, retired ones too,
// with the messages it sent on the UTC day of day, pools and addresses in
// the order they were created.
func (s *Domains) WarmupAddresses(ctx context.Context, day time.Time) ([]WarmupAddress, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.name, a.id, a.address, a.ehlo_name, a.warmup_started_at, a.retired_at,
			coalesce(w.sent, 0)
		FROM ip_address a JOIN ip_pool p ON p.id = a.pool_id
		LEFT JOIN ip_warmup_day w ON w.address_id = a.id AND w.day = @day
		ORDER BY p.created_at, p.id, a.retired_at IS NOT NULL, a.created_at, a.id`,
		pgx.NamedArgs{"day": utcDay(day)})
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WarmupAddress, error) {
		var w WarmupAddress
		var addr netip.Prefix
		err := r.Scan(&w.Pool, &w.ID, &addr, &w.EHLOName, &w.StartedAt, &w.RetiredAt, &w.Sent)
		w.IP = addr.Addr()
		return w, err
	})
	return out, mapErr(err)
}
