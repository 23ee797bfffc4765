package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/keyring"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

const rotateUsage = `usage:
  posthaste admin rotate-master-key [--batch-size N]  re-seal everything under the current key
  posthaste admin rotate-master-key --check           count what is still under previous keys
  posthaste admin rotate-master-key --generate        dev: add a new current key to <data dir>/master.key
  posthaste admin rotate-master-key --drop-previous   dev: keep only the current key in <data dir>/master.key

The keys are POSTHASTE_MASTER_KEY (current) and POSTHASTE_MASTER_KEY_PREVIOUS,
else the key file of the posthaste dev on POSTHASTE_DATA_DIR (first line
current). See "Rotating the master key" in docs/operations.md.`

// devKeyFile is where `dev` keeps its master keys.
func devKeyFile(dataDir string) string { return filepath.Join(dataDir, "master.key") }

// runRotateMasterKey is `posthaste admin rotate-master-key`: it re-seals
// every sealed value under the current master key while the services run
// (they must already have the new key as current and the old one as
// previous), checks what is left, or in dev adds and drops keys of the
// data directory's key file. It prints a JSON report on stdout.
func runRotateMasterKey(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("admin rotate-master-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	check := fs.Bool("check", false, "only count the values still under previous keys")
	generate := fs.Bool("generate", false, "dev: make a new current key in the data directory's key file")
	drop := fs.Bool("drop-previous", false, "dev: remove the previous keys from the data directory's key file")
	batch := fs.Int("batch-size", 500, "values re-sealed per transaction")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{fmt.Errorf("%v\n%s", err, rotateUsage)}
	}
	n := 0
	for _, b := range []bool{*check, *generate, *drop} {
		if b {
			n++
		}
	}
	if n > 1 || *batch < 1 {
		return usageError{fmt.Errorf("give at most one of --check, --generate, --drop-previous, and a positive --batch-size\n%s", rotateUsage)}
	}
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	file := devKeyFile(dataDir)
	if *generate {
		if cfg.Domains.MasterKey != "" {
			return usageError{errors.New("--generate writes the key file of posthaste dev; with POSTHASTE_MASTER_KEY set, " +
				"make a key (openssl rand -base64 32), set it as POSTHASTE_MASTER_KEY and the old one as " +
				"POSTHASTE_MASTER_KEY_PREVIOUS on every process, restart them, then run rotate-master-key")}
		}
		if _, err := seal.ReadKeyFile(file); err != nil {
			return fmt.Errorf("no key file of posthaste dev on POSTHASTE_DATA_DIR=%s: %w", dataDir, err)
		}
		id, err := seal.PrependKeyFile(file)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"key_file": file, "current_key": id.String(),
			"next": "restart posthaste dev (it then seals with the new key and still opens with the old one), " +
				"then run: posthaste admin rotate-master-key"})
	}

	box, err := masterRing(cfg.Domains, file, false)
	if err != nil {
		return err
	}
	if box == nil {
		return usageError{errors.New("no master key: set POSTHASTE_MASTER_KEY (and POSTHASTE_MASTER_KEY_PREVIOUS)")}
	}
	st, err := openAdminStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	cols := store.SealedColumns()

	if *check || *drop {
		if *drop && cfg.Domains.MasterKey != "" {
			return usageError{errors.New("--drop-previous edits the key file of posthaste dev; with POSTHASTE_MASTER_KEY " +
				"set, remove POSTHASTE_MASTER_KEY_PREVIOUS from every process instead")}
		}
		rep, err := keyring.Check(ctx, st, box, cols)
		if err != nil {
			return err
		}
		if rep.Remaining > 0 {
			if err := out.Encode(rep); err != nil {
				return err
			}
			return fmt.Errorf("%d value(s) are still sealed under previous keys: keep those keys and run rotate-master-key", rep.Remaining)
		}
		if !*drop {
			return out.Encode(rep)
		}
		id, err := seal.TrimKeyFile(file)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"key_file": file, "current_key": id.String(), "columns": rep.Columns,
			"next": "restart posthaste dev: it then runs with the current key only"})
	}

	rep, rerr := keyring.Rotate(ctx, st, box, cols, keyring.Options{BatchSize: *batch, Logger: logger.With("component", "keyring")})
	if err := out.Encode(rep); err != nil {
		return err
	}
	ids := make([]string, 0, len(box.KeyIDs()))
	for _, id := range box.KeyIDs() {
		ids = append(ids, id.String())
	}
	if err := adminAudit(ctx, st, nil, audit.MasterKeyRotate, "master_key", box.CurrentID().String(),
		map[string]any{"resealed": rep.Resealed, "remaining": rep.Remaining, "unopenable": rep.Unopenable, "keys": ids}); err != nil {
		return errors.Join(rerr, err)
	}
	if rerr != nil {
		return rerr
	}
	if rep.Remaining > 0 {
		logger.Warn("values were locked by the services during the run: run rotate-master-key again", "remaining", rep.Remaining)
	}
	return nil
}
