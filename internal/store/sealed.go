package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SealedColumn is one column whose values are sealed with the master key
// (package seal), with how each value's associated data is formed from
// its row's id. Rotating the master key re-seals every column listed by
// SealedColumns.
type SealedColumn struct {
	Table    string // the table
	IDColumn string // its primary key, a uuid or a text
	Column   string // the sealed bytea column (NULL: nothing sealed)
	// AD forms the associated data from the id: ADUUID (the 16 bytes of
	// a uuid id) or ADText (the bytes of a text id).
	AD ADForm
}

// ADForm says how a sealed value's associated data is formed from its
// row's id.
type ADForm int

const (
	// ADUUID: the id is a uuid; the associated data its 16 bytes (id[:]).
	ADUUID ADForm = iota
	// ADText: the id is a text; the associated data its bytes.
	ADText
)

// String names the column as table.column.
func (c SealedColumn) String() string { return c.Table + "." + c.Column }

// SealedColumns is the registry of every value sealed with the master key,
// the one place that lists them: a feature that seals a new column adds
// its line here (and the rotation then re-seals it). The names are SQL
// identifiers written into queries, never input.
func SealedColumns() []SealedColumn {
	return []SealedColumn{
		{Table: "domain", IDColumn: "id", Column: "dkim_private_key", AD: ADUUID},
		{Table: "webhook", IDColumn: "id", Column: "secret", AD: ADUUID},
		{Table: "webhook", IDColumn: "id", Column: "previous_secret", AD: ADUUID},
		{Table: "app_user", IDColumn: "id", Column: "totp_secret", AD: ADUUID},
		{Table: "installation_key", IDColumn: "purpose", Column: "sealed", AD: ADText},
		{Table: "team_data_key", IDColumn: "id", Column: "sealed_key", AD: ADUUID},
		{Table: "subject_key", IDColumn: "id", Column: "sealed_key", AD: ADUUID},
	}
}

// sqlType is the type the id column's cursor is cast to.
func (c SealedColumn) sqlType() string {
	if c.AD == ADText {
		return "text"
	}
	return "uuid"
}

// ad turns an id read as text into the associated data.
func (c SealedColumn) ad(id string) ([]byte, error) {
	if c.AD == ADText {
		return []byte(id), nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%s: id %q is not a uuid: %w", c, id, err)
	}
	return u[:], nil
}

// SealedCount is what CountSealed finds in one column.
type SealedCount struct {
	Total int64 // values (not NULL)
	Old   int64 // of those, not sealed under the current key
}

// CountSealed counts the values of c and those of them that do not start
// with current, the prefix of values sealed with the current key (the
// version byte and the key id, seal's format).
func (s *Store) CountSealed(ctx context.Context, c SealedColumn, current []byte) (SealedCount, error) {
	var n SealedCount
	q := fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE substring(%[2]s FROM 1 FOR @n) <> @prefix)
		FROM %[1]s WHERE %[2]s IS NOT NULL`, c.Table, c.Column)
	err := s.pool.QueryRow(ctx, q, pgx.NamedArgs{"n": len(current), "prefix": current}).Scan(&n.Total, &n.Old)
	if err != nil {
		return SealedCount{}, fmt.Errorf("counting %s: %w", c, mapErr(err))
	}
	return n, nil
}

// ResealBatch is what one batch of ResealOld did.
type ResealBatch struct {
	Resealed int      // values written back under the current key
	Failed   []string // ids of values reseal could not open
	// Next is the cursor of the following batch: the last id seen. Seen
	// is how many rows the batch read; fewer than the limit means the
	// column is done (rows locked by others were skipped).
	Next string
	Seen int
}

// ResealOld re-seals, in one transaction, up to limit values of c after
// the cursor after ("" to start) that do not start with current (the
// prefix of values under the current key), in id order. Rows another
// transaction holds are skipped (FOR UPDATE SKIP LOCKED), so the services
// writing these rows never wait on the rotation; a later run picks them
// up. reseal returns a value's new sealed bytes; its error marks the value
// as Failed and leaves it unchanged. The update also compares the old
// bytes, so a value changed meanwhile is never overwritten.
func (s *Store) ResealOld(ctx context.Context, c SealedColumn, current []byte, after string, limit int,
	reseal func(sealed, ad []byte) ([]byte, error)) (ResealBatch, error) {
	res := ResealBatch{Next: after}
	cursor := ""
	if after != "" {
		cursor = fmt.Sprintf(" AND %s > @after::%s", c.IDColumn, c.sqlType())
	}
	q := fmt.Sprintf(`SELECT %[2]s::text, %[3]s FROM %[1]s
		WHERE %[3]s IS NOT NULL AND substring(%[3]s FROM 1 FOR @n) <> @prefix%[4]s
		ORDER BY %[2]s LIMIT @limit FOR UPDATE SKIP LOCKED`, c.Table, c.IDColumn, c.Column, cursor)
	update := fmt.Sprintf(`UPDATE %[1]s SET %[3]s = @new WHERE %[2]s = @id::%[4]s AND %[3]s = @old`,
		c.Table, c.IDColumn, c.Column, c.sqlType())
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, q, pgx.NamedArgs{"n": len(current), "prefix": current, "after": after, "limit": limit})
		if err != nil {
			return err
		}
		type value struct {
			id     string
			sealed []byte
		}
		var vals []value
		for rows.Next() {
			var v value
			if err := rows.Scan(&v.id, &v.sealed); err != nil {
				rows.Close()
				return err
			}
			vals = append(vals, v)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		res = ResealBatch{Next: after, Seen: len(vals)}
		for _, v := range vals {
			res.Next = v.id
			ad, err := c.ad(v.id)
			if err != nil {
				return err
			}
			out, err := reseal(v.sealed, ad)
			if err != nil {
				res.Failed = append(res.Failed, v.id)
				continue
			}
			if bytes.Equal(out, v.sealed) {
				continue
			}
			tag, err := tx.Exec(ctx, update, pgx.NamedArgs{"new": out, "id": v.id, "old": v.sealed})
			if err != nil {
				return err
			}
			res.Resealed += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return ResealBatch{}, fmt.Errorf("re-sealing %s: %w", c, err)
	}
	return res, nil
}

// EnsureInstallationKey stores sealed as the installation key of purpose
// unless one is stored already, and returns the stored one: processes
// starting together all get the first one written.
func (s *Store) EnsureInstallationKey(ctx context.Context, purpose string, sealed []byte) ([]byte, error) {
	var stored []byte
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO installation_key (purpose, sealed) VALUES (@purpose, @sealed)
			ON CONFLICT (purpose) DO NOTHING`, pgx.NamedArgs{"purpose": purpose, "sealed": sealed}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT sealed FROM installation_key WHERE purpose = @purpose`,
			pgx.NamedArgs{"purpose": purpose}).Scan(&stored)
	})
	if err != nil {
		return nil, fmt.Errorf("storing the %q key: %w", purpose, err)
	}
	return stored, nil
}
