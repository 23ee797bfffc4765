package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RequestLog is one API request as the request log keeps it. Bodies are
// already redacted and truncated by the caller; nil means there was none.
type RequestLog struct {
	ID           uuid.UUID // UUIDv7
	TeamID       *uuid.UUID
	KeyID        *uuid.UUID
	Method       string
	Path         string
	Status       int
	UserAgent    *string
	ClientAddr   string
	Duration     time.Duration
	RequestBody  *string
	ResponseBody *string
	CreatedAt    time.Time
}

// requestLogColumns are the columns written by InsertRequestLogs, in order.
var requestLogColumns = []string{"id", "team_id", "key_id", "method", "path", "status", "user_agent",
	"client_addr", "duration_us", "request_body", "response_body", "created_at"}

// InsertRequestLogs writes entries with COPY. The daily partitions of their
// created_at must exist (EnsureRequestLogPartitions).
func (s *Insights) InsertRequestLogs(ctx context.Context, entries []RequestLog) error {
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"request_log"}, requestLogColumns,
		pgx.CopyFromSlice(len(entries), func(i int) ([]any, error) {
			e := entries[i]
			return []any{e.ID, e.TeamID, e.KeyID, e.Method, e.Path, e.Status, e.UserAgent, e.ClientAddr,
				e.Duration.Microseconds(), e.RequestBody, e.ResponseBody, e.CreatedAt}, nil
		}))
	if err != nil {
		return fmt.Errorf("writing %d request log entries: %w", len(entries), mapErr(err))
	}
	return nil
}

// logDay is the UTC day of t.
func logDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func partitionName(day time.Time) string { return "request_log_" + day.Format("20060102") }

// EnsureRequestLogPartitions creates the daily partitions of request_log
// for the days from the day of from through days-1 days later, where
// missing. Concurrent callers serialise on an advisory lock.
func (s *Insights) EnsureRequestLogPartitions(ctx context.Context, from time.Time, days int) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('request_log partitions'))`); err != nil {
			return fmt.Errorf("locking request log partitions: %w", mapErr(err))
		}
		d := logDay(from)
		for range days {
			next := d.AddDate(0, 0, 1)
			// Identifiers and bounds come from formatted dates, never from input.
			q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF request_log
				FOR VALUES FROM ('%s') TO ('%s')`, partitionName(d),
				d.Format(time.RFC3339), next.Format(time.RFC3339))
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("creating partition %s: %w", partitionName(d), mapErr(err))
			}
			d = next
		}
		return nil
	})
}

type partition struct {
	name          string
	detachPending bool
}

func (s *Insights) requestLogPartitions(ctx context.Context) ([]partition, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.relname, i.inhdetachpending FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'request_log'::regclass ORDER BY c.relname`)
	if err != nil {
		return nil, mapErr(err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (partition, error) {
		var p partition
		err := r.Scan(&p.name, &p.detachPending)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing request log partitions: %w", mapErr(err))
	}
	return ps, nil
}

func partitionDay(name string) (time.Time, bool) {
	d, err := time.Parse("20060102", strings.TrimPrefix(name, "request_log_"))
	return d, err == nil && strings.HasPrefix(name, "request_log_")
}

// DropRequestLogsBefore drops the daily partitions whose whole day lies
// before t and returns how many it dropped. Each is first detached
// CONCURRENTLY, so requests writing or reading the log are not blocked; a
// detach interrupted earlier is finalised.
func (s *Insights) DropRequestLogsBefore(ctx context.Context, t time.Time) (int, error) {
	ps, err := s.requestLogPartitions(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ps {
		d, ok := partitionDay(p.name)
		if !ok || d.AddDate(0, 0, 1).After(t) {
			continue
		}
		detach := `ALTER TABLE request_log DETACH PARTITION ` + p.name + ` CONCURRENTLY`
		if p.detachPending {
			detach = `ALTER TABLE request_log DETACH PARTITION ` + p.name + ` FINALIZE`
		}
		if _, err := s.pool.Exec(ctx, detach); err != nil {
			return n, fmt.Errorf("detaching %s: %w", p.name, mapErr(err))
		}
		if _, err := s.pool.Exec(ctx, `DROP TABLE `+p.name); err != nil {
			return n, fmt.Errorf("dropping %s: %w", p.name, mapErr(err))
		}
		n++
	}
	return n, nil
}

// LogFilter narrows ListRequestLogs; zero values match everything.
type LogFilter struct {
	Status int
	Path   string
}

const requestLogListColumns = `id, team_id, key_id, method, path, status, user_agent, client_addr,
	duration_us, NULL::text, NULL::text, created_at`

const requestLogColumnsSQL = `id, team_id, key_id, method, path, status, user_agent, client_addr,
	duration_us, request_body, response_body, created_at`

func scanRequestLog(row pgx.Row) (RequestLog, error) {
	var l RequestLog
	var us int64
	err := row.Scan(&l.ID, &l.TeamID, &l.KeyID, &l.Method, &l.Path, &l.Status, &l.UserAgent, &l.ClientAddr,
		&us, &l.RequestBody, &l.ResponseBody, &l.CreatedAt)
	l.Duration = time.Duration(us) * time.Microsecond
	return l, mapErr(err)
}

// ListRequestLogs lists a team's request log, newest first, without bodies.
// Unauthenticated requests belong to no team and are never listed.
func (s *Insights) ListRequestLogs(ctx context.Context, teamID uuid.UUID, f LogFilter, p Page) ([]RequestLog, bool, error) {
	q := `SELECT ` + requestLogListColumns + ` FROM request_log WHERE team_id = @team`
	args := pgx.NamedArgs{"team": teamID}
	if f.Status != 0 {
		q += ` AND status = @status`
		args["status"] = f.Status
	}
	if f.Path != "" {
		q += ` AND path = @path`
		args["path"] = f.Path
	}
	return listPage(ctx, s.Store, p, q, args, scanRequestLog)
}

// GetRequestLog returns one of a team's log entries with its bodies.
func (s *Insights) GetRequestLog(ctx context.Context, teamID, id uuid.UUID) (RequestLog, error) {
	return scanRequestLog(s.pool.QueryRow(ctx, `SELECT `+requestLogColumnsSQL+` FROM request_log
		WHERE id = @id AND team_id = @team`, pgx.NamedArgs{"id": id, "team": teamID}))
}
