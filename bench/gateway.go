package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/posthaste/posthaste/internal/pgcluster"
)

// gatewayProcess is a `posthaste smtp` process, the SMTP gateway as it is
// deployed (docs/operations.md, "Production topology"): its own process, against dev's PostgreSQL
// and Temporal, so the mail it accepts is processed by dev's worker.
type gatewayProcess struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	smtp    string // implicit TLS, host:port
	ops     string // /metrics and /readyz
}

// startGateway starts `bin smtp` beside dev, with dev's master key and
// certificate, and returns once its /readyz answers 200. Its output is
// appended to dev's log.
func startGateway(ctx context.Context, dev *devProcess) (*gatewayProcess, error) {
	url, err := pgcluster.RunningURL(filepath.Join(dev.dataDir, "pg"))
	if err != nil {
		return nil, fmt.Errorf("finding dev's PostgreSQL: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	g := &gatewayProcess{exited: make(chan struct{}),
		smtp: "127.0.0.1:" + strconv.Itoa(ports[0]), ops: "127.0.0.1:" + strconv.Itoa(ports[1])}
	log, err := os.OpenFile(dev.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	g.cmd = exec.Command(dev.bin, "smtp")
	g.cmd.Env = append(devEnviron(),
		"DATABASE_URL="+url,
		"TEMPORAL_ADDRESS="+dev.temporal,
		"POSTHASTE_MASTER_KEY_FILE="+filepath.Join(dev.dataDir, "master.key"),
		"POSTHASTE_TLS_CERT_FILE="+filepath.Join(dev.dataDir, "tls", "smtp.crt"),
		"POSTHASTE_TLS_KEY_FILE="+filepath.Join(dev.dataDir, "tls", "smtp.key"),
		"POSTHASTE_SMTP_LISTEN=tls://"+g.smtp,
		"POSTHASTE_METRICS_ADDR="+g.ops,
		"POSTHASTE_DEFAULT_RATE_LIMIT=1000000",
		"POSTHASTE_LOG_LEVEL=warn",
	)
	g.cmd.Stdout, g.cmd.Stderr = log, log
	if err := g.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s smtp: %w", dev.bin, err)
	}
	go func() {
		g.waitErr = g.cmd.Wait()
		log.Close()
		close(g.exited)
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-g.exited:
			return nil, fmt.Errorf("posthaste smtp exited before it was ready (%v); see %s", g.waitErr, dev.logPath)
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), g.stop())
		default:
		}
		if res, err := client.Get("http://" + g.ops + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return g, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("posthaste smtp not ready after %s; see %s", readyTimeout, dev.logPath), g.stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop terminates the gateway (SIGTERM, then SIGKILL after stopTimeout).
func (g *gatewayProcess) stop() error {
	select {
	case <-g.exited:
		return nil
	default:
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-g.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = g.cmd.Process.Kill()
		<-g.exited
		return errors.New("posthaste smtp did not stop in time: killed")
	}
}
