package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// AppendAudit appends e to the audit chain and returns it as stored (Seq,
// ID when zero, CreatedAt, PrevHash and Hash set). Appends serialize on
// the chain head row (SELECT ... FOR UPDATE), so the chain stays linear
// across processes; CreatedAt is taken under that lock.
func (s *Privacy) AppendAudit(ctx context.Context, e audit.Entry) (audit.Entry, error) {
	var out audit.Entry
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = appendAudit(ctx, tx, e)
		return err
	})
	if err != nil {
		return audit.Entry{}, fmt.Errorf("appending audit entry %s: %w", e.Action, err)
	}
	return out, nil
}

// appendAudit appends e within tx; the entry commits or rolls back with
// the rest of tx.
func appendAudit(ctx context.Context, tx pgx.Tx, e audit.Entry) (audit.Entry, error) {
	if !e.Action.Valid() {
		return audit.Entry{}, fmt.Errorf("unknown audit action %q", e.Action)
	}
	if e.Detail == "" {
		e.Detail = "{}"
	}
	if err := tx.QueryRow(ctx, `SELECT last_seq, last_hash FROM audit_chain FOR UPDATE`).
		Scan(&e.Seq, &e.PrevHash); err != nil {
		return audit.Entry{}, fmt.Errorf("locking the audit chain: %w", err)
	}
	e.Seq++
	if e.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return audit.Entry{}, err
		}
		e.ID = id
	}
	e.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	e.Hash = e.ComputeHash()
	if _, err := tx.Exec(ctx, `INSERT INTO audit_entry (seq, id, team_id, actor_type, actor_id, action,
		target_type, target_id, client_addr, user_agent, outcome, detail, created_at, prev_hash, hash)
		VALUES (@seq, @id, @team_id, @actor_type, @actor_id, @action, @target_type, @target_id,
		@client_addr, @user_agent, @outcome, @detail, @created_at, @prev_hash, @hash)`, pgx.NamedArgs{
		"seq": e.Seq, "id": e.ID, "team_id": e.TeamID, "actor_type": string(e.ActorType),
		"actor_id": e.ActorID, "action": string(e.Action), "target_type": e.TargetType,
		"target_id": e.TargetID, "client_addr": e.ClientAddr, "user_agent": e.UserAgent,
		"outcome": string(e.Outcome), "detail": e.Detail, "created_at": e.CreatedAt,
		"prev_hash": e.PrevHash, "hash": e.Hash,
	}); err != nil {
		return audit.Entry{}, fmt.Errorf("inserting audit entry: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE audit_chain SET last_seq = @seq, last_hash = @hash`,
		pgx.NamedArgs{"seq": e.Seq, "hash": e.Hash}); err != nil {
		return audit.Entry{}, fmt.Errorf("advancing the audit chain: %w", err)
	}
	return e, nil
}

const auditColumns = `seq, id, team_id, actor_type, actor_id, action, target_type, target_id,
	client_addr, user_agent, outcome, detail, created_at, prev_hash, hash`

func scanAudit(row pgx.Row) (audit.Entry, error) {
	var e audit.Entry
	var actorType, action, outcome string
	if err := row.Scan(&e.Seq, &e.ID, &e.TeamID, &actorType, &e.ActorID, &action, &e.TargetType,
		&e.TargetID, &e.ClientAddr, &e.UserAgent, &outcome, &e.Detail, &e.CreatedAt,
		&e.PrevHash, &e.Hash); err != nil {
		return audit.Entry{}, mapErr(err)
	}
	e.ActorType, e.Action, e.Outcome = audit.ActorType(actorType), audit.Action(action), audit.Outcome(outcome)
	e.CreatedAt = e.CreatedAt.UTC()
	return e, nil
}

// ListAudit lists a team's audit entries, newest first.
func (s *Privacy) ListAudit(ctx context.Context, teamID uuid.UUID, f audit.Filter, p Page) ([]audit.Entry, bool, error) {
	q := `SELECT ` + auditColumns + ` FROM audit_entry WHERE team_id = @team_id`
	args := pgx.NamedArgs{"team_id": teamID}
	if f.Action != "" {
		q += ` AND action = @action`
		args["action"] = string(f.Action)
	}
	if f.ActorID != nil {
		q += ` AND actor_id = @actor_id`
		args["actor_id"] = *f.ActorID
	}
	if f.TargetID != "" {
		q += ` AND target_id = @target_id`
		args["target_id"] = f.TargetID
	}
	if f.From != nil {
		q += ` AND created_at >= @from`
		args["from"] = *f.From
	}
	if f.To != nil {
		q += ` AND created_at < @to`
		args["to"] = *f.To
	}
	return listPage(ctx, s.Store, p, q, args, scanAudit)
}

