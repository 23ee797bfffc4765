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

	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/devstack"
	"github.com/posthaste/posthaste/internal/health/notices"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/worker"
)

// runAPI serves the HTTP API and drains the outbox against an external
// Temporal (TEMPORAL_* variables) and PostgreSQL (DATABASE_URL).
func runAPI(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	st, tc, keys, pc, closeAll, err := connectExternal(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeAll()
	reg, metrics := newRegistry()
	in, err := newIntake(ctx, cfg, st, tc, metrics, logger)
	if err != nil {
		return err
	}
	// Deferred calls run last first: the HTTP server has finished its
	// requests, then the dispatcher stops, then the request log is written
	// out, then the store closes (closeAll above).
	defer in.close()
	defer startDispatcher(in.dispatcher)()
	handler, err := newFrontDoor(cfg, st, tc, in, keys, pc, publicMetrics(reg, cfg.MetricsToken, false), metrics,
		readyChecks(st, tc), cfg.Temporal.UIURL, logger)
	if err != nil {
		return err
	}

	addr, served, err := serveHTTP(ctx, cfg.HTTP.Addr, handler, cfg.HTTP, logger)
	if err != nil {
		return err
	}
	logger.Info("ready", "http_addr", addr.String())
	if err := <-served; err != nil {
		return fmt.Errorf("serving HTTP: %w", err)
	}
	return nil
}

// runWorker runs the workflows and the delivery activities of the chosen
// regions and IP pools.
func runWorker(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	regions := fs.String("regions", "", "comma-separated delivery regions to serve (default: all)")
	poolList := fs.String("pools", "", "comma-separated IP pools to deliver from (default: all)")
	noWorkflows := fs.Bool("delivery-only", false, "serve only delivery queues, not workflows")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	st, tc, keys, pc, closeAll, err := connectExternal(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeAll()
	reg, metrics := newRegistry()
	var want []string
	if *poolList != "" {
		for _, p := range strings.Split(*poolList, ",") {
			want = append(want, strings.TrimSpace(p))
		}
	}
	acts, pools, closeActs, err := newActivities(ctx, cfg, st, tc, keys, pc, metrics, nil, want, logger)
	if err != nil {
		return err
	}
	defer closeActs()
	var rs []string
	if *regions != "" {
		rs = strings.Split(*regions, ",")
	}
	var healthActs *notices.Activities
	if !*noWorkflows {
		if healthActs, err = newHealth(cfg, st, nil, logger); err != nil {
			return err
		}
	}
	worker.SizeWorkflowCache(cfg.Temporal.WorkflowCache)
	w, err := worker.New(tc, acts, worker.Config{Regions: rs, Pools: pools, Workflows: !*noWorkflows,
		InboundSlots: cfg.Inbound.WorkerSlots, Health: healthActs}, logger)
	if err != nil {
		return usageError{err}
	}
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	if !*noWorkflows {
		defer keepSchedules(cfg, tc, logger)()
	}
	// The worker's own metrics (deliveries, events) and health.
	addr, served, err := serveHTTP(ctx, cfg.MetricsAddr, opsHandler(reg, readyChecks(st, tc), cfg.MetricsToken), cfg.HTTP, logger)
	if err != nil {
		return err
	}
	logger.Info("ready", "regions", rs, "pools", pools, "metrics_addr", addr.String())
	if err := <-served; err != nil {
		return fmt.Errorf("serving metrics: %w", err)
	}
	return nil
}

// connectExternal opens the store, the master key (nil without one) and
// the Temporal client of a production process, whose payloads the
// returned codec encrypts (nil without a master key); closeAll releases
// the store and the client.
func connectExternal(ctx context.Context, cfg config.Config, logger *slog.Logger) (*store.Store, client.Client,
	*seal.Box, *codec.Codec, func(), error) {
	logger.Info("starting", cfg.LogAttrs()...)
	st, keys, err := openSealedStore(ctx, cfg.Domains, cfg.DatabaseURL, "", false, logger)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	pc, err := payloadCodec(cfg.Codec, keys, st, logger)
	if err != nil {
		st.Close()
		return nil, nil, nil, nil, nil, err
	}
	tc, err := dialTemporal(ctx, "", "", pc, logger)
	if err != nil {
		st.Close()
		return nil, nil, nil, nil, nil, err
	}
	return st, tc, keys, pc, func() { tc.Close(); st.Close() }, nil
}

// runTemporal runs only the embedded Temporal server and its UI.
func runTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger, stdout io.Writer) error {
	t, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{
		DBPath:       filepath.Join(cfg.DataDir, "temporal.db"),
		Namespace:    cfg.Temporal.Namespace,
		IP:           cfg.Temporal.IP,
		FrontendPort: cfg.Temporal.Port,
		UIPort:       cfg.Temporal.UIPort,
		HistoryCache: cfg.Temporal.HistoryCache,
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
