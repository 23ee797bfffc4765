package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/devstack"
	"github.com/posthaste/posthaste/worker"
)

// runAPI serves the HTTP API and drains the outbox against an external
// Temporal (TEMPORAL_* variables) and PostgreSQL (DATABASE_URL).
func runAPI(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	logger.Info("starting", cfg.LogAttrs()...)
	st, err := openStore(ctx, cfg.DatabaseURL, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := dialTemporal(ctx, "", "", logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	keys, err := masterKey(ctx, cfg.Domains, st, "")
	if err != nil {
		return err
	}
	reg, metrics := newRegistry()
	front := newFrontDoor(cfg, st, tc, keys, reg, metrics, readyChecks(st, tc), logger)
	dctx, stopDispatch := context.WithCancel(context.Background())
	dispatched := make(chan struct{})
	go func() { defer close(dispatched); _ = front.dispatcher.Run(dctx) }()
	defer func() { stopDispatch(); <-dispatched }()

	addr, served, err := serveHTTP(ctx, cfg.HTTP.Addr, front.handler, logger)
	if err != nil {
		return err
	}
	logger.Info("ready", "http_addr", addr.String())
	if err := <-served; err != nil {
		return fmt.Errorf("serving HTTP: %w", err)
	}
	return nil
}

// runWorker runs the workflows and the delivery activities of the chosen regions.
func runWorker(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	regions := fs.String("regions", "", "comma-separated delivery regions to serve (default: all)")
	noWorkflows := fs.Bool("delivery-only", false, "serve only delivery queues, not workflows")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	logger.Info("starting", cfg.LogAttrs()...)
	st, err := openStore(ctx, cfg.DatabaseURL, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := dialTemporal(ctx, "", "", logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	keys, err := masterKey(ctx, cfg.Domains, st, "")
	if err != nil {
		return err
	}
	_, metrics := newRegistry()
	acts, closeActs, err := newActivities(cfg, st, keys, metrics, nil, logger)
	if err != nil {
		return err
	}
	defer closeActs()
	var rs []string
	if *regions != "" {
		rs = strings.Split(*regions, ",")
	}
	w, err := worker.New(tc, acts, worker.Config{Regions: rs, Workflows: !*noWorkflows}, logger)
	if err != nil {
		return usageError{err}
	}
	if err := w.Start(); err != nil {
		return err
	}
	logger.Info("ready", "regions", rs)
	<-ctx.Done()
	w.Stop()
	return nil
}

// runTemporal runs only the embedded Temporal server and its UI.
func runTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger, stdout io.Writer) error {
	t, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{
		DBPath:       filepath.Join(cfg.DataDir, "temporal.db"),
		Namespace:    cfg.Temporal.Namespace,
		IP:           cfg.Temporal.IP,
		FrontendPort: cfg.Temporal.Port,
		UIPort:       cfg.Temporal.UIPort,
		Logger:       logger,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Temporal is ready: frontend %s  UI %s\n", t.FrontendAddress(), t.UIAddress())
	logger.Info("ready", "temporal", t.FrontendAddress(), "temporal_ui", t.UIAddress())
	<-ctx.Done()
	t.Stop()
	return nil
}

// runMigrate applies pending migrations.
func runMigrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	st, err := openStore(ctx, cfg.DatabaseURL, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	logger.Info("migrations up to date", "duration", time.Since(start))
	return nil
}
