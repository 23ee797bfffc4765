// Command posthaste runs Posthaste, self-hosted email delivery for
// developers. Subcommands: dev (everything in one process on embedded
// defaults), api, smtp, mx, worker, temporal, migrate and admin.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/telemetry"
)

const mainUsage = `usage: posthaste <command> [flags]

commands:
  dev       run everything in one process: embedded Temporal (SQLite) and UI,
            a private PostgreSQL (unless DATABASE_URL is set), API, worker
  api       run the HTTP API and the outbox dispatcher
  smtp      run the SMTP submission gateway and the outbox dispatcher
  mx        run the inbound MX (bounces and complaints) and the outbox dispatcher
  worker    run Temporal workers (--regions and --pools choose delivery queues)
  temporal  run only the embedded Temporal server and its UI
  migrate   apply database migrations
  admin     create-team, create-key, revoke-key, set-plan, set-rate-limit,
            health, list-teams, create-pool, list-pools, assign-pool,
            warmup, audit verify, rotate-master-key

Configuration comes from the environment; see docs/configuration.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: tests call it in-process.
func run(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, mainUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "posthaste: configuration: %v\n", err)
		return 2
	}
	logger, err := telemetry.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(stderr, "posthaste: configuration: %v\n", err)
		return 2
	}
	cmd, rest := args[0], args[1:]
	logger = logger.With("command", cmd)
	switch cmd {
	case "dev":
		err = runDev(ctx, cfg, logger, stdout)
	case "api":
		err = runAPI(ctx, cfg, logger)
	case "smtp":
		err = runSMTP(ctx, cfg, logger)
	case "mx":
		err = runMX(ctx, cfg, logger)
	case "worker":
		err = runWorker(ctx, cfg, logger, rest)
	case "temporal":
		err = runTemporal(ctx, cfg, logger, stdout)
	case "migrate":
		err = runMigrate(ctx, cfg, logger)
	case "admin":
		err = runAdmin(ctx, cfg, logger, rest, stdout)
	default:
		fmt.Fprintf(stderr, "posthaste: unknown command %q\n\n%s", cmd, mainUsage)
		return 2
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "posthaste %s: %v\n", cmd, err)
		return 2
	case err != nil:
		logger.Error("stopped with an error", "err", err)
		fmt.Fprintf(stderr, "posthaste %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// usageError is a mistake in the command line.
type usageError struct{ error }
