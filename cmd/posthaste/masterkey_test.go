package main

import (
	"context"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// masterKey is the master keyring a process on st with configuration cfg
// (and dev key file devKeyFile) uses: masterRing pinned by pinMasterKey,
// as openSealedStore does.
func masterKey(ctx context.Context, cfg config.Domains, st *store.Store, devKeyFile string) (*seal.Box, error) {
	box, err := masterRing(cfg, devKeyFile, true)
	if err != nil {
		return nil, err
	}
	return pinMasterKey(ctx, st, box)
}
