package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A throwaway Postfix instance: the durable reference for accepting mail.
// It accepts mail for one domain into its own queue (each queue file
// written and fsynced before the 250 that ends DATA, as Postfix always
// does) and hands it to the discard transport, so that nothing leaves the
// machine. Everything it has lives in one temporary directory: main.cf and
// master.cf, the queue, the data directory and its log.

const (
	// postfixReadyTimeout bounds the wait for the instance's smtpd port.
	postfixReadyTimeout = 30 * time.Second
	// postfixStopTimeout bounds the wait for the master after SIGTERM.
	postfixStopTimeout = 15 * time.Second
)

// postfixConfig configures startPostfix.
type postfixConfig struct {
	// domain is the domain the instance accepts mail for (mydestination),
	// "bench.test" when empty. Its mail, and any other the loopback
	// clients relay, goes to the discard transport.
	domain string
	// extra are more main.cf parameters, written after the defaults (the
	// last setting of a parameter wins).
	extra map[string]string
	// lifetime is how long the master may run before it exits by itself
	// (master -e), so that an instance outlives a bench killed before its
	// stop by that long at most; postfixLifetime when zero.
	lifetime time.Duration
}

// postfixLifetime is the default of postfixConfig.lifetime. (A parent-death
// signal would not do: the master changes its effective user, which clears
// it.)
const postfixLifetime = 15 * time.Minute

// postfixInstance is a running throwaway Postfix. Its smtpd listens on
// addr, in plain text without authentication; stop ends it and removes
// its directory.
type postfixInstance struct {
	addr    string // 127.0.0.1:port
	domain  string
	dir     string
	logPath string // maillog_file, written by postlogd
	master  *exec.Cmd
	exited  chan struct{} // closed when master has been waited for
	waitErr error         // valid after exited is closed
	stderr  bytes.Buffer  // the master's, read after exited is closed
	stopped bool
}

// postfixUnavailable says why a throwaway Postfix cannot run here, or
// returns "" when it can: the Debian postfix package's programs, the
// postfix user and root (the master starts its daemons as that user).
func postfixUnavailable() string {
	var missing []string
	for _, prog := range []string{"postfix", "postconf", "smtp-source"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s not found: install Debian's postfix package "+
			"(DEBIAN_FRONTEND=noninteractive apt-get install -y postfix)", strings.Join(missing, ", "))
	}
	if _, err := user.Lookup("postfix"); err != nil {
		return "no user postfix: install Debian's postfix package"
	}
	if os.Geteuid() != 0 {
		return "a private Postfix instance must be started as root (its master runs its daemons as the postfix user)"
	}
	return ""
}

