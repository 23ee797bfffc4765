package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// Data request types and statuses (the CHECKs of data_request).
const (
	DataRequestExport  = "export"
	DataRequestErasure = "erasure"

	DataRequestQueued    = "queued"
	DataRequestRunning   = "running"
	DataRequestCompleted = "completed"
	DataRequestFailed    = "failed"
)

// DataRequest is a data subject request: an export or an erasure of
// everything a team holds about one email address.
type DataRequest struct {
	ID     uuid.UUID
	TeamID uuid.UUID
	Type   string
	Status string
	// Address is the address sealed by the caller (package datareq: the
	// master key, associated data the request id); nil once an erasure
	// completed.
	Address []byte
	// Found counts what the request found (export) or removed (erasure),
	// by kind; empty until it has run.
	Found map[string]int
	Error *string
	// ArchiveSize and ExpiresAt describe the archive of a completed
	// export.
	ArchiveSize *int64
	ExpiresAt   *time.Time
	CreatedAt   time.Time
	CompletedAt *time.Time
}

const dataRequestColumns = `id, team_id, type, status, address, found, error, archive_size, expires_at,
	created_at, completed_at`

func scanDataRequest(row pgx.Row) (DataRequest, error) {
	var (
		r     DataRequest
		found []byte
	)
	err := row.Scan(&r.ID, &r.TeamID, &r.Type, &r.Status, &r.Address, &found, &r.Error, &r.ArchiveSize,
		&r.ExpiresAt, &r.CreatedAt, &r.CompletedAt)
	if err != nil {
		return DataRequest{}, mapErr(err)
	}
	if err := json.Unmarshal(found, &r.Found); err != nil {
		return DataRequest{}, fmt.Errorf("reading counts of data request %s: %w", r.ID, err)
	}
	return r, nil
}

// CreateDataRequest stores a queued request, the outbox entry that starts
// its workflow and the audit entry e (its target set to the request), in
// one transaction.
func (s *Privacy) CreateDataRequest(ctx context.Context, r DataRequest, e audit.Entry) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO data_request (id, team_id, type, address)
			VALUES (@id, @team, @type, @address)`,
			pgx.NamedArgs{"id": r.ID, "team": r.TeamID, "type": r.Type, "address": r.Address}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
			pgx.NamedArgs{"kind": OutboxDataRequest, "team": r.TeamID, "id": r.ID}); err != nil {
			return err
		}
		e.TeamID, e.TargetType, e.TargetID = &r.TeamID, "data_request", r.ID.String()
		_, err := appendAudit(ctx, tx, e)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating data request: %w", err)
	}
	return nil
}

// DataRequest returns the team's request with this id.
func (s *Privacy) DataRequest(ctx context.Context, teamID, id uuid.UUID) (DataRequest, error) {
	return scanDataRequest(s.pool.QueryRow(ctx, `SELECT `+dataRequestColumns+` FROM data_request
		WHERE team_id = @team AND id = @id`, pgx.NamedArgs{"team": teamID, "id": id}))
}

// ListDataRequests lists the team's requests, newest first.
func (s *Privacy) ListDataRequests(ctx context.Context, teamID uuid.UUID, p Page) ([]DataRequest, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+dataRequestColumns+` FROM data_request WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanDataRequest)
}

// StartDataRequest moves a queued request to running (a running one stays
// so, for a rerun) and returns it; the workflow, which knows only the id,
// takes the team from it.
func (s *Privacy) StartDataRequest(ctx context.Context, id uuid.UUID) (DataRequest, error) {
	r, err := scanDataRequest(s.pool.QueryRow(ctx, `UPDATE data_request
		SET status = CASE WHEN status = 'queued' THEN 'running' ELSE status END
		WHERE id = @id RETURNING `+dataRequestColumns, pgx.NamedArgs{"id": id}))
	if err != nil {
		return DataRequest{}, fmt.Errorf("starting data request %s: %w", id, err)
	}
	return r, nil
}

// SetDataRequestFound records the counts of a running request, unless
// counts were recorded already (a rerun of an erasure finds less than the
// first run did, and the first run's counts are the true ones).
func (s *Privacy) SetDataRequestFound(ctx context.Context, id uuid.UUID, found map[string]int) error {
	b, err := json.Marshal(found)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `UPDATE data_request SET found = @found
		WHERE id = @id AND found = '{}'::jsonb`, pgx.NamedArgs{"id": id, "found": b})
	if err != nil {
		return fmt.Errorf("recording counts of data request %s: %w", id, mapErr(err))
	}
	return nil
}

// DataRequestOutcome is how a request ended.
type DataRequestOutcome struct {
	// Failed ends the request failed with Reason; otherwise completed.
	Failed bool
	Reason string
	// Found replaces the counts when set (exports).
	Found map[string]int
	// ArchiveSize and ExpiresAt describe an export's archive.
	ArchiveSize *int64
	ExpiresAt   *time.Time
}

