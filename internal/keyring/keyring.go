// Package keyring manages what is sealed with the installation's master
// key across a rotation of that key: the token keys that must outlive it
// (Pin), the re-sealing of every sealed value under the new key while the
// services run (Rotate, `posthaste admin rotate-master-key`) and the count
// that tells when the old key may be removed (Check). The sealed columns
// are listed once, by store.SealedColumns.
package keyring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// Store is the part of *store.Store the keyring uses.
type Store interface {
	EnsureInstallationKey(ctx context.Context, purpose string, sealed []byte) ([]byte, error)
	CountSealed(ctx context.Context, c store.SealedColumn, current []byte) (store.SealedCount, error)
	ResealOld(ctx context.Context, c store.SealedColumn, current []byte, after string, limit int,
		reseal func(sealed, ad []byte) ([]byte, error)) (store.ResealBatch, error)
}

var _ Store = (*store.Store)(nil)

// Pin returns box with the installation's stored key of every purpose
// pinned (seal.Box.WithKeys), so that box.DeriveKey returns the same key
// for the life of the installation whatever its master key. A purpose
// without a stored key gets the key derived for it from the oldest key of
// the ring, and the first process to store one wins: before keys were
// stored, an installation only ever had one master key, and its tokens
// were made with keys derived from it; on the first start after the
// upgrade that key is the only one, or (when the operator rotates at the
// same time) the previous one. An error means the stored keys cannot be
// opened with this keyring: the master key is wrong.
func Pin(ctx context.Context, st Store, box *seal.Box, purposes []string) (*seal.Box, error) {
	keys := make(map[string][]byte, len(purposes))
	oldest := box.Oldest()
	for _, p := range purposes {
		sealed, err := box.Seal(oldest.DeriveKey(p), []byte(p))
		if err != nil {
			return nil, fmt.Errorf("sealing the %q key: %w", p, err)
		}
		stored, err := st.EnsureInstallationKey(ctx, p, sealed)
		if err != nil {
			return nil, err
		}
		k, err := box.Open(stored, []byte(p))
		if err != nil {
			return nil, fmt.Errorf("the stored %q key cannot be opened with the master key (is POSTHASTE_MASTER_KEY the key this installation uses, or listed in POSTHASTE_MASTER_KEY_PREVIOUS?): %w", p, err)
		}
		keys[p] = k
	}
	return box.WithKeys(keys), nil
}

// Column is the state of one sealed column.
type Column struct {
	Column string `json:"column"` // table.column
	// Resealed is how many values this run moved to the current key
	// (always 0 for Check).
	Resealed int `json:"resealed"`
	// Remaining is how many values are still under other keys after the
	// run: values the services held locked during it, or that open with
	// no key of the ring (Unopenable, counted again here).
	Remaining int64 `json:"remaining"`
	Total     int64 `json:"total"`
	// Unopenable are the ids of values no key of the ring opens (Rotate
	// only; Check opens nothing).
	Unopenable []string `json:"unopenable,omitempty"`
}

// Report is the result of Rotate or Check.
type Report struct {
	CurrentKey string   `json:"current_key"` // the current key's id
	Columns    []Column `json:"columns"`
	Resealed   int      `json:"resealed"`
	Remaining  int64    `json:"remaining"`
	Unopenable int      `json:"unopenable"`
	// Complete is false when Options.MaxBatches stopped the run early.
	Complete bool `json:"complete"`
}

// ErrUnopenable means some value opens with no key of the ring: the key
// that sealed it is missing from POSTHASTE_MASTER_KEY_PREVIOUS, or the
// value was damaged. Its old key must not be dropped.
var ErrUnopenable = errors.New("some sealed values open with no key of the ring")

// Options tune Rotate.
type Options struct {
	BatchSize int // values per transaction; 0 means 500
	// MaxBatches stops the run after that many batches (0: no limit), a
	// test seam for a rotation cut short; a rerun continues.
	MaxBatches int
	Logger     *slog.Logger
}

// Rotate re-seals every value in columns that is not under box's current
// key, in batches of one transaction each, while the services keep
// running with the same keyring: they open old and new values alike. It
// is resumable (what a cut-short run did stays done; a rerun finds only
// what is left) and idempotent (a run with nothing left changes nothing
// and reports 0). It returns ErrUnopenable, with the report, if a value
// opens with no key of the ring.
func Rotate(ctx context.Context, st Store, box *seal.Box, columns []store.SealedColumn, opts Options) (Report, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	prefix := box.CurrentPrefix()
	rep := Report{CurrentKey: box.CurrentID().String(), Complete: true}
	batches := 0
	reseal := func(sealed, ad []byte) ([]byte, error) {
		out, _, err := box.Reseal(sealed, ad)
		return out, err
	}
	for _, c := range columns {
		col := Column{Column: c.String()}
		after := ""
		for rep.Complete {
			if opts.MaxBatches > 0 && batches == opts.MaxBatches {
				rep.Complete = false
				break
			}
			b, err := st.ResealOld(ctx, c, prefix, after, opts.BatchSize, reseal)
			if err != nil {
				return rep, err
			}
			batches++
			col.Resealed += b.Resealed
			col.Unopenable = append(col.Unopenable, b.Failed...)
			after = b.Next
			if b.Resealed > 0 || len(b.Failed) > 0 {
				logger.Info("re-sealed a batch", "column", col.Column, "resealed", b.Resealed, "unopenable", len(b.Failed))
			}
			if b.Seen < opts.BatchSize {
				break
			}
		}
		n, err := st.CountSealed(ctx, c, prefix)
		if err != nil {
			return rep, err
		}
		col.Remaining, col.Total = n.Old, n.Total
		rep.add(col)
	}
	if rep.Unopenable > 0 {
		return rep, fmt.Errorf("%w: %d value(s)", ErrUnopenable, rep.Unopenable)
	}
	return rep, nil
}

// Check counts, in every column, the values not yet under box's current
// key, without changing or opening anything: when every Remaining is 0,
// the previous keys may be removed.
func Check(ctx context.Context, st Store, box *seal.Box, columns []store.SealedColumn) (Report, error) {
	prefix := box.CurrentPrefix()
	rep := Report{CurrentKey: box.CurrentID().String(), Complete: true}
	for _, c := range columns {
		n, err := st.CountSealed(ctx, c, prefix)
		if err != nil {
			return rep, err
		}
		rep.add(Column{Column: c.String(), Remaining: n.Old, Total: n.Total})
	}
	return rep, nil
}

func (r *Report) add(c Column) {
	r.Columns = append(r.Columns, c)
	r.Resealed += c.Resealed
	r.Remaining += c.Remaining
	r.Unopenable += len(c.Unopenable)
}
