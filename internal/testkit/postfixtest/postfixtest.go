// Package postfixtest runs a throwaway Postfix instance for tests and the
// bench: a real, durable MTA on a loopback address, with its own main.cf
// and master.cf, queue, data directory and log file, all in one temporary
// directory that Stop removes.
//
// The master runs in the foreground as a child of this process, never as
// a system service, and exits by itself after Config.Lifetime (master -e)
// should this process die without stopping it: a parent-death signal
// would not do, since the master changes its effective user, which clears
// it. Running an instance needs Debian's postfix package and root (the
// master starts its daemons as the postfix user); Unavailable says what is
// missing.
package postfixtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// DefaultLifetime is Config.Lifetime when zero.
	DefaultLifetime = 10 * time.Minute
	// readyTimeout bounds the wait for the instance's smtpd port.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds the wait for the master after SIGTERM.
	stopTimeout = 15 * time.Second
)

// Install is how to get what Unavailable reports missing.
const Install = "install Debian's postfix package (DEBIAN_FRONTEND=noninteractive apt-get install -y postfix) and run as root"

// Config configures Start.
type Config struct {
	// Domain is the domain the instance accepts mail for (mydestination,
	// mydomain, myorigin; myhostname is "postfix."+Domain unless Main
	// sets it). Required.
	Domain string
	// Addr is the address its smtpd listens on (host:port, IPv4), a free
	// port on 127.0.0.1 when empty.
	Addr string
	// Main are more main.cf parameters. One that the defaults also set
	// replaces the default in place; the others follow in key order. The
	// defaults choose no transport: the caller sets local_transport,
	// default_transport and relay_transport (or relayhost) to where its
	// mail must go, and declares their services in Services.
	Main map[string]string
	// Services are more master.cf lines, after smtpd on Addr and the
	// daemons that queueing, bouncing and logging need (none chrooted).
	// For example "discard unix - - n - - discard", or
	// "smtp unix - - n - - smtp" and "relay unix - - n - - smtp".
	Services []string
	// Lifetime is how long the master may run before it exits by itself,
	// so that an instance outlives a process killed before its Stop by
	// that long at most; DefaultLifetime when zero. Whole seconds.
	Lifetime time.Duration
}

// Instance is a running throwaway Postfix. Its smtpd listens on Addr, in
// plain text without authentication, and relays for 127.0.0.0/8. Its
// methods may be called from several goroutines.
type Instance struct {
	addr    string
	dir     string
	logPath string
	master  *exec.Cmd
	done    chan struct{} // closed when master has been waited for
	waitErr error         // valid after done is closed
	stderr  bytes.Buffer  // the master's, read after done is closed

	stopOnce sync.Once
	stopErr  error
}

// Require fails t, saying exactly what to install, when this machine
// cannot run a throwaway Postfix with programs: ./test.sh installs
// Postfix (scripts/setup.sh, need_postfix), so a missing one is a broken
// setup, never a reason to skip.
func Require(t testing.TB, programs ...string) {
	t.Helper()
	if why := Unavailable(programs...); why != "" {
		t.Fatal(why + " (./test.sh installs Postfix)")
	}
}

// Unavailable says why a throwaway Postfix cannot run here, or returns ""
// when it can: the postfix and postconf programs, and any others named
// in programs (such as smtp-source), the postfix user and postdrop group,
// and root.
func Unavailable(programs ...string) string {
	var missing []string
	for _, prog := range append([]string{"postfix", "postconf"}, programs...) {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s not found: %s", strings.Join(missing, ", "), Install)
	}
	if _, err := user.Lookup("postfix"); err != nil {
		return "no user postfix: " + Install
	}
	if _, err := user.LookupGroup("postdrop"); err != nil {
		return "no group postdrop: " + Install
	}
	if os.Geteuid() != 0 {
		return "a throwaway Postfix must be started as root (its master runs its daemons as the postfix user)"
	}
	return ""
}

