package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/mxlisten"
	"github.com/posthaste/posthaste/internal/outbox"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/smtpgw"
)

// mxServer is a running inbound MX.
type mxServer struct {
	srv  *mxlisten.Server
	addr net.Addr
	done chan struct{} // closed when Serve returned, with err set
	err  error
	// closeLimiter releases the Redis of the rates (a no-op without).
	closeLimiter func() error
}

// verpKey is the key of return-path signatures, derived from the master
// key for that purpose only (sending derives the same to sign them); nil
// without a master key.
func verpKey(keys *seal.Box) []byte {
	if keys == nil {
		return nil
	}
	return keys.DeriveKey(reports.VERPKeyPurpose)
}

// mailtoKey is the key of the mailto unsubscribe addresses of our emails
// (sending derives the same to make them); nil without a master key.
func mailtoKey(keys *seal.Box) []byte {
	if keys == nil {
		return nil
	}
	return keys.DeriveKey(mailto.KeyPurpose)
}

// startMX listens on addr and serves the inbound MX: bounces and
// complaints to our return paths are committed to st with an outbox entry
// each, and notify (the dispatcher's Notify) is called after each commit.
// STARTTLS is offered with the certificate of POSTHASTE_TLS_CERT_FILE and
// POSTHASTE_TLS_KEY_FILE, reloaded when it changes, or in dev (devDir
// set) with the self-signed one the gateway uses.
func startMX(cfg config.Config, st *store.Store, keys *seal.Box, notify func(), addr, devDir string,
	reg prometheus.Registerer, logger *slog.Logger) (*mxServer, error) {
	var tlsConf *tls.Config
	certFile, keyFile := cfg.SMTP.CertFile, cfg.SMTP.KeyFile
	if certFile == "" && devDir != "" {
		certFile, keyFile = filepath.Join(devDir, "tls", "smtp.crt"), filepath.Join(devDir, "tls", "smtp.key")
		if _, err := smtpgw.EnsureSelfSigned(certFile, keyFile,
			[]string{"localhost", cfg.Inbound.Hostname, "127.0.0.1", "::1"}); err != nil {
			return nil, fmt.Errorf("making a self-signed certificate: %w", err)
		}
	}
	if certFile != "" {
		certs, err := smtpgw.NewCertReloader(certFile, keyFile, logger.With("component", "inbound"))
		if err != nil {
			return nil, err
		}
		tlsConf = certs.TLSConfig()
	} else {
		logger.Warn("the inbound MX offers no STARTTLS: POSTHASTE_TLS_CERT_FILE is unset")
	}
	router := inroute.New(st.Received, st.Emails, verpKey(keys), mailtoKey(keys))
	acc := store.NewInbound(st, notify)
	// The rates and budget of inbound mail: the budget counted in
	// PostgreSQL, the rates in this process or, with REDIS_URL, shared by
	// the MX replicas.
	budget := inmail.Budget{DailyMessages: cfg.Inbound.DailyMessages, StorageBytes: cfg.Inbound.StorageBytes,
		Usage: st.Received}
	acc.SetBudget(budget)
	var limiter mxlisten.RateLimiter = ratelimit.NewLocal(ratelimit.LocalConfig{})
	closeLimiter := func() error { return nil }
	if cfg.Limits.RedisURL != "" {
		rl, closeFn, err := ratelimit.NewRedis(ratelimit.RedisConfig{URL: cfg.Limits.RedisURL},
			logger.With("component", "ratelimit"))
		if err != nil {
			return nil, err
		}
		limiter, closeLimiter = rl, closeFn
	}
	srv, err := mxlisten.New(mxlisten.Config{
		Hostname:           cfg.Inbound.Hostname,
		TLS:                tlsConf,
		MaxMessageBytes:    cfg.Inbound.MaxMessageBytes,
		MaxRecipients:      cfg.Inbound.MaxRecipients,
		MaxConns:           cfg.Inbound.MaxConns,
		MaxConnsPerIP:      cfg.Inbound.MaxConnsPerIP,
		MaxConnsPerNet:     cfg.Inbound.MaxConnsPerNet,
		ConnReservePercent: cfg.Inbound.ConnReservePercent,
		SessionTimeout:     cfg.Inbound.SessionTimeout,
		MaxIdleCommands:    cfg.Inbound.MaxIdleCommands,
		Limits: mxlisten.Limits{PerAddress: cfg.Inbound.RatePerAddress, PerNetwork: cfg.Inbound.RatePerNetwork,
			ReturnPath: cfg.Inbound.RateReturnPath, Limiter: limiter},
		Budget:   budget,
		TempDir:  os.TempDir(),
		Resolver: newResolver(cfg.Delivery),
		Logger:   logger,
		Metrics:  mxlisten.NewMetrics(reg),
	}, router, acc)
	if err != nil {
		_ = closeLimiter()
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = closeLimiter()
		return nil, fmt.Errorf("inbound MX: %w", err)
	}
	m := &mxServer{srv: srv, addr: ln.Addr(), done: make(chan struct{}), closeLimiter: closeLimiter}
	go func() { defer close(m.done); m.err = srv.Serve(ln) }()
	return m, nil
}

