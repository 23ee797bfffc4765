package pgtest_test

import (
	"context"
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestNewDatabaseIsolated(t *testing.T) {
	ctx := context.Background()
	urlA := pgtest.NewDatabase(t)
	urlB := pgtest.NewDatabase(t)
	require.NotEqual(t, urlA, urlB)

	a, err := pgx.Connect(ctx, urlA)
	require.NoError(t, err)
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, urlB)
	require.NoError(t, err)
	defer b.Close(ctx)

	var nameA, nameB string
	require.NoError(t, a.QueryRow(ctx, "SELECT current_database()").Scan(&nameA))
	require.NoError(t, b.QueryRow(ctx, "SELECT current_database()").Scan(&nameB))
	require.NotEqual(t, nameA, nameB)

	_, err = a.Exec(ctx, "CREATE TABLE only_in_a (id int)")
	require.NoError(t, err)
	var count int
	require.NoError(t, b.QueryRow(ctx,
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&count))
	require.Zero(t, count, "database B is not empty")
}

func TestNewDatabaseDroppedAfterTest(t *testing.T) {
	ctx := context.Background()
	var inner string
	var conn *pgx.Conn
	t.Run("sub", func(t *testing.T) {
		inner = pgtest.NewDatabase(t)
		var err error
		// Left open past the subtest on purpose: the drop must not wait for it.
		conn, err = pgx.Connect(ctx, inner)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE TABLE t (id int)")
		require.NoError(t, err)
	})
	require.NotNil(t, conn)
	defer conn.Close(ctx)
	_, err := pgx.Connect(ctx, inner)
	require.ErrorContains(t, err, "does not exist")
}

// RaiseParallel sets -test.parallel unless the command line did.
func TestRaiseParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	saved := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", saved) })
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	pgtest.RaiseParallel(3)
	want := strconv.Itoa(3 * runtime.GOMAXPROCS(0))
	if explicit {
		want = saved
	}
	require.Equal(t, want, f.Value.String())
}
