package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SubjectKey is the stored key of a team's subject (codec.Keys): its row
// id, which is the associated data of its seal, and the sealed key.
type SubjectKey struct {
	ID     uuid.UUID
	Sealed []byte
}

// SubjectKeys returns the stored keys of a team's subjects, by subject (as
// a string of its bytes), storing fresh[i] for subjects[i] when it has
// none; concurrent callers all get the key stored first. One round trip
// when no other caller raced, two otherwise.
func (s *Privacy) SubjectKeys(ctx context.Context, teamID uuid.UUID, subjects [][]byte, fresh []SubjectKey) (map[string]SubjectKey, error) {
	ids := make([]uuid.UUID, len(fresh))
	sealed := make([][]byte, len(fresh))
	for i, k := range fresh {
		ids[i], sealed[i] = k.ID, k.Sealed
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO subject_key (id, team_id, subject, sealed_key)
		SELECT t.id, @team, t.subject, t.sealed
		FROM unnest(@ids::uuid[], @subjects::bytea[], @sealed::bytea[]) AS t(id, subject, sealed)
		ON CONFLICT (team_id, subject) DO NOTHING RETURNING subject, id, sealed_key`,
		pgx.NamedArgs{"team": teamID, "ids": ids, "subjects": subjects, "sealed": sealed})
	if err != nil {
		return nil, mapErr(err)
	}
	got, err := collectSubjectKeys(rows, len(subjects))
	if err != nil || len(got) == len(subjects) {
		return got, err
	}
	// The INSERT's snapshot cannot see rows that concurrent transactions
	// inserted: those subjects are read by a statement of its own.
	var rest [][]byte
	for _, sub := range subjects {
		if _, ok := got[string(sub)]; !ok {
			rest = append(rest, sub)
		}
	}
	more, err := s.FindSubjectKeys(ctx, teamID, rest)
	if err != nil {
		return nil, err
	}
	for k, v := range more {
		got[k] = v
	}
	return got, nil
}

// FindSubjectKeys returns the stored keys of those of a team's subjects
// that have one (never made, or erased: absent), by subject as a string
// of its bytes.
func (s *Privacy) FindSubjectKeys(ctx context.Context, teamID uuid.UUID, subjects [][]byte) (map[string]SubjectKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT subject, id, sealed_key FROM subject_key
		WHERE team_id = @team AND subject = ANY(@subjects::bytea[])`,
		pgx.NamedArgs{"team": teamID, "subjects": subjects})
	if err != nil {
		return nil, mapErr(err)
	}
	return collectSubjectKeys(rows, len(subjects))
}

func collectSubjectKeys(rows pgx.Rows, n int) (map[string]SubjectKey, error) {
	got := make(map[string]SubjectKey, n)
	var subject []byte
	var k SubjectKey
	_, err := pgx.ForEachRow(rows, []any{&subject, &k.ID, &k.Sealed}, func() error {
		got[string(subject)] = SubjectKey{ID: k.ID, Sealed: k.Sealed}
		return nil
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return got, nil
}

// DeleteSubjectKey deletes a team's subject key; deleting a missing one
// is not an error.
func (s *Privacy) DeleteSubjectKey(ctx context.Context, teamID uuid.UUID, subject []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM subject_key WHERE team_id = @team AND subject = @subject`,
		pgx.NamedArgs{"team": teamID, "subject": subject})
	return mapErr(err)
}