// stop lets the transactions in progress finish within the shutdown
// budget, then cuts the rest.
func (m *mxServer) stop(logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		logger.Warn("inbound MX connections cut at shutdown", "err", err)
	}
	select {
	case <-m.done:
	case <-time.After(shutdownBudget):
	}
	_ = m.closeLimiter()
}

// inboundListen is the MX's address: POSTHASTE_INBOUND_LISTEN, or def
// when it is unset; "" when it is off.
func inboundListen(cfg config.Inbound, def string) string {
	switch cfg.Listen {
	case "":
		return def
	case "off":
		return ""
	}
	return cfg.Listen
}

// newDispatcher is the outbox dispatcher of a process: it starts the
// workflows of the entries any process committed, woken by PostgreSQL's
// notifications (store.ListenOutbox) and polling as a fallback.
func newDispatcher(cfg config.Config, st *store.Store, tc client.Client, metrics *telemetry.Metrics,
	logger *slog.Logger) *outbox.Dispatcher {
	disp := outbox.New(outbox.Config{RetryMax: cfg.Dispatch.RetryMax, GiveUpAfter: cfg.Dispatch.GiveUp,
		Listener: st.Webhooks}, st.Webhooks, newStarter(cfg, tc), logger)
	disp.Started = func(wait time.Duration) { metrics.OutboxWait.Observe(wait.Seconds()) }
	disp.Ended = func(kind, reason string) { metrics.OutboxEnded.WithLabelValues(kind, reason).Inc() }
	return disp
}

// runMX serves the inbound MX (POSTHASTE_INBOUND_LISTEN, :25 by default)
// and drains the outbox against an external Temporal and PostgreSQL; its
// metrics, /healthz and /readyz are on POSTHASTE_METRICS_ADDR. It runs on
// the host POSTHASTE_BOUNCE_HOST names, the MX of every domain's
// return-path subdomain, separate from the submission gateway (`smtp`).
func runMX(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	addr := inboundListen(cfg.Inbound, config.DefaultInboundListen)
	if addr == "" {
		return usageError{errors.New("POSTHASTE_INBOUND_LISTEN=off leaves the mx command nothing to do")}
	}
	st, tc, keys, _, closeAll, err := connectExternal(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeAll()
	reg, metrics := newRegistry()
	disp := newDispatcher(cfg, st, tc, metrics, logger)
	defer startDispatcher(disp)()
	mx, err := startMX(cfg, st, keys, disp.Notify, addr, "", reg, logger)
	if err != nil {
		return err
	}
	defer mx.stop(logger)
	opsAddr, served, err := serveHTTP(ctx, cfg.MetricsAddr, opsHandler(reg, readyChecks(st, tc), cfg.MetricsToken),
		cfg.HTTP, logger)
	if err != nil {
		return err
	}
	logger.Info("ready", "inbound", mx.addr.String(), "metrics_addr", opsAddr.String())
	select {
	case err := <-served:
		if err != nil {
			return fmt.Errorf("serving metrics: %w", err)
		}
	case <-mx.done:
		return fmt.Errorf("inbound MX stopped: %w", mx.err)
	}
	return nil
}
