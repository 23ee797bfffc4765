package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/devstack"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/worker"
)

// runDev runs the whole service in one process on embedded defaults.
func runDev(ctx context.Context, cfg config.Config, logger *slog.Logger, stdout io.Writer) error {
	// System email (invitations, password resets, notices) works out of
	// the box from the sandbox sender.
	if cfg.SystemFrom == "" {
		cfg.SystemFrom = "Posthaste <" + sandbox.Sender + ">"
	}
	// Links in those emails lead to this server unless told otherwise.
	if cfg.HTTP.PublicURL == "" {
		cfg.HTTP.PublicURL = "http://" + displayAddr(cfg.HTTP.Addr)
	}
	// Open and click tracking work out of the box: without a tracking host
	// (or with one on this machine, which no DNS record can point at),
	// tracked links and the pixel point at this server, with no record.
	if h := cfg.Domains.TrackingHost; h == "" || isLoopbackHost(h) {
		if base := devTrackingURL(cfg.HTTP.PublicURL); base != "" {
			cfg.Domains.TrackingHost, cfg.Domains.LocalTracking = "", base
		}
	}
	logger.Info("starting", cfg.LogAttrs()...)
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	// dev talks to loopback peers (local webhook receivers, test MX hosts
	// and servers).
	if !cfg.Egress.AllowPrivate {
		cfg.Egress.AllowPrivate = true
	}

	// Things started are stopped in reverse order, each within the budget.
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		logger.Info("stopped")
	}()

	dbURL := cfg.DatabaseURL
	if dbURL == "" {
		pg, err := pgcluster.Start(ctx, pgcluster.Config{Dir: devClusterDir(dataDir), Logger: logger})
		if err != nil {
			return err
		}
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
			defer cancel()
			if err := pg.Stop(sctx); err != nil {
				logger.Warn("stopping PostgreSQL", "err", err)
			}
		})
		dbURL = pg.URL()
	}
	st, keys, err := openSealedStore(ctx, cfg.Domains, dbURL, filepath.Join(dataDir, "master.key"), true, logger)
	if err != nil {
		return err
	}
	stops = append(stops, st.Close)

	// The embedded server's own workers build the process's workflow
	// cache: size it first.
	worker.SizeWorkflowCache(cfg.Temporal.WorkflowCache)
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{
		DBPath:       filepath.Join(dataDir, "temporal.db"),
		Namespace:    cfg.Temporal.Namespace,
		IP:           cfg.Temporal.IP,
		FrontendPort: cfg.Temporal.Port,
		UIPort:       cfg.Temporal.UIPort,
		// With a codec token, the embedded UI decodes payloads through
		// this process's codec endpoint (the token in its path).
		CodecEndpoint: devCodecEndpoint(cfg),
		HistoryCache:  cfg.Temporal.HistoryCache,
		Logger:        logger,
	})
	if err != nil {
		return fmt.Errorf("starting embedded Temporal: %w", err)
	}
	stops = append(stops, tmp.Stop)
	if cfg.Codec.Token != "" && len(cfg.Codec.Origins) == 0 && tmp.UIAddress() != "" {
		// The embedded Temporal UI may call the codec endpoint.
		cfg.Codec.Origins = []string{"http://" + displayAddr(tmp.UIAddress())}
		if _, port, err := net.SplitHostPort(tmp.UIAddress()); err == nil {
			cfg.Codec.Origins = append(cfg.Codec.Origins, "http://localhost:"+port)
		}
	}
	pc, err := payloadCodec(cfg.Codec, keys, st, logger)
	if err != nil {
		return err
	}
	tc, err := dialTemporal(ctx, tmp.FrontendAddress(), cfg.Temporal.Namespace, pc, logger)
	if err != nil {
		return err
	}
	stops = append(stops, tc.Close)
	reg, metrics := newRegistry()
	ui := tmp.UIAddress()
	if ui != "" {
		ui = "http://" + displayAddr(ui)
	}
	in, err := newIntake(ctx, cfg, st, tc, metrics, logger)
	if err != nil {
		return err
	}
	// Runs after the HTTP and SMTP servers stopped and before the store closes.
	stops = append(stops, in.close)
	listeners := smtpListeners(cfg.SMTP, config.DevSMTPListen)
	cfg.SMTP.Listen = listeners // what the dashboard's quick start shows
	gw, err := startGateway(cfg, in, listeners, dataDir, metrics, logger)
	if err != nil {
		return err
	}
	checks := readyChecks(st, tc)
	if gw != nil {
		stops = append(stops, func() { stopGateway(gw, logger) })
		checks = append(checks, api.Check{Name: "smtp", Check: gw.Ready})
	}
	handler, err := newFrontDoor(cfg, st, tc, in, keys, pc, publicMetrics(reg, cfg.MetricsToken, true), metrics,
		checks, ui, logger)
	if err != nil {
		return err
	}
	acts, pools, closeActs, err := newActivities(ctx, cfg, st, tc, keys, pc, metrics, in.dispatcher, nil, logger)
	if err != nil {
		return err
	}
	stops = append(stops, closeActs)
	healthActs, err := newHealth(cfg, st, in.dispatcher, logger)
	if err != nil {
		return err
	}
	w, err := worker.New(tc, acts, worker.Config{Workflows: true, Pools: pools, InboundSlots: cfg.Inbound.WorkerSlots,
		Health: healthActs}, logger)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	stops = append(stops, w.Stop)
	stops = append(stops, keepSchedules(cfg, tc, logger))

	stops = append(stops, startDispatcher(in.dispatcher))

	// The inbound MX: bounces and complaints to the return paths.
	var mx *mxServer
	if addr := inboundListen(cfg.Inbound, config.DevInboundListen); addr != "" {
		if mx, err = startMX(cfg, st, keys, in.dispatcher.Notify, addr, dataDir, reg, logger); err != nil {
			return err
		}
		stops = append(stops, func() { mx.stop(logger) })
	}

	creds, created, err := account.Bootstrap(ctx, st, password.Shared(), filepath.Join(dataDir, "credentials.json"), cfg.Admin.Email)
	if err != nil {
		return fmt.Errorf("creating the first account: %w", err)
	}

	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer stopHTTP()
	addr, served, err := serveHTTP(httpCtx, cfg.HTTP.Addr, handler, cfg.HTTP, logger)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stdout, "\nFirst run: created a team, a dashboard user and an API key (saved in %s):\n"+
			"  API key:  %s\n  Email:    %s\n  Password: %s\n\n",
			filepath.Join(dataDir, "credentials.json"), creds.APIKey, creds.Email, creds.Password)
	}
	smtpAddrs := describeSMTP(gw, listeners)
	mxAddr := "off"
	if mx != nil {
		mxAddr = displayAddr(mx.addr.String())
	}
	fmt.Fprintf(stdout, "Posthaste is ready: API http://%s  Dashboard http://%s/dashboard/  SMTP %s  Inbound MX %s  Temporal %s  Temporal UI %s\n",
		displayAddr(addr.String()), displayAddr(addr.String()), smtpAddrs, mxAddr, tmp.FrontendAddress(), ui)
	logger.Info("ready", "http_addr", addr.String(), "smtp", smtpAddrs, "inbound", mxAddr,
		"temporal", tmp.FrontendAddress(), "temporal_ui", ui)

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-served:
		if err != nil {
			return fmt.Errorf("serving HTTP: %w", err)
		}
	}
	stopHTTP()
	select {
	case <-served:
	case <-time.After(shutdownBudget):
	}
	return nil
}

