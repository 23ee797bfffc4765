// Package pgcluster runs a private PostgreSQL cluster for development and
// tests: it initializes a data directory with the local initdb on first use,
// starts the postmaster with pg_ctl on a free loopback port, creates the
// application database and stops the server again.
//
// The cluster listens on 127.0.0.1 only, with Unix sockets disabled, and
// authenticates every connection with SCRAM-SHA-256 as the superuser
// "posthaste" whose random password is kept in a 0600 file.
//
// PostgreSQL refuses to run as root. When the current process is root, the
// PostgreSQL programs run as the user "postgres" (or "nobody" when that does
// not exist), and the files they use are owned by that user. When that user
// cannot reach Config.Dir, the cluster is kept under /var/lib/posthaste and
// its location is recorded in Config.Dir.
package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// superuser is the role initdb creates; the application connects as it.
	superuser = "posthaste"
	// appDatabase is the database URL points at.
	appDatabase = "posthaste"

	passwordFile = "password"
	locationFile = "location"
	dataDir      = "data"
	logFile      = "postgres.log"

	// relocationRoot holds clusters whose Config.Dir the unprivileged user
	// cannot reach (root only).
	relocationRoot = "/var/lib/posthaste"

	// startAttempts bounds the retries when the chosen port was taken
	// between picking it and the postmaster binding it.
	startAttempts = 3
)

// ErrNotInstalled is returned (wrapped) when initdb, pg_ctl and postgres
// cannot be found.
var ErrNotInstalled = errors.New("postgresql binaries not found: install the Debian package postgresql (apt-get install -y postgresql)")

// Config describes where a cluster lives and how to run it.
type Config struct {
	// Dir is where the cluster lives, for example "<data dir>/pg". It is
	// created if missing.
	Dir string
	// BinDir holds initdb, pg_ctl and postgres. Empty means search: the
	// directory of initdb on PATH, else the highest
	// /usr/lib/postgresql/*/bin.
	BinDir string
	// NoSync trades durability for speed, for throwaway clusters in tests:
	// initdb skips its final sync and the server runs with fsync=off. Never
	// set it for data that must survive a crash.
	NoSync bool
	// Port is the port to listen on; 0 picks a free one. A fixed port
	// lets a test stop a cluster and start it again where its clients
	// look for it.
	Port int
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
}

// Cluster is a running PostgreSQL server started by Start. Stop it with Stop;
// the postmaster outlives the process otherwise (the next Start on the same
// Dir stops such a leftover server before starting a new one).
type Cluster struct {
	log      *slog.Logger
	bin      string
	home     string // owned by the account running PostgreSQL
	runAs    *account
	password string
	port     int

	mu      sync.Mutex
	stopped bool
}

// account is the unprivileged user PostgreSQL runs as when we are root.
type account struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
}

// Start initializes the cluster in cfg.Dir if needed, starts it on a free
// port of 127.0.0.1, waits until it accepts connections and creates the
// application database if missing. A server left running by an earlier
// process on the same directory is stopped first.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "pgcluster")
	if cfg.Dir == "" {
		return nil, errors.New("pgcluster: Dir is empty")
	}
	bin, err := FindBinaries(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", cfg.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	runAs, err := unprivilegedAccount()
	if err != nil {
		return nil, err
	}
	home, err := prepareHome(dir, runAs, log)
	if err != nil {
		return nil, err
	}
	c := &Cluster{log: log, bin: bin, home: home, runAs: runAs}

	initialized, err := exists(filepath.Join(c.dataDir(), "PG_VERSION"))
	if err != nil {
		return nil, err
	}
	c.password, err = loadPassword(filepath.Join(dir, passwordFile), !initialized)
	if err != nil {
		return nil, err
	}
	if !initialized {
		if err := c.initdb(ctx, cfg.NoSync); err != nil {
			return nil, err
		}
	}
	if err := c.stopLeftover(ctx); err != nil {
		return nil, err
	}
	if err := c.start(ctx, cfg.NoSync, cfg.Port); err != nil {
		return nil, err
	}
	if err := c.ensureDatabase(ctx); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// URL returns the connection URL of the application database.
func (c *Cluster) URL() string { return c.AdminURL(appDatabase) }

// AdminURL returns a connection URL for database db with the same
// credentials as URL; the role is a superuser.
func (c *Cluster) AdminURL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down (fast mode: open transactions are rolled back)
// and waits until it has exited. Calling it again does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.pgctlStop(ctx); err != nil {
		return err
	}
	c.stopped = true
	c.log.Info("postgres stopped", "port", c.port)
	return nil
}

// ErrNotRunning is returned (wrapped) by RunningURL when no server runs
// on the cluster.
var ErrNotRunning = errors.New("no PostgreSQL server runs on the cluster")

