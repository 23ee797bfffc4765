// Package pgtest gives tests fresh PostgreSQL databases: empty ones, or
// copies of a template database prepared once (migrated, say).
//
// A test binary calls Run from its TestMain; each test that needs a database
// calls NewDatabase, or NewDatabaseFrom for a copy of a Template. The first NewDatabase starts one private cluster (see
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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

	// templates holds, per template name, the outcome of making sure it
	// exists; tmplMu serialises that work within the process.
	tmplMu    sync.Mutex
	templates map[string]error
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

// RaiseParallel makes perCPU times GOMAXPROCS the number of parallel tests
// (-test.parallel, whose own default is GOMAXPROCS) unless the command line
// sets it. Tests that spend most of their time waiting for PostgreSQL and
// loopback round trips leave the CPUs idle at the default: on two cores the
// API's tests used a fifth of one core at the default and ran twice as fast
// at 8. Call it from TestMain, before Run; it parses the command line.
func RaiseParallel(perCPU int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
	}
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
	return newDatabase(t, pool, adminURL, "")
}

// Template describes a database that is prepared once per server and then
// copied for each test that asks for it (CREATE DATABASE … TEMPLATE), which
// is far cheaper than preparing a database per test.
type Template struct {
	// Key names what Prepare puts in the database, for example a digest of
	// the migrations (see Digest). The template is kept under a name
	// derived from Key, so a changed Key gets a new template; every
	// Template with the same Key must prepare the same database.
	Key string
	// Prepare fills the new, empty database at url. It must close every
	// connection it opened before it returns.
	Prepare func(ctx context.Context, url string) error
}

// NewDatabaseFrom is NewDatabase for a copy of tmpl's database. The first
// call for a Key on a server prepares the template; later calls, in this
// test binary or in another one sharing the server, copy it. A template
// whose Prepare failed fails every test that asks for it.
func NewDatabaseFrom(t testing.TB, tmpl Template) string {
	t.Helper()
	pool, adminURL, err := shared.get()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name, err := shared.template(adminURL, tmpl)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return newDatabase(t, pool, adminURL, name)
}

// Digest returns a digest of the names and contents of the files in fsys,
// for a Template's Key.
func Digest(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digesting files: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// newDatabase creates a database with a unique name, empty or a copy of
// template, and drops it in t.Cleanup.
func newDatabase(t testing.TB, pool *pgxpool.Pool, adminURL, template string) string {
	t.Helper()
	name := databaseName(t.Name())
	dbURL, err := databaseURL(adminURL, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	create := "CREATE DATABASE " + ident
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := pool.Exec(ctx, create); err != nil {
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

// templateLock is the PostgreSQL advisory lock that serialises the making
// of templates among the test binaries sharing a server.
const templateLock int64 = 0x7067746d706c // "pgtmpl"

// template returns the name of tmpl's database, making it if this server
// lacks it. The template is prepared under a temporary name and renamed
// when complete, under an advisory lock, so that concurrent test binaries
// sharing the server neither prepare it twice nor copy a half-made one; a
// temporary database left by a binary that died while preparing is
// dropped and made again. Templates are never dropped: on a server of
// one's own (EnvDatabaseURL) those of older Keys stay until dropped by
// hand.
func (s *server) template(adminURL string, tmpl Template) (string, error) {
	sum := sha256.Sum256([]byte(tmpl.Key))
	name := "tmpl_" + hex.EncodeToString(sum[:16])
	s.tmplMu.Lock()
	defer s.tmplMu.Unlock()
	if err, done := s.templates[name]; done {
		return name, err
	}
	err := makeTemplate(adminURL, name, tmpl.Prepare)
	if s.templates == nil {
		s.templates = map[string]error{}
	}
	s.templates[name] = err
	return name, err
}

func makeTemplate(adminURL, name string, prepare func(ctx context.Context, url string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// A connection of its own, so that the session lock goes with it
	// however this returns.
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to the test server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return fmt.Errorf("locking templates: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).
		Scan(&exists); err != nil {
		return fmt.Errorf("looking for template %s: %w", name, err)
	}
	if exists {
		return nil
	}
	building := name + "_new"
	ident, final := pgx.Identifier{building}.Sanitize(), pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping unfinished template %s: %w", building, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("creating template %s: %w", building, err)
	}
	buildURL, err := databaseURL(adminURL, building)
	if err != nil {
		return err
	}
	if err := prepare(ctx, buildURL); err != nil {
		return fmt.Errorf("preparing template %s: %w", name, err)
	}
	for _, stmt := range []string{
		"ALTER DATABASE " + ident + " WITH ALLOW_CONNECTIONS false",
		"ALTER DATABASE " + ident + " RENAME TO " + final,
		"ALTER DATABASE " + final + " WITH IS_TEMPLATE true",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("finishing template %s: %w", name, err)
		}
	}
	return nil
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
