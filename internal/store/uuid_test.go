package store

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestUUIDEncoding sends ids in every shape the store uses, through the
// store's pool, and reads them back as PostgreSQL saw them.
func TestUUIDEncoding(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: pgtest.NewDatabase(t)})
	require.NoError(t, err)
	defer s.Close()
	id, other := uuid.Must(uuid.NewV7()), uuid.New()
	var none *uuid.UUID
	var got struct {
		One, Ptr string
		Null     *string
		Many     []string
		Ptrs     []*string
	}
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT @one::uuid::text, @ptr::uuid::text, @null::uuid::text,
		@many::uuid[]::text[], @ptrs::uuid[]::text[]`, pgx.NamedArgs{"one": id, "ptr": &other, "null": none,
		"many": []uuid.UUID{id, other}, "ptrs": []*uuid.UUID{nil, &id}}).
		Scan(&got.One, &got.Ptr, &got.Null, &got.Many, &got.Ptrs))
	require.Equal(t, id.String(), got.One)
	require.Equal(t, other.String(), got.Ptr)
	require.Nil(t, got.Null)
	require.Equal(t, []string{id.String(), other.String()}, got.Many)
	require.Equal(t, []*string{nil, &got.One}, got.Ptrs)
}

// BenchmarkUUIDArrayEncoding encodes the ids of a batch's emails and
// their domains (pointers: nil for the sandbox).
func BenchmarkUUIDArrayEncoding(b *testing.B) {
	ids := make([]uuid.UUID, 100)
	ptrs := make([]*uuid.UUID, 100)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
		ptrs[i] = &ids[i]
	}
	for _, bc := range []struct {
		name     string
		register bool
	}{{"valuer", false}, {"registered", true}} {
		for _, arg := range []struct {
			name  string
			value any
		}{{"ids", ids}, {"pointers", ptrs}} {
			b.Run(bc.name+"/"+arg.name, func(b *testing.B) {
				m := pgtype.NewMap()
				if bc.register {
					registerUUID(m)
				}
				var buf []byte
				for b.Loop() {
					var err error
					if buf, err = m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, arg.value, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
