// Package pgtest gives tests fresh, empty PostgreSQL databases.
//
// A test binary calls Run from its TestMain; each test that needs a database
// calls NewDatabase. The first NewDatabase starts one private cluster (see
// package pgcluster, with durability traded for speed) for the whole test
// binary in a temporary directory; Run stops it and removes the directory
// after the tests. When POSTHASTE_TEST_DATABASE_URL holds the URL of a
// superuser on an existing server, that server is used and nothing is
// started.
//
// A test binary that dies without returning from Run (a panic, a timeout, a
// kill) leaves its cluster behind; the next test binary that starts a
// cluster stops such leftovers and removes their directories.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/posthaste/posthaste/internal/pgcluster"
)

// EnvDatabaseURL names the variable holding the URL of an existing server
// to use instead of starting one. Its role must be allowed to create and
// drop databases.
const EnvDatabaseURL = "POSTHASTE_TEST_DATABASE_URL"

const (
	dirPrefix    = "posthaste-pgtest-"
	lockFile     = "lock"
	clusterDir   = "pg"
	startTimeout = 2 * time.Minute
	opTimeout    = 30 * time.Second
)

// server is the one server of a test binary. Run and NewDatabase share no
// handle, so it lives in a package variable; it is only ever changed under
// its mutex.
type server struct {
	mu      sync.Mutex
	inRun   bool
	started bool
	err     error // from the one start attempt

	adminURL string
	pool     *pgxpool.Pool
	cluster  *pgcluster.Cluster // nil when EnvDatabaseURL is used
	dir      string
	lock     *os.File
}

var shared server

// Run runs the tests of m and then stops the server that NewDatabase
// started, if any. Use it as the body of TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
func Run(m *testing.M) int {
	shared.mu.Lock()
	shared.inRun = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.inRun = false
	if err := shared.shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// NewDatabase creates an empty database with a unique name and returns its
// URL (same role as the server's admin URL, which may create and drop
// databases). The database is dropped, with any connections still open to
// it, in t.Cleanup.
func NewDatabase(t testing.TB) string {
	t.Helper()
	pool, adminURL, err := shared.get()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := databaseName(t.Name())
	dbURL, err := databaseURL(adminURL, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return dbURL
}

// get returns the admin pool and URL, starting the server on first use.
func (s *server) get() (*pgxpool.Pool, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inRun {
		return nil, "", errors.New("NewDatabase needs TestMain to call pgtest.Run")
	}
	if !s.started {
		s.started = true
		s.err = s.start()
	}
	if s.err != nil {
		return nil, "", s.err
	}
	return s.pool, s.adminURL, nil
}

func (s *server) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		s.adminURL = u
	} else if err := s.startCluster(ctx); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("connecting to the test server: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("connecting to the test server: %w", err)
	}
	s.pool = pool
	return nil
}

// startCluster starts a private cluster in a new temporary directory, which
// it locks for the lifetime of the process so that sweepLeftovers in other
// test binaries leaves it alone.
func (s *server) startCluster(ctx context.Context) error {
	sweepLeftovers(ctx)
	dir, err := os.MkdirTemp("", dirPrefix+"*")
	if err != nil {
		return fmt.Errorf("creating cluster directory: %w", err)
	}
	s.dir = dir
	// The cluster's own directory is owned by the account PostgreSQL runs
	// as (see pgcluster); its parent must let that account through.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("setting mode of %s: %w", dir, err)
	}
	if s.lock, err = lockDir(dir, true); err != nil {
		return err
	}
	s.cluster, err = pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(dir, clusterDir), NoSync: true})
	if err != nil {
		return fmt.Errorf("starting test cluster: %w", err)
	}
	s.adminURL = s.cluster.AdminURL("postgres")
	return nil
}

// shutdown closes the pool, stops the cluster and removes its directory.
func (s *server) shutdown() error {
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	var errs []error
	if s.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := s.cluster.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		s.cluster = nil
	}
	if s.dir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := removeClusterDir(ctx, s.dir); err != nil {
			errs = append(errs, err)
		}
		s.dir = ""
	}
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	return errors.Join(errs...)
}

// lockDir takes an exclusive lock on dir's lock file, creating the file if
// create is set; the kernel releases the lock when the process ends, however
// it ends.
func lockDir(dir string, create bool) (*os.File, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return f, nil
}

// sweepLeftovers stops and removes the clusters of test binaries that died
// without cleaning up: directories whose lock nobody holds. Failures are
// ignored; the sweep is a courtesy.
func sweepLeftovers(ctx context.Context) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		lock, err := lockDir(dir, false)
		if err != nil {
			continue // in use, or not fully created yet
		}
		_ = removeClusterDir(ctx, dir)
		lock.Close()
	}
}

// removeClusterDir stops the cluster in dir if it still runs and removes it
// with dir.
func removeClusterDir(ctx context.Context, dir string) error {
	if err := pgcluster.Remove(ctx, pgcluster.Config{Dir: filepath.Join(dir, clusterDir)}); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing cluster: %w", err)
	}
	return nil
}

// databaseName returns a unique database name that hints at the test: a
// random part, then the test name reduced to [a-z0-9_], within PostgreSQL's
// 63-byte identifier limit.
func databaseName(testName string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	var sb strings.Builder
	sb.WriteString("t_" + hex.EncodeToString(b) + "_")
	for _, r := range strings.ToLower(testName) {
		if sb.Len() >= 63 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// databaseURL returns adminURL with its database replaced by name.
func databaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL", EnvDatabaseURL)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}
