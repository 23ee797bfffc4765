package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Page selects a slice of a list ordered newest first by id (all listed
// ids are UUIDv7, so id order is creation order). After and Before are
// exclusive cursors; at most one is set.
type Page struct {
	Limit  int
	After  *uuid.UUID // older than this id
	Before *uuid.UUID // newer than this id
}

// listPage runs base (a SELECT with a WHERE clause and no ORDER/LIMIT) for
// one page and reports whether more rows lie beyond it in that direction.
func listPage[T any](ctx context.Context, s *Store, p Page, base string, args pgx.NamedArgs,
	scan func(pgx.Row) (T, error)) ([]T, bool, error) {
	q := base
	order := " ORDER BY id DESC"
	switch {
	case p.After != nil:
		q += " AND id < @cursor"
		args["cursor"] = *p.After
	case p.Before != nil:
		q += " AND id > @cursor"
		args["cursor"] = *p.Before
		order = " ORDER BY id ASC"
	}
	q += order + " LIMIT @limit"
	args["limit"] = p.Limit + 1
	rows, err := s.pool.Query(ctx, q, args)
	if err != nil {
		return nil, false, mapErr(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("listing: %w", mapErr(err))
	}
	more := len(out) > p.Limit
	if more {
		out = out[:p.Limit]
	}
	if p.Before != nil {
		slices.Reverse(out)
	}
	return out, more, nil
}