// VerifyAudit walks the whole stored chain in one snapshot, from the
// retention anchor to the head, and returns how many entries it checked.
// A broken link is an *audit.BrokenError naming the first bad entry; a
// chain whose last entries were removed fails against the head row.
func (s *Privacy) VerifyAudit(ctx context.Context) (int64, error) {
	var checked int64
	err := s.inSnapshot(ctx, func(tx pgx.Tx) error {
		var lastSeq, anchorSeq int64
		var lastHash, anchorHash []byte
		if err := tx.QueryRow(ctx, `SELECT last_seq, last_hash, anchor_seq, anchor_hash FROM audit_chain`).
			Scan(&lastSeq, &lastHash, &anchorSeq, &anchorHash); err != nil {
			return fmt.Errorf("reading the audit chain head: %w", mapErr(err))
		}
		v := audit.NewVerifier(anchorSeq, anchorHash)
		after := anchorSeq
		for {
			rows, err := tx.Query(ctx, `SELECT `+auditColumns+` FROM audit_entry
				WHERE seq > @after ORDER BY seq LIMIT 1000`, pgx.NamedArgs{"after": after})
			if err != nil {
				return fmt.Errorf("reading audit entries: %w", mapErr(err))
			}
			batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (audit.Entry, error) { return scanAudit(r) })
			if err != nil {
				return fmt.Errorf("reading audit entries: %w", err)
			}
			for _, e := range batch {
				if err := v.Check(e); err != nil {
					return err
				}
				after = e.Seq
			}
			if len(batch) < 1000 {
				break
			}
		}
		checked = v.Checked()
		if seq, hash := v.Head(); seq != lastSeq || string(hash) != string(lastHash) {
			return &audit.BrokenError{Seq: seq + 1, Reason: fmt.Sprintf(
				"the chain head says entry %d is the last, but the stored chain ends at %d", lastSeq, seq)}
		}
		return nil
	})
	var broken *audit.BrokenError
	if errors.As(err, &broken) {
		return checked, broken
	}
	if err != nil {
		return checked, fmt.Errorf("verifying the audit chain: %w", err)
	}
	return checked, nil
}

// PurgeAudit deletes up to limit of the oldest audit entries created
// before t, as a whole prefix of the chain: it stops at the first entry
// that is not older than t. The hash of the last deleted entry becomes the
// anchor the remaining chain is verified from. It returns how many entries
// it deleted.
func (s *Privacy) PurgeAudit(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var anchorSeq int64
		if err := tx.QueryRow(ctx, `SELECT anchor_seq FROM audit_chain FOR UPDATE`).Scan(&anchorSeq); err != nil {
			return err
		}
		// The last entry of the prefix: just before the first entry that is
		// new enough, at most limit entries past the anchor.
		var upto *int64
		if err := tx.QueryRow(ctx, `SELECT max(seq) FROM audit_entry
			WHERE seq <= @max
			AND seq < COALESCE((SELECT min(seq) FROM audit_entry WHERE created_at >= @t), 9223372036854775807)`,
			pgx.NamedArgs{"max": anchorSeq + int64(limit), "t": t}).Scan(&upto); err != nil {
			return err
		}
		if upto == nil {
			return nil
		}
		var hash []byte
		if err := tx.QueryRow(ctx, `SELECT hash FROM audit_entry WHERE seq = @seq`,
			pgx.NamedArgs{"seq": *upto}).Scan(&hash); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM audit_entry WHERE seq <= @seq`, pgx.NamedArgs{"seq": *upto})
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, `UPDATE audit_chain SET anchor_seq = @seq, anchor_hash = @hash`,
			pgx.NamedArgs{"seq": *upto, "hash": hash})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purging audit entries: %w", err)
	}
	return n, nil
}

// audited runs fn in a transaction of its own and appends by, the audit
// entry of the change fn makes, in the same transaction after it: the
// change and its entry commit or roll back together. A zero by (no
// Action) writes no entry, for callers that record nothing (tests,
// fixtures).
func (s *Store) audited(ctx context.Context, by audit.Entry, fn func(pgx.Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return appendAuditOf(ctx, tx, by)
	})
}

// appendAuditOf appends by within tx unless it is zero (no Action).
func appendAuditOf(ctx context.Context, tx pgx.Tx, by audit.Entry) error {
	if by.Action == "" {
		return nil
	}
	_, err := appendAudit(ctx, tx, by)
	return err
}

// appendAuditFrom appends within tx the audit entry by makes of what the
// change found (v: an id or count born in the transaction); nil by writes
// none.
func appendAuditFrom[T any](ctx context.Context, tx pgx.Tx, by func(T) (audit.Entry, error), v T) error {
	if by == nil {
		return nil
	}
	e, err := by(v)
	if err != nil {
		return err
	}
	return appendAuditOf(ctx, tx, e)
}
