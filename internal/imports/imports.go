// Package imports turns an uploaded CSV of contacts into a contact import
// (Resend's Contact Imports API), shared by the HTTP API and the
// dashboard. Create reads the file as a stream, checks its header, and
// writes its rows, validated, in chunks of a few thousand inside one
// transaction with the import and an outbox entry; the ContactImport
// workflow then applies the chunks (Activities, over
// store.ApplyImportChunk). Memory stays bounded by one chunk whatever the
// file's size; an upload that fails midway leaves nothing behind.
//
// Rules where Resend's documentation is silent:
//   - Without `column_map` the columns are found by header name,
//     case-insensitively: `email` (required), `first_name`, `last_name`,
//     `unsubscribed`, and columns named like one of the team's contact
//     properties. Other columns are ignored. With `column_map` only the
//     columns it names are read, and each must exist (422 otherwise).
//   - Row numbers count the header as row 1, as spreadsheets show them.
//   - A row whose address is invalid, whose `unsubscribed` is not a
//     boolean (true/false, yes/no, 1/0), or whose number property is not
//     a number fails alone; its error is kept (row, email, reason).
//   - An empty cell sets nothing: a new contact gets the default, an
//     updated one keeps its value.
//   - Rows repeating an address: under `upsert` the later row wins, under
//     `skip` the earlier one; the others count as skipped.
//   - Imports emit no contact.created or contact.updated webhook events:
//     a 100,000-row file would queue 100,000 messages to every endpoint.
package imports

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// Limits of an upload.
const (
	// DefaultMaxBytes is the largest file accepted (Resend's 50 MB).
	DefaultMaxBytes = 50 << 20
	// DefaultMaxRows is the most rows a file may hold, header excluded.
	DefaultMaxRows = 1_000_000
	// DefaultChunkRows is the rows written per chunk, and so applied per
	// activity.
	DefaultChunkRows = 5000
)

// ErrFileTooLarge means the file is over Config.MaxBytes; nothing was written.
var ErrFileTooLarge = errors.New("the file is too large")

// ErrTooManyRows means the file has over Config.MaxRows rows; nothing was
// written.
var ErrTooManyRows = errors.New("the file has too many rows")

// Notifier is told when an import was committed (the outbox dispatcher).
type Notifier interface{ Notify() }

// Config tunes a Service; zero values take the defaults.
type Config struct {
	MaxBytes  int64
	MaxRows   int
	ChunkRows int
	// Outbox is notified of each new import; may be nil.
	Outbox Notifier
}

// Service creates and reads contact imports.
type Service struct {
	cfg   Config
	store *store.Store
}

// New returns a Service.
func New(cfg Config, st *store.Store) *Service {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultMaxRows
	}
	if cfg.ChunkRows <= 0 {
		cfg.ChunkRows = DefaultChunkRows
	}
	return &Service{cfg: cfg, store: st}
}

// Limits returns the largest file and the most rows an import accepts.
func (s *Service) Limits() (maxBytes int64, maxRows int) { return s.cfg.MaxBytes, s.cfg.MaxRows }

// Options are the choices of an upload besides the file.
type Options struct {
	ColumnMap  ColumnMap
	OnConflict string // store.ImportSkip (also when empty) or store.ImportUpsert
	Segments   []uuid.UUID
	Topics     []store.TopicChoice
}