// devCodecEndpoint is the codec endpoint dev's Temporal UI is pointed at:
// "" without POSTHASTE_CODEC_TOKEN or a fixed HTTP port. Anyone who can
// load dev's UI (on loopback by default) can read it, as they can the
// workflows themselves.
func devCodecEndpoint(cfg config.Config) string {
	_, port, err := net.SplitHostPort(cfg.HTTP.Addr)
	if cfg.Codec.Token == "" || err != nil || port == "0" || port == "" {
		return ""
	}
	return "http://" + displayAddr(cfg.HTTP.Addr) + strings.TrimSuffix(api.CodecPath, "/") + "/" + url.PathEscape(cfg.Codec.Token)
}

// devClusterDir is where dev keeps its private PostgreSQL cluster; admin
// commands find it there (adminDatabaseURL).
func devClusterDir(dataDir string) string { return filepath.Join(dataDir, "pg") }

// displayAddr turns a listen address into one a browser can open.
func displayAddr(a string) string {
	if len(a) > 0 && a[0] == ':' {
		return "localhost" + a
	}
	if len(a) > 8 && a[:8] == "0.0.0.0:" {
		return "localhost:" + a[8:]
	}
	if len(a) > 5 && a[:5] == "[::]:" {
		return "localhost:" + a[5:]
	}
	return a
}

// isLoopbackHost reports whether host names this machine: localhost (or a
// name under it) or a loopback address.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// devTrackingURL is the address dev's tracked links point at: its public
// URL's scheme, host and port, a loopback address written localhost (what
// a browser on the same machine opens); "" when the URL names no fixed
// port.
func devTrackingURL(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Hostname() == "" || u.Port() == "0" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	host := u.Hostname()
	if isLoopbackHost(host) {
		host = "localhost"
	}
	if u.Port() != "" {
		host = net.JoinHostPort(host, u.Port())
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return u.Scheme + "://" + host
}