// FinishDataRequest ends a running (or queued) request. A completed
// erasure forgets its address. The first call that ends it appends a
// data_request.complete (or .fail) audit entry by the system in the same
// transaction; later calls change nothing and report false.
func (s *Privacy) FinishDataRequest(ctx context.Context, id uuid.UUID, o DataRequestOutcome) (bool, error) {
	status, reason := DataRequestCompleted, (*string)(nil)
	if o.Failed {
		status, reason = DataRequestFailed, &o.Reason
	}
	var found []byte
	if o.Found != nil {
		b, err := json.Marshal(o.Found)
		if err != nil {
			return false, err
		}
		found = b
	}
	changed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			team uuid.UUID
			typ  string
		)
		err := tx.QueryRow(ctx, `UPDATE data_request SET status = @status, error = @reason,
				found = coalesce(@found::jsonb, found), archive_size = @size, expires_at = @expires,
				completed_at = now(),
				address = CASE WHEN type = 'erasure' AND @status = 'completed' THEN NULL ELSE address END
			WHERE id = @id AND status IN ('queued', 'running') RETURNING team_id, type`,
			pgx.NamedArgs{"id": id, "status": status, "reason": reason, "found": found,
				"size": o.ArchiveSize, "expires": o.ExpiresAt}).Scan(&team, &typ)
		if err == pgx.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		changed = true
		action := audit.DataRequestComplete
		outcome := audit.Success
		if o.Failed {
			action, outcome = audit.DataRequestFail, audit.Failure
		}
		detail, _ := json.Marshal(map[string]string{"type": typ})
		_, err = appendAudit(ctx, tx, audit.Entry{TeamID: &team, ActorType: audit.ActorSystem, Action: action,
			TargetType: "data_request", TargetID: id.String(), Outcome: outcome, Detail: string(detail)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finishing data request %s: %w", id, err)
	}
	return changed, nil
}

// ClearDataRequestArchive deletes the archive chunks of a request, before
// an export (re)writes it.
func (s *Privacy) ClearDataRequestArchive(ctx context.Context, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM data_request_archive WHERE request_id = @id`,
		pgx.NamedArgs{"id": id}); err != nil {
		return fmt.Errorf("clearing archive of data request %s: %w", id, mapErr(err))
	}
	return nil
}

// PutDataRequestArchive stores chunk seq of a request's archive (sealed
// by the caller).
func (s *Privacy) PutDataRequestArchive(ctx context.Context, id uuid.UUID, seq int, data []byte, expires time.Time) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO data_request_archive (request_id, seq, data, expires_at)
		VALUES (@id, @seq, @data, @expires)
		ON CONFLICT (request_id, seq) DO UPDATE SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at`,
		pgx.NamedArgs{"id": id, "seq": seq, "data": data, "expires": expires}); err != nil {
		return fmt.Errorf("storing archive of data request %s: %w", id, mapErr(err))
	}
	return nil
}

// DataRequestArchiveChunks counts the stored chunks of the team's
// request's archive that have not expired; 0 when there is none.
func (s *Privacy) DataRequestArchiveChunks(ctx context.Context, teamID, id uuid.UUID) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM data_request_archive a
		JOIN data_request r ON r.id = a.request_id
		WHERE r.team_id = @team AND r.id = @id AND a.expires_at > now()`,
		pgx.NamedArgs{"team": teamID, "id": id}).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting archive of data request %s: %w", id, mapErr(err))
	}
	return n, nil
}

// DataRequestArchiveChunk returns chunk seq of the team's request's
// archive (sealed); ErrNotFound when there is none or it expired.
func (s *Privacy) DataRequestArchiveChunk(ctx context.Context, teamID, id uuid.UUID, seq int) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT a.data FROM data_request_archive a
		JOIN data_request r ON r.id = a.request_id
		WHERE r.team_id = @team AND r.id = @id AND a.seq = @seq AND a.expires_at > now()`,
		pgx.NamedArgs{"team": teamID, "id": id, "seq": seq}).Scan(&data)
	if err != nil {
		return nil, fmt.Errorf("loading archive of data request %s: %w", id, mapErr(err))
	}
	return data, nil
}

// SealedDataRequests returns the team's requests, other than except, that
// still hold their sealed address: an erasure opens them to forget the
// earlier requests about the same person.
func (s *Privacy) SealedDataRequests(ctx context.Context, teamID, except uuid.UUID) ([]DataRequest, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+dataRequestColumns+` FROM data_request
		WHERE team_id = @team AND id <> @except AND address IS NOT NULL ORDER BY id`,
		pgx.NamedArgs{"team": teamID, "except": except})
	if err != nil {
		return nil, fmt.Errorf("listing data requests: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DataRequest, error) { return scanDataRequest(r) })
	if err != nil {
		return nil, fmt.Errorf("listing data requests: %w", err)
	}
	return out, nil
}

// ForgetDataRequest deletes the archive of the team's request and clears
// its address (an erasure of the same person came after it).
func (s *Privacy) ForgetDataRequest(ctx context.Context, teamID, id uuid.UUID) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE data_request SET address = NULL, expires_at = NULL
			WHERE team_id = @team AND id = @id`,
			pgx.NamedArgs{"team": teamID, "id": id})
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM data_request_archive WHERE request_id = @id`, pgx.NamedArgs{"id": id})
		return err
	})
	if err != nil {
		return fmt.Errorf("forgetting data request %s: %w", id, err)
	}
	return nil
}