// Create reads a CSV from r and queues its import for the team. Bad
// input is an *invalid.Error (a bad option, a missing or unknown column,
// a file that is not CSV), ErrFileTooLarge or ErrTooManyRows; in every
// error case nothing was written.
func (s *Service) Create(ctx context.Context, teamID uuid.UUID, r io.Reader, opts Options) (store.ContactImport, error) {
	switch opts.OnConflict {
	case "":
		opts.OnConflict = store.ImportSkip
	case store.ImportSkip, store.ImportUpsert:
	default:
		return store.ContactImport{}, invalid.Errorf("on_conflict", "The `on_conflict` field must be `skip` or `upsert`.")
	}
	if err := s.checkRefs(ctx, teamID, opts); err != nil {
		return store.ContactImport{}, err
	}
	defs, err := s.store.Audience.ContactPropertiesByKey(ctx, teamID)
	if err != nil {
		return store.ContactImport{}, fmt.Errorf("loading contact properties: %w", err)
	}
	lr := &limitReader{r: r, left: s.cfg.MaxBytes}
	cr := csv.NewReader(lr)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return store.ContactImport{}, csvError(err, "The file has no CSV header row.")
	}
	lay, err := planColumns(header, opts.ColumnMap, defs)
	if err != nil {
		return store.ContactImport{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.ContactImport{}, fmt.Errorf("making import id: %w", err)
	}
	w, err := s.store.Audience.BeginContactImport(ctx, store.ContactImport{ID: id, TeamID: teamID,
		OnConflict: opts.OnConflict, SegmentIDs: opts.Segments, Topics: opts.Topics})
	if err != nil {
		return store.ContactImport{}, err
	}
	defer w.Rollback(ctx)
	var (
		rows  = make([]store.ImportRow, 0, s.cfg.ChunkRows)
		errs  []store.ImportRowError
		first = 2 // the row number of the chunk's first row
		row   = 1 // the header
	)
	flush := func() error {
		if len(rows)+len(errs) == 0 {
			return nil
		}
		if err := w.AddChunk(ctx, first, rows, errs); err != nil {
			return err
		}
		rows, errs, first = rows[:0], nil, row+1
		return nil
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return store.ContactImport{}, csvError(err, "")
		}
		row++
		if row-1 > s.cfg.MaxRows {
			return store.ContactImport{}, ErrTooManyRows
		}
		r, bad := lay.parseRow(row, rec)
		if bad != nil {
			errs = append(errs, *bad)
		} else {
			rows = append(rows, r)
		}
		if len(rows)+len(errs) >= s.cfg.ChunkRows {
			if err := flush(); err != nil {
				return store.ContactImport{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return store.ContactImport{}, err
	}
	imp, err := w.Commit(ctx)
	if err != nil {
		return store.ContactImport{}, err
	}
	if s.cfg.Outbox != nil {
		s.cfg.Outbox.Notify()
	}
	return imp, nil
}

// checkRefs makes sure the segments and topics are the team's.
func (s *Service) checkRefs(ctx context.Context, teamID uuid.UUID, opts Options) error {
	for _, id := range opts.Segments {
		if _, err := s.store.Audience.Segment(ctx, teamID, id); errors.Is(err, store.ErrNotFound) {
			return invalid.Errorf("segments", "Segment %s not found.", id)
		} else if err != nil {
			return fmt.Errorf("loading segment %s: %w", id, err)
		}
	}
	for _, t := range opts.Topics {
		if _, err := s.store.Audience.Topic(ctx, teamID, t.TopicID); errors.Is(err, store.ErrNotFound) {
			return invalid.Errorf("topics", "Topic %s not found.", t.TopicID)
		} else if err != nil {
			return fmt.Errorf("loading topic %s: %w", t.TopicID, err)
		}
	}
	return nil
}

// csvError turns a read error into the caller's: the file's limit, a
// CSV syntax error naming its line, or an I/O error as it is.
func csvError(err error, onEOF string) error {
	if errors.Is(err, ErrFileTooLarge) {
		return ErrFileTooLarge
	}
	if err == io.EOF {
		return &invalid.Error{Field: "file", Message: onEOF}
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &invalid.Error{Field: "file", Message: fmt.Sprintf("The file is not valid CSV: line %d, column %d: %v.",
			pe.Line, pe.Column, pe.Err)}
	}
	return fmt.Errorf("reading the file: %w", err)
}

// Get returns one of the team's imports; store.ErrNotFound when the team
// has none with this id.
func (s *Service) Get(ctx context.Context, teamID, id uuid.UUID) (store.ContactImport, error) {
	return s.store.Audience.ContactImport(ctx, teamID, id)
}

// Errors returns the first limit failed rows of one of the team's imports
// found so far, in row order.
func (s *Service) Errors(ctx context.Context, teamID, id uuid.UUID, limit int) ([]store.ImportRowError, error) {
	return s.store.Audience.ContactImportErrors(ctx, teamID, id, limit)
}

// Page lists the team's imports in status ("" for any), newest first, one
// page at a time.
func (s *Service) Page(ctx context.Context, teamID uuid.UUID, status string, p store.Page) ([]store.ContactImport, bool, error) {
	return s.store.Audience.ListContactImports(ctx, teamID, status, p)
}

// List returns the team's latest imports, newest first, at most limit
// (1 to 100).
func (s *Service) List(ctx context.Context, teamID uuid.UUID, limit int) ([]store.ContactImport, error) {
	limit = min(max(limit, 1), 100)
	out, _, err := s.store.Audience.ListContactImports(ctx, teamID, "", store.Page{Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("listing contact imports: %w", err)
	}
	return out, nil
}

// limitReader reads at most left bytes and then fails with ErrFileTooLarge.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrFileTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, ErrFileTooLarge
	}
	return n, err
}

func sortedKeys(m map[string]store.ContactProperty) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortStrings(s []string) { slices.Sort(s) }