// RunningURL returns the URL of the application database of the cluster
// in dir that another process started and still runs (`posthaste dev`),
// read from its password file and the port its postmaster.pid records;
// the error wraps ErrNotRunning when no live server runs on it.
func RunningURL(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	home := dir
	loc := filepath.Join(dir, locationFile)
	switch b, err := os.ReadFile(loc); {
	case err == nil:
		if home = strings.TrimSpace(string(b)); !filepath.IsAbs(home) {
			return "", fmt.Errorf("reading %s: %q is not an absolute path", loc, home)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading %s: %w", loc, err)
	}
	pidPath := filepath.Join(home, dataDir, "postmaster.pid")
	b, err := os.ReadFile(pidPath)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: %s has no postmaster.pid", ErrNotRunning, dir)
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", pidPath, err)
	}
	// postmaster.pid: the pid, the data directory, the start time, the
	// port, ... (PostgreSQL's miscadmin.h, LOCK_FILE_LINE_*).
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return "", fmt.Errorf("%w: %s is incomplete", ErrNotRunning, pidPath)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return "", fmt.Errorf("%w: %s names no process", ErrNotRunning, pidPath)
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("%w: postmaster %d has exited", ErrNotRunning, pid)
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil || port <= 0 || port > 65535 {
		return "", fmt.Errorf("%w: %s names no port", ErrNotRunning, pidPath)
	}
	pw, err := loadPassword(filepath.Join(dir, passwordFile), false)
	if err != nil {
		return "", err
	}
	c := &Cluster{password: pw, port: port}
	return c.URL(), nil
}

// Remove deletes the cluster in cfg.Dir: it stops a server still running on
// it (one whose Cluster was never stopped, or that a dead process left
// behind), then removes cfg.Dir and, when the cluster was kept elsewhere,
// that directory. A missing cfg.Dir is not an error. cfg.NoSync is ignored.
func Remove(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "pgcluster")
	if cfg.Dir == "" {
		return errors.New("pgcluster: Dir is empty")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", cfg.Dir, err)
	}
	if ok, err := exists(dir); err != nil || !ok {
		return err
	}
	home := dir
	loc := filepath.Join(dir, locationFile)
	switch b, err := os.ReadFile(loc); {
	case err == nil:
		if home = strings.TrimSpace(string(b)); !filepath.IsAbs(home) {
			return fmt.Errorf("reading %s: %q is not an absolute path", loc, home)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading %s: %w", loc, err)
	}
	if running, err := exists(filepath.Join(home, dataDir, "postmaster.pid")); err != nil {
		return err
	} else if running {
		bin, err := FindBinaries(cfg.BinDir)
		if err != nil {
			return err
		}
		runAs, err := unprivilegedAccount()
		if err != nil {
			return err
		}
		c := &Cluster{log: log, bin: bin, home: home, runAs: runAs}
		if err := c.stopLeftover(ctx); err != nil {
			return err
		}
	}
	for _, d := range []string{home, dir} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing cluster: %w", err)
		}
	}
	log.Info("cluster removed", "dir", dir, "location", home)
	return nil
}

