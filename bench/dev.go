package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/posthaste/posthaste/internal/pgcluster"
)

const (
	readyTimeout = 3 * time.Minute
	stopTimeout  = 60 * time.Second
)

// buildBinary builds ./cmd/posthaste of the module the working directory is
// in into dir and returns the binary's path.
func buildBinary(ctx context.Context, dir string) (string, error) {
	var gomod bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Env = goEnv()
	cmd.Stdout = &gomod
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	mod := strings.TrimSpace(gomod.String())
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the posthaste module: run from its root or pass -bin")
	}
	bin := filepath.Join(dir, "posthaste")
	cmd = exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/posthaste")
	cmd.Dir = filepath.Dir(mod)
	cmd.Env = goEnv()
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building ./cmd/posthaste: %w", err)
	}
	return bin, nil
}

// goEnv is the environment for the go command: the toolchain in use unless
// the caller chose otherwise.
func goEnv() []string {
	env := os.Environ()
	if os.Getenv("GOTOOLCHAIN") == "" {
		env = append(env, "GOTOOLCHAIN=local")
	}
	return env
}

// credentials is <data dir>/credentials.json as `posthaste dev` writes it.
type credentials struct {
	APIKey   string `json:"api_key"`
	Email    string `json:"email"`
	Password string `json:"password"`
	TeamID   string `json:"team_id"`
}

// devSpec is how to run `posthaste dev`: a process restarted from the same
// spec finds its data and listens where its clients look.
type devSpec struct {
	bin          string
	dataDir      string
	logPath      string // output of every process started from the spec, appended
	httpPort     int
	temporalPort int
	env          []string // more variables, after the ones the spec sets
}

// devProcess is a running `posthaste dev`.
type devProcess struct {
	bin      string // the posthaste binary
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	waitErr  error         // valid after exited is closed
	log      *os.File
	logPath  string
	dataDir  string
	base     string // API base URL
	temporal string // Temporal frontend host:port
	smtp     string // SMTP gateway, implicit TLS, host:port
	smtpCert string // its self-signed certificate
	inbound  string // inbound MX, plain SMTP, host:port ("" when off)
	creds    credentials
	started  time.Time
	readyIn  time.Duration // from start until /readyz answered, set by waitReady
}

// startDev starts `bin dev` with a data dir under root, on free loopback
// ports, and returns once /readyz answers 200 and credentials.json is read.
// Its output goes to root/dev.log; extra are more environment variables.
// The caller stops it with stop, which also removes the PostgreSQL cluster
// it created.
func startDev(ctx context.Context, bin, root string, logf func(string, ...any), extra ...string) (*devProcess, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	smtp := "127.0.0.1:" + strconv.Itoa(ports[2])
	inbound := "127.0.0.1:" + strconv.Itoa(ports[4])
	spec := devSpec{
		bin:          bin,
		dataDir:      filepath.Join(root, "data"),
		logPath:      filepath.Join(root, "dev.log"),
		httpPort:     ports[0],
		temporalPort: ports[1],
		env: []string{
			"POSTHASTE_SMTP_LISTEN=tls://" + smtp + ",starttls://127.0.0.1:" + strconv.Itoa(ports[3]),
			// The bench measures the pipeline, not the per-team rate limit.
			"POSTHASTE_DEFAULT_RATE_LIMIT=1000000",
			// dev's inbound MX on a free port rather than its fixed
			// default, which a second bench (or a dev) on this machine may
			// hold; the inbound step (inbound.go) measures it.
			"POSTHASTE_INBOUND_LISTEN=" + inbound,
			// Its clients all come from loopback: room for the inbound
			// step's 16 connections above the per-address limit (10).
			"POSTHASTE_INBOUND_MAX_CONNS_PER_IP=64",
			// The inbound step sends thousands of messages from 127.0.0.1
			// to one team: no message rates or budget, so its figures
			// measure accepting, as before the limits existed.
			"POSTHASTE_INBOUND_RATE_PER_ADDRESS=0",
			"POSTHASTE_INBOUND_RATE_PER_NETWORK=0",
			"POSTHASTE_INBOUND_RATE_RETURN_PATH=0",
			"POSTHASTE_INBOUND_DAILY_MESSAGES=0",
			"POSTHASTE_INBOUND_STORAGE_BYTES=0",
		},
	}
	spec.env = append(spec.env, extra...)
	d, err := launchDev(spec)
	if err != nil {
		return nil, err
	}
	d.smtp = smtp
	d.inbound = inbound
	d.smtpCert = filepath.Join(d.dataDir, "tls", "smtp.crt")
	if err := d.waitReady(ctx); err != nil {
		if serr := d.stop(); serr != nil {
			logf("stopping dev: %v", serr)
		}
		return nil, err
	}
	if err := d.readCredentials(); err != nil {
		if serr := d.stop(); serr != nil {
			logf("stopping dev: %v", serr)
		}
		return nil, err
	}
	return d, nil
}