// startPostfix starts a throwaway durable Postfix on a free loopback port
// and returns once its smtpd accepts connections. The caller must call
// stop, also after an error elsewhere: the master runs in the foreground
// as a child of this process, never as a system service, and exits by
// itself after cfg.lifetime should this process die without stopping it.
func startPostfix(ctx context.Context, cfg postfixConfig) (_ *postfixInstance, err error) {
	if why := postfixUnavailable(); why != "" {
		return nil, errors.New(why)
	}
	if cfg.domain == "" {
		cfg.domain = "bench.test"
	}
	daemons, err := postconfDefault(ctx, "daemon_directory")
	if err != nil {
		return nil, err
	}
	// Under os.TempDir(): the master opens files in the data directory as
	// the postfix user, who must be able to reach it, which the private
	// temporary directories of the bench and of tests do not allow.
	dir, err := os.MkdirTemp("", "posthaste-postfix-")
	if err != nil {
		return nil, err
	}
	pf := &postfixInstance{domain: cfg.domain, dir: dir, logPath: filepath.Join(dir, "maillog"),
		exited: make(chan struct{})}
	defer func() {
		if err != nil {
			if serr := pf.stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()
	// The postfix user's daemons reach the queue and data directories
	// through this one.
	if err := os.Chmod(dir, 0o755); err != nil {
		return pf, err
	}
	for _, sub := range []string{"etc", "queue", "data"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return pf, err
		}
	}
	pfUser, err := user.Lookup("postfix")
	if err != nil {
		return pf, err
	}
	uid, _ := strconv.Atoi(pfUser.Uid)
	if err := os.Chown(filepath.Join(dir, "data"), uid, -1); err != nil {
		return pf, fmt.Errorf("giving the data directory to postfix: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return pf, err
	}
	pf.addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	etc := filepath.Join(dir, "etc")
	if err := os.WriteFile(filepath.Join(etc, "main.cf"), postfixMainCF(dir, cfg), 0o644); err != nil {
		return pf, err
	}
	if err := os.WriteFile(filepath.Join(etc, "master.cf"), postfixMasterCF(pf.addr), 0o644); err != nil {
		return pf, err
	}
	// `postfix check` creates the queue's subdirectories with their owners
	// and modes, as `postfix start` would before starting the master.
	if out, err := exec.CommandContext(ctx, "postfix", "-c", etc, "check").CombinedOutput(); err != nil {
		return pf, fmt.Errorf("postfix -c %s check: %v: %s%s", etc, err, out, pf.tail(10))
	}
	// The master in the foreground (no -w): it is this process's child,
	// so it can be waited for.
	lifetime := cfg.lifetime
	if lifetime <= 0 {
		lifetime = postfixLifetime
	}
	pf.master = exec.Command(filepath.Join(daemons, "master"), "-c", etc,
		"-e", strconv.Itoa(int(lifetime.Seconds())))
	pf.master.Env = append(os.Environ(), "MAIL_CONFIG="+etc)
	pf.master.Stderr = &pf.stderr
	if err := pf.master.Start(); err != nil {
		return pf, fmt.Errorf("starting the Postfix master: %w", err)
	}
	go func() {
		pf.waitErr = pf.master.Wait()
		close(pf.exited)
	}()
	deadline := time.Now().Add(postfixReadyTimeout)
	for {
		c, err := net.DialTimeout("tcp", pf.addr, time.Second)
		if err == nil {
			c.Close()
			return pf, nil
		}
		select {
		case <-pf.exited:
			return pf, fmt.Errorf("the Postfix master exited (%v): %s\n%s", pf.waitErr,
				strings.TrimSpace(pf.stderr.String()), pf.tail(20))
		case <-ctx.Done():
			return pf, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return pf, fmt.Errorf("postfix not listening on %s after %s:\n%s", pf.addr, postfixReadyTimeout, pf.tail(20))
		}
	}
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

// postfixMainCF is the instance's main.cf: its own directories, loopback
// only, every message to the discard transport, no alias or local
// recipient lookups, logging into a file of its own.
func postfixMainCF(dir string, cfg postfixConfig) []byte {
	params := [][2]string{
		{"compatibility_level", "3.6"},
		{"config_directory", filepath.Join(dir, "etc")},
		{"queue_directory", filepath.Join(dir, "queue")},
		{"data_directory", filepath.Join(dir, "data")},
		{"mail_owner", "postfix"},
		{"setgid_group", "postdrop"},
		{"myhostname", "postfix." + cfg.domain},
		{"mydomain", cfg.domain},
		{"myorigin", cfg.domain},
		{"mydestination", cfg.domain},
		{"mynetworks", "127.0.0.0/8"},
		{"inet_interfaces", "loopback-only"},
		{"inet_protocols", "ipv4"},
		{"smtpd_relay_restrictions", "permit_mynetworks, reject_unauth_destination"},
		{"default_transport", "discard"},
		{"local_transport", "discard"},
		{"relay_transport", "discard"},
		{"alias_maps", ""},
		{"alias_database", ""},
		{"local_recipient_maps", ""},
		{"biff", "no"},
		{"maillog_file", filepath.Join(dir, "maillog")},
		{"maillog_file_prefixes", dir},
	}
	keys := make([]string, 0, len(cfg.extra))
	for k := range cfg.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		params = append(params, [2]string{k, cfg.extra[k]})
	}
	var b bytes.Buffer
	b.WriteString("# A throwaway instance of go run ./bench (bench/postfix.go).\n")
	for _, p := range params {
		fmt.Fprintf(&b, "%s = %s\n", p[0], p[1])
	}
	return b.Bytes()
}

// postfixMasterCF is the instance's master.cf: smtpd on addr and the
// daemons that queueing and discarding need, none chrooted.
func postfixMasterCF(addr string) []byte {
	return []byte(`# service type private unpriv chroot wakeup maxproc command
` + addr + ` inet n - n - - smtpd
cleanup   unix n - n - 0 cleanup
qmgr      unix n - n 300 1 qmgr
rewrite   unix - - n - - trivial-rewrite
bounce    unix - - n - 0 bounce
defer     unix - - n - 0 bounce
trace     unix - - n - 0 bounce
verify    unix - - n - 1 verify
flush     unix n - n - 0 flush
proxymap  unix - - n - - proxymap
showq     unix n - n - - showq
error     unix - - n - - error
retry     unix - - n - - error
discard   unix - - n - - discard
anvil     unix - - n - 1 anvil
scache    unix - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
`)
}

// postfixLog counts what the instance logged: messages the queue manager
// removed (each one queued, then discarded) and rejected SMTP commands.
type postfixLog struct {
	removed  int
	rejected int
}

func (pf *postfixInstance) readLog() (postfixLog, error) {
	f, err := os.Open(pf.logPath)
	if err != nil {
		return postfixLog{}, err
	}
	defer f.Close()
	var l postfixLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "postfix/qmgr[") && strings.HasSuffix(line, ": removed"):
			l.removed++
		case strings.Contains(line, "postfix/smtpd[") && strings.Contains(line, ": reject: "):
			l.rejected++
		}
	}
	return l, sc.Err()
}