// FindBinaries returns the directory holding initdb, pg_ctl and postgres.
// A non-empty binDir is checked and returned; an empty one means search:
// the directory of initdb on PATH (symlinks resolved), else the highest
// version under /usr/lib/postgresql/*/bin. The error wraps ErrNotInstalled
// when nothing usable is found.
func FindBinaries(binDir string) (string, error) {
	if binDir != "" {
		if !hasBinaries(binDir) {
			return "", fmt.Errorf("looking in %s: %w", binDir, ErrNotInstalled)
		}
		return binDir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && hasBinaries(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasBinaries(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, d := range dirs {
		if hasBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("looking on PATH and in /usr/lib/postgresql: %w", ErrNotInstalled)
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions orders PostgreSQL directory names such as "9.6" and "15"
// numerically.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return strings.Compare(a, b)
}

// unprivilegedAccount returns the account to run PostgreSQL as, or nil when
// the current process is not root.
func unprivilegedAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("looking up an unprivileged user to run postgres as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing uid of %s: %w", u.Username, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing gid of %s: %w", u.Username, err)
	}
	a := &account{name: u.Username, uid: uint32(uid), gid: uint32(gid)}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			a.groups = append(a.groups, uint32(n))
		}
	}
	if !slices.Contains(a.groups, a.gid) {
		a.groups = append(a.groups, a.gid)
	}
	return a, nil
}

// prepareHome returns the directory that holds the data directory and the
// server log. Without runAs that is dir itself. As root it is dir (owned by
// runAs) when runAs can reach it, else a directory under relocationRoot
// whose path is recorded in dir/location.
func prepareHome(dir string, runAs *account, log *slog.Logger) (string, error) {
	if runAs == nil {
		return dir, nil
	}
	loc := filepath.Join(dir, locationFile)
	home := ""
	switch b, err := os.ReadFile(loc); {
	case err == nil:
		home = strings.TrimSpace(string(b))
		if !filepath.IsAbs(home) {
			return "", fmt.Errorf("reading %s: %q is not an absolute path", loc, home)
		}
	case errors.Is(err, fs.ErrNotExist):
		if canTraverse(filepath.Dir(dir), runAs) {
			home = dir
			break
		}
		sum := sha256.Sum256([]byte(dir))
		home = filepath.Join(relocationRoot, "pg-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(relocationRoot, 0o755); err != nil {
			return "", fmt.Errorf("creating %s: %w", relocationRoot, err)
		}
		if err := os.Chmod(relocationRoot, 0o755); err != nil {
			return "", fmt.Errorf("setting mode of %s: %w", relocationRoot, err)
		}
		if err := writeFileAtomic(loc, []byte(home+"\n"), 0o644); err != nil {
			return "", err
		}
		log.Info("cluster relocated: its directory is not reachable by the postgres user",
			"dir", dir, "location", home, "user", runAs.name)
	default:
		return "", fmt.Errorf("reading %s: %w", loc, err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", home, err)
	}
	fi, err := os.Stat(home)
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", home, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != runAs.uid {
		if err := os.Chown(home, int(runAs.uid), int(runAs.gid)); err != nil {
			return "", fmt.Errorf("handing %s to %s: %w", home, runAs.name, err)
		}
	}
	return home, nil
}

// canTraverse reports whether a can search dir and each of its ancestors,
// judged by owner, group and other permission bits (ACLs are not read).
func canTraverse(dir string, a *account) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := fi.Mode().Perm()
		var allowed bool
		switch {
		case st.Uid == a.uid:
			allowed = mode&0o100 != 0
		case slices.Contains(a.groups, st.Gid):
			allowed = mode&0o010 != 0
		default:
			allowed = mode&0o001 != 0
		}
		if !allowed {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// loadPassword reads the superuser password from path; when the file is
// missing and create is set (a cluster yet to be initialized), it makes a
// new random one.
func loadPassword(path string, create bool) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		pw := strings.TrimSpace(string(b))
		if pw == "" {
			return "", fmt.Errorf("reading %s: file is empty", path)
		}
		return pw, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading password: %w", err)
	case !create:
		return "", fmt.Errorf("cluster exists but its password file %s is missing; remove the cluster directory to start afresh", path)
	}
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating password: %w", err)
	}
	pw := hex.EncodeToString(raw)
	if err := writeFileAtomic(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", err
	}
	return pw, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.home, dataDir) }
func (c *Cluster) logPath() string { return filepath.Join(c.home, logFile) }

// initdb creates the data directory. A data directory without PG_VERSION
// (an interrupted initdb) is removed first.
func (c *Cluster) initdb(ctx context.Context, noSync bool) error {
	data := c.dataDir()
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("removing incomplete %s: %w", data, err)
	}
	c.log.Info("initializing cluster", "data_dir", data)
	begin := time.Now()
	pwfile := filepath.Join(c.home, ".initdb-password")
	if err := os.WriteFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if err := c.own(pwfile); err != nil {
		return err
	}
	args := []string{
		"-D", data,
		"-U", superuser,
		"--auth=scram-sha-256",
		"--pwfile=" + pwfile,
		"-E", "UTF8",
		"--locale=C",
	}
	if noSync {
		args = append(args, "--no-sync")
	}
	if out, err := c.command(ctx, "initdb", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("running initdb: %w: %s", err, lastLines(out, 10))
	}
	c.log.Info("cluster initialized", "data_dir", data, "duration", time.Since(begin).Round(time.Millisecond))
	return nil
}

// stopLeftover stops a postmaster that an earlier process started on this
// data directory and never stopped. A pid file naming a dead process is left
// to postgres, which replaces it; one naming a live process that is not
// postgres (the pid was reused) is removed.
func (c *Cluster) stopLeftover(ctx context.Context) error {
	pidPath := filepath.Join(c.dataDir(), "postmaster.pid")
	b, err := os.ReadFile(pidPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", pidPath, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return nil
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil &&
		!strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres") {
		c.log.Warn("removing stale postmaster.pid naming another program", "pid", pid)
		if err := os.Remove(pidPath); err != nil {
			return fmt.Errorf("removing stale %s: %w", pidPath, err)
		}
		return nil
	}
	c.log.Warn("stopping postgres left running by an earlier process", "pid", pid, "data_dir", c.dataDir())
	return c.pgctlStop(ctx)
}

