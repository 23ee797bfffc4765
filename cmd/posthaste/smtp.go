package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/smtpgw"
)

// smtpListeners are the configured listeners, or def when
// POSTHASTE_SMTP_LISTEN is unset.
func smtpListeners(cfg config.SMTP, def string) []config.SMTPListener {
	if cfg.Listen != nil {
		return cfg.Listen
	}
	ls, err := config.ParseSMTPListen(def)
	if err != nil {
		panic(err) // the defaults are constants covered by tests
	}
	return ls
}

// startGateway starts the SMTP gateway on listeners with the certificate
// of POSTHASTE_TLS_CERT_FILE and POSTHASTE_TLS_KEY_FILE; in dev (devDir
// set) a self-signed one under devDir is made on first run when they are
// unset. It returns nil when there is no listener.
func startGateway(cfg config.Config, in *intake, listeners []config.SMTPListener, devDir string,
	metrics *telemetry.Metrics, logger *slog.Logger) (*smtpgw.Gateway, error) {
	if len(listeners) == 0 {
		return nil, nil
	}
	certFile, keyFile := cfg.SMTP.CertFile, cfg.SMTP.KeyFile
	if certFile == "" {
		if devDir == "" {
			return nil, usageError{errors.New("the SMTP gateway needs POSTHASTE_TLS_CERT_FILE and POSTHASTE_TLS_KEY_FILE " +
				"(AUTH is only offered over TLS), or POSTHASTE_SMTP_LISTEN=off")}
		}
		certFile, keyFile = filepath.Join(devDir, "tls", "smtp.crt"), filepath.Join(devDir, "tls", "smtp.key")
		made, err := smtpgw.EnsureSelfSigned(certFile, keyFile,
			[]string{"localhost", cfg.Delivery.Hostname, "127.0.0.1", "::1"})
		if err != nil {
			return nil, fmt.Errorf("making a self-signed SMTP certificate: %w", err)
		}
		if made {
			logger.Info("made a self-signed SMTP certificate", "cert_file", certFile)
		}
	}
	certs, err := smtpgw.NewCertReloader(certFile, keyFile, logger.With("component", "smtp"))
	if err != nil {
		return nil, err
	}
	var ls []smtpgw.Listener
	for _, l := range listeners {
		ls = append(ls, smtpgw.Listener{Addr: l.Addr, ImplicitTLS: l.ImplicitTLS})
	}
	gw, err := smtpgw.New(smtpgw.Config{
		Listeners:     ls,
		TLS:           certs.TLSConfig(),
		Hostname:      cfg.Delivery.Hostname,
		Auth:          in.auth,
		Submit:        in.submit,
		Limiter:       in.limiter,
		DefaultRate:   cfg.Limits.DefaultRate,
		RequestLog:    in.logs,
		Metrics:       metrics,
		Logger:        logger,
		MaxConnsPerIP: cfg.SMTP.MaxConnsPerIP,
	})
	if err != nil {
		return nil, err
	}
	if err := gw.Start(); err != nil {
		return nil, err
	}
	return gw, nil
}

// stopGateway shuts the gateway down within the shutdown budget.
func stopGateway(gw *smtpgw.Gateway, logger *slog.Logger) {
	if gw == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	if err := gw.Shutdown(ctx); err != nil {
		logger.Warn("SMTP connections cut at shutdown", "err", err)
	}
}

// describeSMTP lists the gateway's addresses for the startup banner.
func describeSMTP(gw *smtpgw.Gateway, listeners []config.SMTPListener) string {
	if gw == nil {
		return "off"
	}
	var parts []string
	for i, a := range gw.Addrs() {
		mode := "STARTTLS"
		if listeners[i].ImplicitTLS {
			mode = "TLS"
		}
		parts = append(parts, displayAddr(a.String())+" ("+mode+")")
	}
	return strings.Join(parts, ", ")
}

// runSMTP serves the SMTP gateway and drains the outbox against an
// external Temporal and PostgreSQL; its metrics, /healthz and /readyz are
// on POSTHASTE_METRICS_ADDR.
func runSMTP(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	listeners := smtpListeners(cfg.SMTP, config.DefaultSMTPListen)
	if len(listeners) == 0 {
		return usageError{errors.New("POSTHASTE_SMTP_LISTEN=off leaves the smtp command nothing to do")}
	}
	st, tc, _, _, closeAll, err := connectExternal(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeAll()
	reg, metrics := newRegistry()
	in, err := newIntake(ctx, cfg, st, tc, metrics, logger)
	if err != nil {
		return err
	}
	defer in.close()
	defer startDispatcher(in.dispatcher)()
	gw, err := startGateway(cfg, in, listeners, "", metrics, logger)
	if err != nil {
		return err
	}
	defer stopGateway(gw, logger)
	checks := append(readyChecks(st, tc), api.Check{Name: "smtp", Check: gw.Ready})
	addr, served, err := serveHTTP(ctx, cfg.MetricsAddr, opsHandler(reg, checks, cfg.MetricsToken), cfg.HTTP, logger)
	if err != nil {
		return err
	}
	logger.Info("ready", "smtp", describeSMTP(gw, listeners), "metrics_addr", addr.String())
	if err := <-served; err != nil {
		return fmt.Errorf("serving metrics: %w", err)
	}
	return nil
}

// opsHandler serves /metrics, /healthz and /readyz (every check passes)
// for processes without the API, on their own listener
// (POSTHASTE_METRICS_ADDR, the operator's to keep private). When token is
// set, /metrics requires it and /readyz names the failed checks only to
// requests that carry it; otherwise both are open there.
func opsHandler(reg *prometheus.Registry, checks []api.Check, token string) http.Handler {
	h := http.NewServeMux()
	h.Handle("/metrics", api.MetricsHandler(reg, token))
	h.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) })
	h.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		failed := api.RunChecks(r.Context(), checks)
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			body := map[string]any{"status": "unavailable"}
			if token == "" || api.BearerIs(r, token) {
				body["failed"] = failed
			}
			_ = json.NewEncoder(w).Encode(body)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	})
	return h
}