// waitRemoved waits until the log shows n messages removed from the queue
// (postlogd writes it a moment after the fact) and returns the count seen.
func (pf *postfixInstance) waitRemoved(ctx context.Context, n int, timeout time.Duration) (postfixLog, error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := pf.readLog()
		if err != nil {
			return l, fmt.Errorf("reading the Postfix log: %w", err)
		}
		if l.removed >= n {
			return l, nil
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("the Postfix log shows %d of %d messages queued and discarded after %s", l.removed, n, timeout)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return l, err
		}
	}
}

// tail returns the last n lines of the instance's log.
func (pf *postfixInstance) tail(n int) string {
	b, err := os.ReadFile(pf.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop sends the master SIGTERM (which it passes on to its daemons, as
// `postfix stop` does), waits for it, killing it after postfixStopTimeout,
// and removes the instance's directory. It may be called more than once.
func (pf *postfixInstance) stop() error {
	if pf.stopped {
		return nil
	}
	pf.stopped = true
	var errs []error
	if pf.master != nil && pf.master.Process != nil {
		select {
		case <-pf.exited:
		default:
			if err := pf.master.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("signalling the Postfix master: %w", err))
			}
			select {
			case <-pf.exited:
			case <-time.After(postfixStopTimeout):
				_ = pf.master.Process.Kill()
				<-pf.exited
				errs = append(errs, fmt.Errorf("the Postfix master did not stop within %s; killed it", postfixStopTimeout))
			}
		}
	}
	if err := os.RemoveAll(pf.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the Postfix instance: %w", err))
	}
	return errors.Join(errs...)
}

// smtpSource times Postfix's smtp-source sending n messages of
// smtpPayload bytes over conns connections kept open (-d) to addr, from
// and to the given addresses. smtp-source exits 0 even when the server
// rejects, so the caller counts what arrived on the other side.
func smtpSource(ctx context.Context, addr string, n, conns int, from, to string) (rate, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, "smtp-source", "-d", "-m", strconv.Itoa(n), "-s", strconv.Itoa(conns),
		"-l", strconv.Itoa(smtpPayload), "-f", from, "-t", to, addr).CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return rate{}, fmt.Errorf("smtp-source: %v: %s", err, out)
	}
	return rate{n: n, elapsed: elapsed}, nil
}

// durableReference measures a throwaway durable Postfix accepting each
// run's messages (smtp-source, 1 KB bodies, runs[i].conns connections),
// one run after the other on one instance, and checks in its log that
// every message was queued and discarded before the next run begins.
func durableReference(ctx context.Context, runs []smtpRun, logf func(string, ...any)) (err error) {
	pf, err := startPostfix(ctx, postfixConfig{})
	if err != nil {
		return err
	}
	defer func() {
		if serr := pf.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	want := 0
	for i := range runs {
		r := &runs[i]
		logf("postfix durable queue (%s), %d messages over %d connections", pf.addr, r.messages, r.conns)
		got, err := smtpSource(ctx, pf.addr, r.messages, r.conns, "a@"+pf.domain, "b@"+pf.domain)
		if err != nil {
			return err
		}
		want += r.messages
		l, err := pf.waitRemoved(ctx, want, time.Minute)
		if err != nil {
			return err
		}
		if l.rejected > 0 || l.removed != want {
			return fmt.Errorf("postfix logged %d messages removed (want %d) and %d rejected commands:\n%s",
				l.removed, want, l.rejected, pf.tail(10))
		}
		r.durable = got
	}
	return nil
}