// start runs the postmaster on a free port, retrying with another port when
// the chosen one was taken in the meantime.
func (c *Cluster) start(ctx context.Context, noSync bool, port int) error {
	begin := time.Now()
	var err error
	for range startAttempts {
		c.port = port
		if port == 0 {
			if c.port, err = freePort(); err != nil {
				return err
			}
		}
		var logTail string
		if logTail, err = c.pgctlStart(ctx, noSync); err == nil {
			c.log.Info("postgres started", "port", c.port, "data_dir", c.dataDir(),
				"duration", time.Since(begin).Round(time.Millisecond))
			return nil
		}
		err = fmt.Errorf("starting postgres: %w\n%s", err, logTail)
		if port != 0 || !strings.Contains(logTail, "could not bind") && !strings.Contains(logTail, "could not create listen socket") {
			return err
		}
		c.log.Warn("port taken, retrying", "port", c.port)
	}
	return err
}

// pgctlStart runs pg_ctl start and returns what the server logged during
// the attempt, for error messages.
func (c *Cluster) pgctlStart(ctx context.Context, noSync bool) (string, error) {
	logPath := c.logPath()
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	opts := []string{
		"-c listen_addresses=127.0.0.1",
		"-c port=" + strconv.Itoa(c.port),
		"-c unix_socket_directories=''",
		"-c shared_buffers=128MB",
		"-c max_connections=200",
	}
	if noSync {
		opts = append(opts, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
	} else {
		opts = append(opts, "-c fsync=on")
	}
	out, err := c.command(ctx, "pg_ctl", "start",
		"-D", c.dataDir(),
		"-l", logPath,
		"-w", "-t", "60",
		"-o", strings.Join(opts, " "),
	).CombinedOutput()
	if err == nil {
		return "", nil
	}
	tail := lastLines(out, 5)
	if f, ferr := os.Open(logPath); ferr == nil {
		defer f.Close()
		if _, ferr := f.Seek(offset, io.SeekStart); ferr == nil {
			if b, ferr := io.ReadAll(io.LimitReader(f, 1<<20)); ferr == nil {
				tail += "\n" + lastLines(b, 20)
			}
		}
	}
	return tail, err
}

// pgctlStop stops the server of the data directory; a server that is not
// running, or whose data directory is gone (see Remove), counts as stopped.
func (c *Cluster) pgctlStop(ctx context.Context) error {
	if ok, err := exists(c.dataDir()); err != nil || !ok {
		return err
	}
	out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "60").CombinedOutput()
	if err == nil {
		return nil
	}
	// pg_ctl status exits with 3 when no server is running.
	var exitErr *exec.ExitError
	if serr := c.command(ctx, "pg_ctl", "status", "-D", c.dataDir()).Run(); errors.As(serr, &exitErr) && exitErr.ExitCode() == 3 {
		return nil
	}
	return fmt.Errorf("stopping postgres: %w: %s", err, lastLines(out, 5))
}

// ensureDatabase creates the application database if it does not exist.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := connect(ctx, c.AdminURL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var found bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", appDatabase).Scan(&found); err != nil {
		return fmt.Errorf("checking for database %s: %w", appDatabase, err)
	}
	if found {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{appDatabase}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s: %w", appDatabase, err)
	}
	c.log.Info("database created", "database", appDatabase)
	return nil
}

// connect dials the server, retrying for a few seconds: pg_ctl reports the
// server ready once it accepts connections, but a slow machine may still
// refuse the first attempt.
func connect(ctx context.Context, connURL string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, connURL)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to postgres: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// command prepares one of the PostgreSQL programs, run as the unprivileged
// account when we are root, in the cluster's home directory, without PG*
// variables that could redirect it.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.home
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if c.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: c.runAs.uid, Gid: c.runAs.gid, Groups: c.runAs.groups,
		}}
		cmd.Env = append(cmd.Env, "HOME="+c.home, "USER="+c.runAs.name, "LOGNAME="+c.runAs.name)
	}
	return cmd
}

// own hands path to the unprivileged account, if any.
func (c *Cluster) own(path string) error {
	if c.runAs == nil {
		return nil
	}
	if err := os.Chown(path, int(c.runAs.uid), int(c.runAs.gid)); err != nil {
		return fmt.Errorf("handing %s to %s: %w", path, c.runAs.name, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("checking %s: %w", path, err)
	}
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so readers never see a partial file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// lastLines returns at most n trailing lines of out, trimmed.
func lastLines(out []byte, n int) string {
	lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
