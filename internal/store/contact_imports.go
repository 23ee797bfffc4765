package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Statuses of a contact import (Resend's).
const (
	ImportQueued     = "queued"
	ImportInProgress = "in_progress"
	ImportCompleted  = "completed"
	ImportFailed     = "failed"
)

// What an import does with a row whose address is already a contact.
const (
	ImportSkip   = "skip"   // leave the contact as it is; the row counts as skipped
	ImportUpsert = "upsert" // update the contact with the row's non-empty cells
)

// ImportCounts are what happened to an import's rows so far.
type ImportCounts struct {
	Total     int // rows in the file, header excluded
	Processed int // rows of the chunks applied so far
	Created   int
	Updated   int
	Skipped   int
	Failed    int
}

// ContactImport is an uploaded CSV of contacts and its progress.
type ContactImport struct {
	ID          uuid.UUID
	TeamID      uuid.UUID
	Status      string
	OnConflict  string
	SegmentIDs  []uuid.UUID
	Topics      []TopicChoice
	Chunks      int
	Counts      ImportCounts
	Error       string // why it failed, when Status is ImportFailed
	CreatedAt   time.Time
	CompletedAt *time.Time
}

// ImportRow is a valid row of an import, as the upload validated it. Nil
// fields were empty in the file: a new contact gets the default, an
// updated one keeps its value.
type ImportRow struct {
	Row          int            `json:"r"` // its number in the file, the header being row 1
	Email        string         `json:"e"` // normalised
	FirstName    *string        `json:"f"`
	LastName     *string        `json:"l"`
	Unsubscribed *bool          `json:"u"`
	Properties   map[string]any `json:"p"`
}

// ImportRowError is a row of an import that failed.
type ImportRowError struct {
	Row    int    `json:"row"`
	Email  string `json:"email,omitempty"`
	Reason string `json:"reason"`
}

const contactImportColumns = `id, team_id, status, on_conflict, segment_ids, topics, chunks, total, processed,
	created, updated, skipped, failed, coalesce(error, ''), created_at, completed_at`

func scanContactImport(row pgx.Row) (ContactImport, error) {
	var (
		ci     ContactImport
		topics []topicChoiceJSON
	)
	err := row.Scan(&ci.ID, &ci.TeamID, &ci.Status, &ci.OnConflict, &ci.SegmentIDs, &topics, &ci.Chunks,
		&ci.Counts.Total, &ci.Counts.Processed, &ci.Counts.Created, &ci.Counts.Updated, &ci.Counts.Skipped,
		&ci.Counts.Failed, &ci.Error, &ci.CreatedAt, &ci.CompletedAt)
	for _, t := range topics {
		ci.Topics = append(ci.Topics, TopicChoice{TopicID: t.ID, Subscription: t.Subscription})
	}
	return ci, mapErr(err)
}

type topicChoiceJSON struct {
	ID           uuid.UUID `json:"id"`
	Subscription string    `json:"subscription"`
}

// ImportWriter writes a new import inside one transaction: nothing of it
// is visible before Commit, and Rollback (or a failed Commit) leaves
// nothing behind. Not safe for concurrent use.
type ImportWriter struct {
	tx     pgx.Tx
	imp    ContactImport
	chunks int
	total  int
	failed int
}

// BeginContactImport starts writing the import imp (ID, TeamID,
// OnConflict, SegmentIDs, Topics). The caller must end the writer with
// Commit or Rollback.
func (s *Audience) BeginContactImport(ctx context.Context, imp ContactImport) (*ImportWriter, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("beginning contact import: %w", mapErr(err))
	}
	topics := make([]topicChoiceJSON, len(imp.Topics))
	for i, t := range imp.Topics {
		topics[i] = topicChoiceJSON{ID: t.TopicID, Subscription: t.Subscription}
	}
	segs := imp.SegmentIDs
	if segs == nil {
		segs = []uuid.UUID{}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO contact_import (id, team_id, on_conflict, segment_ids, topics)
		VALUES (@id, @team, @on_conflict, @segments, @topics)`,
		pgx.NamedArgs{"id": imp.ID, "team": imp.TeamID, "on_conflict": imp.OnConflict, "segments": segs,
			"topics": topics}); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("creating contact import: %w", mapErr(err))
	}
	return &ImportWriter{tx: tx, imp: imp}, nil
}

// AddChunk writes the next chunk: the valid rows and the failed ones of a
// run of consecutive rows starting at row number firstRow.
func (w *ImportWriter) AddChunk(ctx context.Context, firstRow int, rows []ImportRow, errs []ImportRowError) error {
	if rows == nil {
		rows = []ImportRow{}
	}
	if errs == nil {
		errs = []ImportRowError{}
	}
	rb, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("encoding import rows: %w", err)
	}
	eb, err := json.Marshal(errs)
	if err != nil {
		return fmt.Errorf("encoding import errors: %w", err)
	}
	if _, err := w.tx.Exec(ctx, `INSERT INTO contact_import_chunk (import_id, seq, first_row, rows, errors)
		VALUES (@id, @seq, @first, @rows::jsonb, @errors::jsonb)`,
		pgx.NamedArgs{"id": w.imp.ID, "seq": w.chunks, "first": firstRow, "rows": string(rb),
			"errors": string(eb)}); err != nil {
		return fmt.Errorf("writing import chunk %d: %w", w.chunks, mapErr(err))
	}
	w.chunks++
	w.total += len(rows) + len(errs)
	w.failed += len(errs)
	return nil
}

// Commit records the import's totals and an outbox entry that starts its
// workflow, and commits. It returns the import as written.
func (w *ImportWriter) Commit(ctx context.Context) (ContactImport, error) {
	defer w.tx.Rollback(ctx) //nolint:errcheck // rollback after commit is a no-op
	imp, err := scanContactImport(w.tx.QueryRow(ctx, `UPDATE contact_import SET chunks = @chunks, total = @total
		WHERE id = @id RETURNING `+contactImportColumns,
		pgx.NamedArgs{"id": w.imp.ID, "chunks": w.chunks, "total": w.total}))
	if err != nil {
		return ContactImport{}, fmt.Errorf("finishing contact import: %w", err)
	}
	if _, err := w.tx.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
		pgx.NamedArgs{"kind": OutboxContactImport, "team": w.imp.TeamID, "id": w.imp.ID}); err != nil {
		return ContactImport{}, fmt.Errorf("queueing contact import: %w", mapErr(err))
	}
	if err := w.tx.Commit(ctx); err != nil {
		return ContactImport{}, fmt.Errorf("committing contact import: %w", mapErr(err))
	}
	return imp, nil
}

// Rollback abandons the import; nothing of it remains. Calling it after
// Commit does nothing.
func (w *ImportWriter) Rollback(ctx context.Context) {
	_ = w.tx.Rollback(ctx)
}

// ContactImport finds one of the team's imports.
func (s *Audience) ContactImport(ctx context.Context, teamID, id uuid.UUID) (ContactImport, error) {
	return scanContactImport(s.pool.QueryRow(ctx, `SELECT `+contactImportColumns+` FROM contact_import
		WHERE team_id = @team AND id = @id`, pgx.NamedArgs{"team": teamID, "id": id}))
}

// ListContactImports lists the team's imports, newest first; status, when
// not empty, selects those in it.
func (s *Audience) ListContactImports(ctx context.Context, teamID uuid.UUID, status string, p Page) ([]ContactImport, bool, error) {
	q := `SELECT ` + contactImportColumns + ` FROM contact_import WHERE team_id = @team`
	args := pgx.NamedArgs{"team": teamID}
	if status != "" {
		q += ` AND status = @status`
		args["status"] = status
	}
	return listPage(ctx, s.Store, p, q, args, scanContactImport)
}

// ContactImportErrors returns up to limit failed rows of one of the
// team's imports, in row order, from the chunks applied so far.
func (s *Audience) ContactImportErrors(ctx context.Context, teamID, id uuid.UUID, limit int) ([]ImportRowError, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.row, coalesce(e.email, ''), e.reason
		FROM contact_import i JOIN contact_import_chunk c ON c.import_id = i.id,
			jsonb_to_recordset(c.errors) AS e(row integer, email text, reason text)
		WHERE i.team_id = @team AND i.id = @id AND c.done
		ORDER BY c.seq, e.row LIMIT @limit`, pgx.NamedArgs{"team": teamID, "id": id, "limit": limit})
	if err != nil {
		return nil, fmt.Errorf("listing import errors: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ImportRowError, error) {
		var e ImportRowError
		err := r.Scan(&e.Row, &e.Email, &e.Reason)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing import errors: %w", mapErr(err))
	}
	return out, nil
}

// StartContactImport marks an import in progress (unless it already ended)
// and returns it. ErrNotFound when there is none.
func (s *Audience) StartContactImport(ctx context.Context, id uuid.UUID) (ContactImport, error) {
	imp, err := scanContactImport(s.pool.QueryRow(ctx, `UPDATE contact_import
		SET status = CASE WHEN status = @queued THEN @in_progress ELSE status END
		WHERE id = @id RETURNING `+contactImportColumns,
		pgx.NamedArgs{"id": id, "queued": ImportQueued, "in_progress": ImportInProgress}))
	if err != nil {
		return ContactImport{}, fmt.Errorf("starting contact import %s: %w", id, err)
	}
	return imp, nil
}

// FinishContactImport ends an import that has not ended yet: completed
// when reason is empty, otherwise failed with reason. Ending it again
// changes nothing. Applied chunks' rows are emptied either way.
func (s *Audience) FinishContactImport(ctx context.Context, id uuid.UUID, reason string) (ContactImport, error) {
	status := ImportCompleted
	var why *string
	if reason != "" {
		status, why = ImportFailed, &reason
	}
	var imp ContactImport
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		imp, err = scanContactImport(tx.QueryRow(ctx, `UPDATE contact_import
			SET status = CASE WHEN completed_at IS NULL THEN @status ELSE status END,
				error = CASE WHEN completed_at IS NULL THEN @error ELSE error END,
				completed_at = coalesce(completed_at, now())
			WHERE id = @id RETURNING `+contactImportColumns,
			pgx.NamedArgs{"id": id, "status": status, "error": why}))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE contact_import_chunk SET rows = '[]' WHERE import_id = @id AND rows <> '[]'`,
			pgx.NamedArgs{"id": id})
		return mapErr(err)
	})
	if err != nil {
		return ContactImport{}, fmt.Errorf("finishing contact import %s: %w", id, err)
	}
	return imp, nil
}

// ChunkCounts is what applying one chunk did.
type ChunkCounts struct {
	Rows    int // rows of the chunk, failed ones included
	Created int
	Updated int
	Skipped int
	Failed  int
}

// ApplyImportChunk applies chunk seq of an import: it creates the
// contacts of its valid rows, and, under ImportUpsert, updates those that
// exist (ImportSkip leaves them and counts them skipped); the contacts it
// created or updated join the import's segments and get its topic
// choices. Within the chunk, several rows with one address make one
// contact: the last row under upsert, the first under skip; the others
// count as skipped. The chunk is marked done, and the import's counts
// grow, in the same transaction: applying a chunk again (a retry after a
// crash) returns the counts stored the first time and changes nothing.
// ErrNotFound when the import or the chunk does not exist.
func (s *Audience) ApplyImportChunk(ctx context.Context, importID uuid.UUID, seq int) (ChunkCounts, error) {
	var cc ChunkCounts
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			done   bool
			nRows  int
			nErrs  int
			teamID uuid.UUID
			onConf string
			segs   []uuid.UUID
			topics []topicChoiceJSON
		)
		err := tx.QueryRow(ctx, `SELECT c.done, c.created, c.updated, c.skipped, c.failed,
				jsonb_array_length(c.rows), jsonb_array_length(c.errors),
				i.team_id, i.on_conflict, i.segment_ids, i.topics
			FROM contact_import_chunk c JOIN contact_import i ON i.id = c.import_id
			WHERE c.import_id = @id AND c.seq = @seq FOR UPDATE OF c`,
			pgx.NamedArgs{"id": importID, "seq": seq}).Scan(&done, &cc.Created, &cc.Updated, &cc.Skipped, &cc.Failed,
			&nRows, &nErrs, &teamID, &onConf, &segs, &topics)
		if err != nil {
			return mapErr(err)
		}
		if done {
			cc.Rows = cc.Created + cc.Updated + cc.Skipped + cc.Failed
			return nil
		}
		cc = ChunkCounts{Rows: nRows + nErrs, Failed: nErrs}
		// src: the chunk's rows, one per address (see above).
		const src = `WITH src AS (
				SELECT DISTINCT ON (x.e) x.e, x.f, x.l, x.u, x.p
				FROM contact_import_chunk c, jsonb_to_recordset(c.rows) AS x(r integer, e text, f text, l text, u boolean, p jsonb)
				WHERE c.import_id = @id AND c.seq = @seq
				ORDER BY x.e, CASE WHEN @upsert THEN -x.r ELSE x.r END)`
		args := pgx.NamedArgs{"id": importID, "seq": seq, "team": teamID, "upsert": onConf == ImportUpsert}
		var touched []uuid.UUID
		if onConf == ImportUpsert {
			rows, err := tx.Query(ctx, src+`
				UPDATE contact c SET
					first_name = coalesce(s.f, c.first_name),
					last_name = coalesce(s.l, c.last_name),
					unsubscribed = coalesce(s.u, c.unsubscribed),
					properties = c.properties || coalesce(s.p, '{}'),
					updated_at = now()
				FROM src s WHERE c.team_id = @team AND c.email = s.e
				RETURNING c.id`, args)
			if err != nil {
				return mapErr(err)
			}
			if touched, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
				return mapErr(err)
			}
			cc.Updated = len(touched)
		}
		// uuidv7() needs PostgreSQL 18: ids are made the same way from the
		// clock and random bits in SQL, in creation order like UUIDv7.
		rows, err := tx.Query(ctx, src+`
			INSERT INTO contact (id, team_id, email, first_name, last_name, unsubscribed, properties)
			SELECT `+sqlUUIDv7+`, @team, s.e, coalesce(s.f, ''), coalesce(s.l, ''), coalesce(s.u, false), coalesce(s.p, '{}')
			FROM src s WHERE NOT EXISTS (SELECT 1 FROM contact c WHERE c.team_id = @team AND c.email = s.e)
			ON CONFLICT (team_id, email) DO NOTHING
			RETURNING id`, args)
		if err != nil {
			return mapErr(err)
		}
		created, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return mapErr(err)
		}
		cc.Created = len(created)
		cc.Skipped = nRows - cc.Created - cc.Updated
		touched = append(touched, created...)
		if len(touched) > 0 && len(segs) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO contact_segment (team_id, contact_id, segment_id)
				SELECT @team::uuid, c, s FROM unnest(@contacts::uuid[]) AS c, unnest(@segments::uuid[]) AS s
				WHERE EXISTS (SELECT 1 FROM segment WHERE team_id = @team AND id = s)
				ON CONFLICT DO NOTHING`,
				pgx.NamedArgs{"team": teamID, "contacts": touched, "segments": segs}); err != nil {
				return mapErr(err)
			}
		}
		if len(touched) > 0 && len(topics) > 0 {
			ids, subs := make([]uuid.UUID, len(topics)), make([]string, len(topics))
			for i, t := range topics {
				ids[i], subs[i] = t.ID, t.Subscription
			}
			if _, err := tx.Exec(ctx, `INSERT INTO contact_topic (team_id, contact_id, topic_id, subscription)
				SELECT @team::uuid, c, t.id, t.sub FROM unnest(@contacts::uuid[]) AS c,
					unnest(@topics::uuid[], @subs::text[]) AS t(id, sub)
				WHERE EXISTS (SELECT 1 FROM topic WHERE team_id = @team AND id = t.id)
				ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscription = excluded.subscription, updated_at = now()`,
				pgx.NamedArgs{"team": teamID, "contacts": touched, "topics": ids, "subs": subs}); err != nil {
				return mapErr(err)
			}
		}
		cargs := pgx.NamedArgs{"id": importID, "seq": seq, "created": cc.Created, "updated": cc.Updated,
			"skipped": cc.Skipped, "failed": cc.Failed, "rows": cc.Rows}
		if _, err := tx.Exec(ctx, `UPDATE contact_import_chunk SET done = true, rows = '[]', created = @created,
				updated = @updated, skipped = @skipped, failed = @failed
			WHERE import_id = @id AND seq = @seq`, cargs); err != nil {
			return mapErr(err)
		}
		_, err = tx.Exec(ctx, `UPDATE contact_import SET processed = processed + @rows, created = created + @created,
				updated = updated + @updated, skipped = skipped + @skipped, failed = failed + @failed,
				status = CASE WHEN status = 'queued' THEN 'in_progress' ELSE status END
			WHERE id = @id`, cargs)
		return mapErr(err)
	})
	if err != nil {
		return ChunkCounts{}, fmt.Errorf("applying chunk %d of contact import %s: %w", seq, importID, err)
	}
	return cc, nil
}

// sqlUUIDv7 is an SQL expression making a UUIDv7 (RFC 9562 §5.7) from the
// statement's clock and random bits.
const sqlUUIDv7 = `(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
	|| '7' || substr(md5(random()::text), 1, 3)
	|| to_hex(8 + floor(random() * 4)::int) || substr(md5(random()::text), 1, 15))::uuid`
