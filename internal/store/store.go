// Package store is Posthaste's PostgreSQL layer: the connection pool, the
// embedded goose migrations and every query. It returns the package's own
// types and maps PostgreSQL errors to ErrNotFound and ErrConflict in one
// place, so callers never inspect pgx errors.
//
// The queries are grouped by area, one type each (areas.go), reached as
// fields of the opened Store: st.Emails, st.Domains, st.Audience,
// st.Templates, st.Broadcasts, st.Webhooks, st.Received, st.Privacy,
// st.Accounts, st.Sessions and st.Insights. Store itself keeps only what
// every area shares: opening, migrating, sealing and data keys.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jackc/puddle/v2"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/posthaste/posthaste/internal/datakey"

	"github.com/posthaste/posthaste/internal/store/migrations"
)

var (
	// ErrNotFound means the row does not exist or belongs to another team.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint rejected the write.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable means PostgreSQL could not be reached; retrying later may work.
	ErrUnavailable = errors.New("database unavailable")
	// ErrOwnersOnly means only an owner of the team may do this.
	ErrOwnersOnly = errors.New("only team owners may do this")
)

// Config configures the pool.
type Config struct {
	URL      string
	MaxConns int32 // 0 → pgxpool's default (max(4, cores))
	Logger   *slog.Logger
	// MasterKey seals the teams' data keys (datakey.New), with which the
	// store seals the mail content it writes (bodies, built and submitted
	// messages, attachments, inbound and received mail) and opens it when
	// read. nil: content is written as it is, and sealed content cannot be
	// read.
	MasterKey datakey.MasterKey
	// DomainRecords, when set, gives the DNS records of a domain as the
	// `records` of its domain.* webhook events (the shape GET
	// /domains/{id} answers); the store does not know the server's DNS
	// settings that make them. nil: the events carry no records.
	DomainRecords func(Domain) any
}

// Store is safe for concurrent use. Close releases the pool.
type Store struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	sealer Sealer // nil: content is stored unsealed (see Config.MasterKey)
	// domainRecords is Config.DomainRecords.
	domainRecords func(Domain) any

	// The queries, by area (areas.go).
	Emails      *Emails
	Domains     *Domains
	Audience    *Audience
	Templates   *Templates
	Broadcasts  *Broadcasts
	Webhooks    *Webhooks
	Received    *Received
	Privacy     *Privacy
	Accounts    *Accounts
	Sessions    *Sessions
	Insights    *Insights
	Automations *Automations
}

// Open connects to PostgreSQL, sealing content with cfg.MasterKey when it
// is set. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing database url: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	pcfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		registerUUID(c.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening database pool: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{pool: pool, logger: logger, domainRecords: cfg.DomainRecords}
	s.areas()
	if cfg.MasterKey != nil {
		s.sealer = datakey.New(cfg.MasterKey, s, datakey.Config{})
	}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.pool.Ping(ctx)
}

// Migrate applies every pending migration. Concurrent callers serialise on
// a PostgreSQL advisory lock, so every process may call it at start.
func (s *Store) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := migrator(db)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("applying migrations: %w", err)
	}
	for _, r := range results {
		s.logger.Info("migration applied", "version", r.Source.Version, "duration", r.Duration)
	}
	return nil
}

// migrator returns the goose provider of the embedded migrations on db.
func migrator(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("creating migration lock: %w", err)
	}
	p, err := goose.NewProvider(database.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	return p, nil
}

// unavailable reports whether err means the server could not be reached
// or went away, so that retrying later may work: a failed connect, a
// timeout, a closed pool, a connection lost mid-statement, or the
// server's own word that it is shutting down, starting, out of
// connections or has lost the connection (SQLSTATE classes 08, 53 and
// 57P, PostgreSQL Appendix A).
func unavailable(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.Timeout(err) || errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") ||
			strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// mapErr translates pgx errors into the package's sentinels. Mapping
// twice is mapping once, so an error mapped where it arose passes inTx
// unchanged.
func mapErr(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
		case "22P02", "23503": // a malformed uuid; a reference to a row that does not exist
			return fmt.Errorf("%w: %s", ErrNotFound, pgErr.Message)
		case quotaExceededCode:
			used, _ := strconv.ParseInt(pgErr.Detail, 10, 64)
			return &QuotaExceededError{Used: used}
		case quotaTakeExactCode:
			return errQuotaTakeExactly
		}
	}
	return err
}
