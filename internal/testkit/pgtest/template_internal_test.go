package pgtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestMakeTemplateConcurrently: test binaries sharing a server (several
// makeTemplate calls at once, none knowing of the others) prepare a
// template once, and none returns before it is complete: a copy made
// right after any of them returns has what Prepare made.
func TestMakeTemplateConcurrently(t *testing.T) {
	pool, adminURL, err := shared.get()
	require.NoError(t, err)
	ctx := context.Background()
	name := "tmpl_concurrently"
	var prepared atomic.Int32
	prepare := runSQL(&prepared, "CREATE TABLE done (id int); SELECT pg_sleep(0.2)")
	t.Cleanup(func() { dropTemplate(t, pool, name) })

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			if errs[i] = makeTemplate(adminURL, name, prepare); errs[i] != nil {
				return
			}
			url := newDatabase(t, pool, adminURL, name)
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close(ctx)
			_, errs[i] = c.Exec(ctx, "SELECT FROM done")
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, prepared.Load())
}

// TestMakeTemplateAfterACrash: the half-made template that a test binary
// dying in Prepare leaves behind is neither copied nor in the way; the
// next binary makes the template again.
func TestMakeTemplateAfterACrash(t *testing.T) {
	pool, adminURL, err := shared.get()
	require.NoError(t, err)
	ctx := context.Background()
	name := "tmpl_after_a_crash"
	t.Cleanup(func() { dropTemplate(t, pool, name) })
	_, err = pool.Exec(ctx, "CREATE DATABASE "+name+"_new")
	require.NoError(t, err, "what a binary that died in Prepare leaves")

	var prepared atomic.Int32
	require.NoError(t, makeTemplate(adminURL, name, runSQL(&prepared, "CREATE TABLE done (id int)")))
	var left bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)",
		name+"_new").Scan(&left))
	require.False(t, left)
}

func dropTemplate(t *testing.T, pool *pgxpool.Pool, name string) {
	ctx := context.Background()
	for _, stmt := range []string{"ALTER DATABASE " + name + " WITH IS_TEMPLATE false",
		"DROP DATABASE " + name + " WITH (FORCE)"} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Errorf("dropping template %s: %v", name, err)
		}
	}
}

// TestNewDatabaseFrom: each copy has what Prepare made, is a database of
// its own, and Prepare runs once per Key, not once per copy.
func TestNewDatabaseFrom(t *testing.T) {
	ctx := context.Background()
	var prepared atomic.Int32
	tmpl := Template{Key: t.Name() + " v1",
		Prepare: runSQL(&prepared, "CREATE TABLE greeting (text text); INSERT INTO greeting VALUES ('hello')")}
	connect := func(url string) *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	a, b := connect(NewDatabaseFrom(t, tmpl)), connect(NewDatabaseFrom(t, tmpl))
	_, err := a.Exec(ctx, "UPDATE greeting SET text = 'changed'")
	require.NoError(t, err)
	var text string
	require.NoError(t, b.QueryRow(ctx, "SELECT text FROM greeting").Scan(&text))
	require.Equal(t, "hello", text, "a copy is changed only by its own tests")
	require.EqualValues(t, 1, prepared.Load())

	changed := tmpl
	changed.Key = t.Name() + " v2"
	connect(NewDatabaseFrom(t, changed))
	require.EqualValues(t, 2, prepared.Load(), "another Key is another template")
}

// runSQL returns a Template.Prepare that runs sql and counts its runs.
func runSQL(runs *atomic.Int32, sql string) func(ctx context.Context, url string) error {
	return func(ctx context.Context, url string) error {
		runs.Add(1)
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
}