// Start starts a throwaway Postfix and returns once its smtpd accepts
// connections. The caller must call Stop, also after an error elsewhere;
// when Start fails it has already stopped and removed what it started.
// ctx bounds the start only, not the instance's life.
func Start(ctx context.Context, cfg Config) (_ *Instance, err error) {
	if why := Unavailable(); why != "" {
		return nil, errors.New(why)
	}
	if cfg.Domain == "" {
		return nil, errors.New("postfixtest: Config.Domain is required")
	}
	if cfg.Addr == "" {
		if cfg.Addr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", cfg.Addr, err)
	}
	daemons, err := postconfDefault(ctx, "daemon_directory")
	if err != nil {
		return nil, err
	}
	// Under os.TempDir(): the master opens files in the data directory as
	// the postfix user, who must be able to reach it, which the private
	// temporary directories of the bench and of tests (t.TempDir) do not
	// allow.
	dir, err := os.MkdirTemp("", "posthaste-postfix-")
	if err != nil {
		return nil, fmt.Errorf("creating the instance directory: %w", err)
	}
	in := &Instance{addr: cfg.Addr, dir: dir, logPath: filepath.Join(dir, "maillog"), done: make(chan struct{})}
	defer func() {
		if err != nil {
			if serr := in.Stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()
	if err := in.prepare(host, cfg); err != nil {
		return nil, err
	}
	etc := filepath.Join(dir, "etc")
	// `postfix check` creates the queue's subdirectories with their owners
	// and modes, as `postfix start` would before starting the master.
	if out, err := exec.CommandContext(ctx, "postfix", "-c", etc, "check").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("postfix -c %s check: %v: %s%s", etc, err, out, in.Tail(10))
	}
	lifetime := cfg.Lifetime
	if lifetime <= 0 {
		lifetime = DefaultLifetime
	}
	// The master in the foreground (no -w): it is this process's child,
	// so it can be waited for. Not CommandContext: ctx bounds the start,
	// the instance lives until Stop or its lifetime.
	in.master = exec.Command(filepath.Join(daemons, "master"), "-c", etc,
		"-e", strconv.Itoa(max(1, int(lifetime.Seconds()))))
	in.master.Env = append(os.Environ(), "MAIL_CONFIG="+etc)
	in.master.Stderr = &in.stderr
	if err := in.master.Start(); err != nil {
		return nil, fmt.Errorf("starting the Postfix master: %w", err)
	}
	go func() {
		in.waitErr = in.master.Wait()
		close(in.done)
	}()
	if err := in.waitListening(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// prepare writes the instance's directories and configuration.
func (in *Instance) prepare(host string, cfg Config) error {
	// The postfix user's daemons reach the queue and data directories
	// through this one.
	if err := os.Chmod(in.dir, 0o755); err != nil {
		return err
	}
	for _, sub := range []string{"etc", "queue", "data"} {
		if err := os.Mkdir(filepath.Join(in.dir, sub), 0o755); err != nil {
			return err
		}
	}
	pu, err := user.Lookup("postfix")
	if err != nil {
		return err
	}
	uid, err := strconv.Atoi(pu.Uid)
	if err != nil {
		return fmt.Errorf("uid of postfix %q: %w", pu.Uid, err)
	}
	if err := os.Chown(filepath.Join(in.dir, "data"), uid, -1); err != nil {
		return fmt.Errorf("giving the data directory to postfix: %w", err)
	}
	etc := filepath.Join(in.dir, "etc")
	if err := os.WriteFile(filepath.Join(etc, "main.cf"), mainCF(in.dir, host, cfg), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(etc, "master.cf"), masterCF(in.addr, cfg.Services), 0o644)
}

// waitListening polls the smtpd port until it accepts a connection, the
// master exits, ctx ends or readyTimeout passes.
func (in *Instance) waitListening(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		c, err := net.DialTimeout("tcp", in.addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-in.done:
			return fmt.Errorf("the Postfix master exited (%v): %s\n%s", in.waitErr,
				strings.TrimSpace(in.stderr.String()), in.Tail(20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postfix not listening on %s after %s:\n%s", in.addr, readyTimeout, in.Tail(20))
		}
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// postconfDefault returns the compiled-in value of a main.cf parameter.
func postconfDefault(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "postconf", "-d", "-h", name).Output()
	if err != nil {
		return "", fmt.Errorf("postconf -d -h %s: %w", name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("postconf -d -h %s: empty", name)
	}
	return v, nil
}

// Addr is the address the instance's smtpd listens on.
func (in *Instance) Addr() string { return in.addr }

// Dir is the instance's directory, which Stop removes.
func (in *Instance) Dir() string { return in.dir }

// Done is closed once the master has exited and been waited for: after
// Stop, or after the instance's lifetime.
func (in *Instance) Done() <-chan struct{} { return in.done }

// Err is the master's exit error (nil for a clean exit); valid once Done
// is closed.
func (in *Instance) Err() error {
	select {
	case <-in.done:
		return in.waitErr
	default:
		return errors.New("the Postfix master is still running")
	}
}

// Stop sends the master SIGTERM (which it passes on to its daemons, as
// `postfix stop` does), waits for it and its daemons, killing them after
// stopTimeout, and removes the instance's directory: once it returns,
// nothing of the instance runs or listens. It may be called more than
// once, and returns the first call's result.
func (in *Instance) Stop() error {
	in.stopOnce.Do(func() { in.stopErr = in.stop() })
	return in.stopErr
}

func (in *Instance) stop() error {
	var errs []error
	if in.master != nil && in.master.Process != nil {
		select {
		case <-in.done:
		default:
			if err := in.master.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("signalling the Postfix master: %w", err))
			}
			select {
			case <-in.done:
			case <-time.After(stopTimeout):
				_ = in.master.Process.Kill()
				<-in.done
				errs = append(errs, fmt.Errorf("the Postfix master did not stop within %s; killed it", stopTimeout))
			}
		}
		if err := endGroup(in.master.Process.Pid); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(in.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the Postfix instance: %w", err))
	}
	return errors.Join(errs...)
}

// endGroup ends what remains of the process group pgid, the master's: the
// master runs in a session of its own (setsid), and on SIGTERM, or at the
// end of its lifetime, it signals its daemons and exits without waiting
// for them. It sends them SIGTERM again, waits until none runs, and kills
// them after stopTimeout.
func endGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if waitGroup(pgid, stopTimeout) {
		return nil
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroup(pgid, stopTimeout)
	return fmt.Errorf("the Postfix daemons did not stop within %s; killed them", stopTimeout)
}

// waitGroup polls until no process of group pgid runs, and reports
// whether that happened within timeout.
func waitGroup(pgid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for groupRuns(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// groupRuns reports whether a process of group pgid runs. The daemons are
// orphans once the master has exited, reaped by whatever PID 1 is, when
// it gets to it: a zombie does not count, which only /proc tells; where
// it cannot be read, any member does.
func groupRuns(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		// proc(5): "pid (comm) state ppid pgrp ...", comm may hold
		// spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" {
			return true
		}
	}
	return false
}