// launchDev starts `bin dev` as spec says, with the variables of extra
// last, and returns without waiting for it to be ready (see waitReady).
func launchDev(spec devSpec, extra ...string) (*devProcess, error) {
	d := &devProcess{
		bin:      spec.bin,
		exited:   make(chan struct{}),
		logPath:  spec.logPath,
		dataDir:  spec.dataDir,
		base:     "http://127.0.0.1:" + strconv.Itoa(spec.httpPort),
		temporal: "127.0.0.1:" + strconv.Itoa(spec.temporalPort),
	}
	var err error
	d.log, err = os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(spec.bin, "dev")
	d.cmd.Env = append(devEnviron(),
		"POSTHASTE_DATA_DIR="+d.dataDir,
		"POSTHASTE_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(spec.httpPort),
		"POSTHASTE_TEMPORAL_PORT="+strconv.Itoa(spec.temporalPort),
		"POSTHASTE_TEMPORAL_IP=127.0.0.1",
		"POSTHASTE_TEMPORAL_UI_PORT=0",
		"POSTHASTE_LOG_LEVEL=warn",
	)
	d.cmd.Env = append(append(d.cmd.Env, spec.env...), extra...)
	d.cmd.Stdout = d.log
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		d.log.Close()
		return nil, fmt.Errorf("starting %s dev: %w", spec.bin, err)
	}
	d.started = time.Now()
	go func() {
		d.waitErr = d.cmd.Wait()
		d.log.Close() // the child wrote to the file itself
		close(d.exited)
	}()
	return d, nil
}

// readCredentials reads <data dir>/credentials.json, which dev writes on
// its first start.
func (d *devProcess) readCredentials() error {
	b, err := os.ReadFile(filepath.Join(d.dataDir, "credentials.json"))
	if err == nil {
		err = json.Unmarshal(b, &d.creds)
	}
	if err == nil && d.creds.APIKey == "" {
		err = errors.New("no api_key")
	}
	if err != nil {
		return fmt.Errorf("reading credentials.json: %w", err)
	}
	return nil
}

// devEnviron is the bench's environment without the variables that would
// change what dev does: the run uses the settings the bench chooses, a
// private PostgreSQL cluster unless it sets DATABASE_URL itself.
func devEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "POSTHASTE_") || strings.HasPrefix(k, "DATABASE_URL") || strings.HasPrefix(k, "TEMPORAL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (d *devProcess) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-d.exited:
			return fmt.Errorf("dev exited before it was ready (%v):\n%s", d.waitErr, d.tail(40))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if res, err := client.Get(d.base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				d.readyIn = time.Since(d.started)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dev not ready after %s:\n%s", readyTimeout, d.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop terminates the process, then removes the PostgreSQL cluster it
// created, including a cluster relocated under /var/lib/posthaste, and the
// data dir.
func (d *devProcess) stop() error {
	var errs []error
	if err := d.terminate(); err != nil {
		errs = append(errs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := pgcluster.Remove(ctx, pgcluster.Config{Dir: filepath.Join(d.dataDir, "pg")}); err != nil {
		errs = append(errs, fmt.Errorf("removing dev's PostgreSQL cluster: %w", err))
	}
	if err := os.RemoveAll(d.dataDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// terminate sends SIGTERM and waits for the process, killing it after
// stopTimeout; an unclean exit is an error. A process that has already
// exited is left as it is.
func (d *devProcess) terminate() error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling dev: %w", err)
	}
	select {
	case <-d.exited:
		if d.waitErr != nil {
			return fmt.Errorf("dev exited with %v:\n%s", d.waitErr, d.tail(20))
		}
		return nil
	case <-time.After(stopTimeout):
		d.kill()
		return fmt.Errorf("dev did not stop within %s after SIGTERM; killed it", stopTimeout)
	}
}

// kill SIGKILLs the process, as a power cut would, and waits for it.
func (d *devProcess) kill() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// tail returns the last n lines of dev's output.
func (d *devProcess) tail(n int) string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// withDev starts a dev on bin in root with the extra environment, runs
// fn with it and stops it, joining the stop's error to fn's.
func withDev(ctx context.Context, bin, root string, logf func(string, ...any), env []string,
	fn func(dev *devProcess) error) (err error) {
	logf("starting posthaste dev")
	dev, err := startDev(ctx, bin, root, logf, env...)
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping posthaste dev")
		if serr := dev.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	return fn(dev)
}

// withDeliveryDev is withDev for a dev that delivers to a delivery side
// of its own (the bench's DNS server and MX), whose ready line it prints.
func withDeliveryDev(ctx context.Context, bin, root string, p, logf func(string, ...any),
	fn func(dev *devProcess, side *deliverySide) error) error {
	side, err := startDeliverySide()
	if err != nil {
		return err
	}
	defer side.close()
	return withDev(ctx, bin, root, logf, side.env(), func(dev *devProcess) error {
		p("dev: ready in %s  API %s  Temporal %s  data dir %s", fmtDur(dev.readyIn), dev.base, dev.temporal, dev.dataDir)
		return fn(dev, side)
	})
}
