package pgcluster_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/pgcluster"
)

// removeRelocated deletes the directory a root run keeps the cluster in, if
// dir records one.
func removeRelocated(t *testing.T, dir string) {
	t.Helper()
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "location")); err == nil {
			loc := strings.TrimSpace(string(b))
			if strings.HasPrefix(loc, "/var/lib/posthaste/pg-") {
				require.NoError(t, os.RemoveAll(loc))
			}
		}
	})
}

func TestStartRestartKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pg")
	removeRelocated(t, dir)

	begin := time.Now()
	c, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir})
	require.NoError(t, err)
	t.Logf("first start (initdb): %v", time.Since(begin))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })

	appURL := c.URL()
	require.True(t, strings.HasPrefix(appURL, "postgres://posthaste:"), appURL)
	require.True(t, strings.HasSuffix(appURL, "/posthaste?sslmode=disable"), appURL)
	require.Contains(t, appURL, "@127.0.0.1:")

	conn, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE note (id int PRIMARY KEY, body text NOT NULL)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO note VALUES (1, 'kept')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	// The role is a superuser and reaches other databases too.
	admin, err := pgx.Connect(ctx, c.AdminURL("postgres"))
	require.NoError(t, err)
	var super bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super))
	require.True(t, super)
	require.NoError(t, admin.Close(ctx))

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "Stop is idempotent")
	_, err = pgx.Connect(ctx, appURL)
	require.Error(t, err, "server still accepts connections after Stop")

	pwInfo, err := os.Stat(filepath.Join(dir, "password"))
	require.NoError(t, err)
	require.Zero(t, pwInfo.Mode().Perm()&0o077, "password file readable by others: %v", pwInfo.Mode())

	if os.Geteuid() == 0 {
		// t.TempDir is 0700 and root-owned: the cluster must live elsewhere.
		b, err := os.ReadFile(filepath.Join(dir, "location"))
		require.NoError(t, err)
		loc := strings.TrimSpace(string(b))
		require.True(t, strings.HasPrefix(loc, "/var/lib/posthaste/pg-"), loc)
		fi, err := os.Stat(loc)
		require.NoError(t, err)
		runAs, err := user.Lookup("postgres")
		if err != nil {
			runAs, err = user.Lookup("nobody")
		}
		require.NoError(t, err)
		require.Equal(t, runAs.Uid, strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)))
		parent, err := os.Stat("/var/lib/posthaste")
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o755), parent.Mode().Perm())
	}

	begin = time.Now()
	c2, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir})
	require.NoError(t, err)
	t.Logf("restart: %v", time.Since(begin))
	t.Cleanup(func() { require.NoError(t, c2.Stop(context.Background())) })
	require.Equal(t, passwordOf(t, appURL), passwordOf(t, c2.URL()))

	conn, err = pgx.Connect(ctx, c2.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var body string
	require.NoError(t, conn.QueryRow(ctx, "SELECT body FROM note WHERE id = 1").Scan(&body))
	require.Equal(t, "kept", body)
}

func TestStartStopsLeftoverServer(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pg")
	removeRelocated(t, dir)

	// The first cluster is never stopped, as after a crash.
	crashed, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, crashed.Stop(context.Background())) })

	c, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })

	_, err = pgx.Connect(ctx, crashed.URL())
	require.Error(t, err, "leftover server still running")
	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pg")
	removeRelocated(t, dir)

	// Left running, as by a process that died.
	c, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	var loc string
	if b, err := os.ReadFile(filepath.Join(dir, "location")); err == nil {
		loc = strings.TrimSpace(string(b))
	}

	require.NoError(t, pgcluster.Remove(ctx, pgcluster.Config{Dir: dir}))
	_, err = pgx.Connect(ctx, c.URL())
	require.Error(t, err, "server still running after Remove")
	require.NoDirExists(t, dir)
	if loc != "" {
		require.NoDirExists(t, loc)
	}
	require.NoError(t, pgcluster.Remove(ctx, pgcluster.Config{Dir: dir}), "removing a missing cluster")
}

func TestFindBinaries(t *testing.T) {
	_, err := pgcluster.FindBinaries(t.TempDir())
	require.ErrorIs(t, err, pgcluster.ErrNotInstalled)
	require.ErrorContains(t, err, "install the Debian package postgresql (apt-get install -y postgresql)")

	_, err = pgcluster.Start(context.Background(), pgcluster.Config{Dir: t.TempDir(), BinDir: t.TempDir()})
	require.ErrorContains(t, err, "apt-get install -y postgresql")

	dir, err := pgcluster.FindBinaries("")
	if err != nil {
		t.Fatalf("no PostgreSQL on this machine: %v", err)
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		require.FileExists(t, filepath.Join(dir, name))
	}
}

func passwordOf(t *testing.T, connURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(connURL)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.Password)
	return cfg.Password
}

// Another process finds a running cluster by its directory (as `posthaste
// admin` finds the cluster of `posthaste dev`); once stopped, it is not
// found.
func TestRunningURL(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pg")
	removeRelocated(t, dir)
	_, err := pgcluster.RunningURL(dir)
	require.ErrorIs(t, err, pgcluster.ErrNotRunning, "no cluster yet")

	c, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	got, err := pgcluster.RunningURL(dir)
	require.NoError(t, err)
	require.Equal(t, c.URL(), got)
	conn, err := pgx.Connect(ctx, got)
	require.NoError(t, err)
	require.NoError(t, conn.Ping(ctx))
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, c.Stop(ctx))
	_, err = pgcluster.RunningURL(dir)
	require.ErrorIs(t, err, pgcluster.ErrNotRunning, "stopped")
}
