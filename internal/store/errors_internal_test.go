package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// mapErr is the store's one translation of driver errors; the API answers
// ErrUnavailable with 503 (safe to retry) and anything unknown with 500.
func TestMapErr(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("inserting emails: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		name string
		err  error
		want error // nil: passed through unchanged
	}{
		{"no rows", pgx.ErrNoRows, ErrNotFound},
		{"unique violation", pg("23505"), ErrConflict},
		{"missing reference", pg("23503"), ErrNotFound},
		{"bad uuid", pg("22P02"), ErrNotFound},
		{"admin shutdown (pg_ctl stop)", pg("57P01"), ErrUnavailable},
		{"crash shutdown", pg("57P02"), ErrUnavailable},
		{"starting up", pg("57P03"), ErrUnavailable},
		{"too many connections", pg("53300"), ErrUnavailable},
		{"connection failure", pg("08006"), ErrUnavailable},
		{"connection lost mid-statement", fmt.Errorf("receiving: %w", io.ErrUnexpectedEOF), ErrUnavailable},
		{"network error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, ErrUnavailable},
		{"deadline", context.DeadlineExceeded, ErrUnavailable},
		{"query canceled is no outage", pg("57014"), nil},
		{"syntax error", pg("42601"), nil},
		{"other", errors.New("boom"), nil},
	} {
		got := mapErr(tc.err)
		if tc.want == nil {
			require.Equal(t, tc.err, got, tc.name)
			continue
		}
		require.ErrorIs(t, got, tc.want, tc.name)
	}
	require.NoError(t, mapErr(nil))
}
