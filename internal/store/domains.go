package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// Domain states, the values of Domain.Status (and of its records' states,
// which use the same words).
const (
	DomainNotStarted        = "not_started"
	DomainPending           = "pending"
	DomainVerified          = "verified"
	DomainPartiallyVerified = "partially_verified"
	DomainFailed            = "failed"
	DomainTemporaryFailure  = "temporary_failure"
)

// TLS modes of a domain.
const (
	TLSOpportunistic = "opportunistic"
	TLSEnforced      = "enforced"
)

// Domain is a sender domain of a team.
type Domain struct {
	ID            uuid.UUID
	TeamID        uuid.UUID
	Name          string // lower-case ASCII (punycode)
	Region        string
	Status        string
	ReturnPath    string // label of the return-path subdomain, e.g. "send"
	OpenTracking  bool
	ClickTracking bool
	TLS           string
	DKIMSelector  string
	DKIMPublicKey string // base64 DER, the p= of the DKIM record
	// DKIMPrivateKey is the sealed PKCS #8 private key; only activities
	// that sign open it.
	DKIMPrivateKey []byte
	RecordStatus   map[string]string // record key → status
	// Receiving is the receiving capability, ReceivingEnabled or
	// ReceivingDisabled (migration 00022).
	Receiving  string
	VerifiedAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	DeletedAt  *time.Time

	// DMARCPolicy is the p= value of the DMARC record the last
	// verification found, lower case; "" when it found none; nil until a
	// verification looked (migration 00025).
	DMARCPolicy *string

	// TrackingSubdomain is the label of the domain's tracking subdomain
	// (migration 00024); "" on create means DefaultTrackingSubdomain.
	TrackingSubdomain string
}

// DefaultTrackingSubdomain is the tracking subdomain of a domain created
// without one, as Resend's.
const DefaultTrackingSubdomain = "links"

// Sendable reports whether mail may be accepted from the domain.
func (d Domain) Sendable() bool {
	return d.DeletedAt == nil && (d.Status == DomainVerified || d.Status == DomainTemporaryFailure)
}

const domainColumns = `id, team_id, name, region, status, return_path, open_tracking, click_tracking,
	tls, dkim_selector, dkim_public_key, dkim_private_key, record_status, verified_at, created_at,
	updated_at, deleted_at, receiving, dmarc_policy, tracking_subdomain`

func scanDomain(row pgx.Row) (Domain, error) {
	var d Domain
	err := row.Scan(&d.ID, &d.TeamID, &d.Name, &d.Region, &d.Status, &d.ReturnPath, &d.OpenTracking,
		&d.ClickTracking, &d.TLS, &d.DKIMSelector, &d.DKIMPublicKey, &d.DKIMPrivateKey, &d.RecordStatus,
		&d.VerifiedAt, &d.CreatedAt, &d.UpdatedAt, &d.DeletedAt, &d.Receiving, &d.DMARCPolicy,
		&d.TrackingSubdomain)
	if d.RecordStatus == nil {
		d.RecordStatus = map[string]string{}
	}
	return d, mapErr(err)
}

// domainChange runs the statement q, which returns the domainColumns of
// at most one domain, and writes the webhook events of emit (domain.*)
// about that domain in the same transaction, with domainPayload as their
// data. ErrNotFound when q returned no domain.
func (s *Domains) domainChange(ctx context.Context, q string, args pgx.NamedArgs, by audit.Entry, emit []string) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		d, err := scanDomain(tx.QueryRow(ctx, q, args))
		if err != nil {
			return err
		}
		return s.emitDomainEvents(ctx, tx, d, emit)
	})
}

// emitDomainEvents writes the events of types (domain.*) about d in the
// change's transaction tx, with domainPayload as their data.
func (s *Store) emitDomainEvents(ctx context.Context, tx pgx.Tx, d Domain, types []string) error {
	return emitEvents(ctx, tx, d.TeamID, d.ID.String(), func(string) map[string]any { return s.domainPayload(d) }, types)
}

// CreateDomain inserts a domain; its transaction also writes the webhook
// events of emit about it. ErrConflict when the team already has a live
// domain of that name.
func (s *Domains) CreateDomain(ctx context.Context, d Domain, emit ...string) error {
	return s.CreateDomainBy(ctx, d, audit.Entry{}, emit...)
}

// CreateDomainBy is CreateDomain that also appends by, the audit entry of
// the creation, in its transaction.
func (s *Domains) CreateDomainBy(ctx context.Context, d Domain, by audit.Entry, emit ...string) error {
	err := s.domainChange(ctx, `INSERT INTO domain (id, team_id, name, region, status, return_path,
			open_tracking, click_tracking, tls, dkim_selector, dkim_public_key, dkim_private_key, record_status,
			receiving, tracking_subdomain)
		VALUES (@id, @team, @name, @region, @status, @return_path, @open, @click, @tls, @selector,
			@public, @private, @records, coalesce(nullif(@receiving, ''), 'disabled'),
			coalesce(nullif(@tracking_subdomain, ''), '`+DefaultTrackingSubdomain+`'))
		RETURNING `+domainColumns,
		pgx.NamedArgs{"id": d.ID, "team": d.TeamID, "name": d.Name, "region": d.Region, "status": d.Status,
			"return_path": d.ReturnPath, "open": d.OpenTracking, "click": d.ClickTracking, "tls": d.TLS,
			"selector": d.DKIMSelector, "public": d.DKIMPublicKey, "private": d.DKIMPrivateKey,
			"records": nonNilMap(d.RecordStatus), "receiving": d.Receiving,
			"tracking_subdomain": d.TrackingSubdomain}, by, emit)
	if err != nil {
		return fmt.Errorf("creating domain %s: %w", d.Name, err)
	}
	return nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// GetDomain returns a live domain of the team. ErrNotFound for unknown,
// deleted and other teams' domains.
func (s *Domains) GetDomain(ctx context.Context, teamID, id uuid.UUID) (Domain, error) {
	return scanDomain(s.pool.QueryRow(ctx, `SELECT `+domainColumns+` FROM domain
		WHERE id = @id AND team_id = @team AND deleted_at IS NULL`, pgx.NamedArgs{"id": id, "team": teamID}))
}

// DomainByName returns the team's live domain of that exact name.
func (s *Domains) DomainByName(ctx context.Context, teamID uuid.UUID, name string) (Domain, error) {
	return scanDomain(s.pool.QueryRow(ctx, `SELECT `+domainColumns+` FROM domain
		WHERE team_id = @team AND name = @name AND deleted_at IS NULL`, pgx.NamedArgs{"name": name, "team": teamID}))
}

// DomainByID returns a domain whatever its team, deleted ones included:
// workflows address domains by id, and emails accepted before a domain was
// deleted are still signed with its key.
func (s *Domains) DomainByID(ctx context.Context, id uuid.UUID) (Domain, error) {
	return scanDomain(s.pool.QueryRow(ctx, `SELECT `+domainColumns+` FROM domain WHERE id = @id`,
		pgx.NamedArgs{"id": id}))
}

// ListDomains lists the team's live domains, newest first.
func (s *Domains) ListDomains(ctx context.Context, teamID uuid.UUID, p Page) ([]Domain, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+domainColumns+` FROM domain
		WHERE team_id = @team AND deleted_at IS NULL`, pgx.NamedArgs{"team": teamID}, scanDomain)
}

// DomainUpdate holds the settings PATCH may change; nil fields stay.
type DomainUpdate struct {
	OpenTracking  *bool
	ClickTracking *bool
	TLS           *string
	// Receiving is ReceivingEnabled or ReceivingDisabled.
	Receiving *string
	// TrackingSubdomain is a DNS label.
	TrackingSubdomain *string
}

// UpdateDomain changes a live domain's settings; its transaction also
// writes the webhook events of emit about the domain as changed and by,
// the audit entry of the change (none when zero). ErrNotFound when the
// team has no such domain.
func (s *Domains) UpdateDomain(ctx context.Context, teamID, id uuid.UUID, u DomainUpdate, by audit.Entry, emit ...string) error {
	err := s.domainChange(ctx, `UPDATE domain SET
			open_tracking = coalesce(@open, open_tracking),
			click_tracking = coalesce(@click, click_tracking),
			tls = coalesce(@tls, tls),
			receiving = coalesce(@receiving, receiving),
			tracking_subdomain = coalesce(@tracking_subdomain, tracking_subdomain),
			updated_at = now()
		WHERE id = @id AND team_id = @team AND deleted_at IS NULL RETURNING `+domainColumns,
		pgx.NamedArgs{"id": id, "team": teamID, "open": u.OpenTracking, "click": u.ClickTracking, "tls": u.TLS,
			"receiving": u.Receiving, "tracking_subdomain": u.TrackingSubdomain}, by, emit)
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("updating domain %s: %w", id, err)
	}
	return nil
}

// DeleteDomain marks a live domain deleted: no new email is accepted from
// it. Its transaction also writes the webhook events of emit about the
// domain and by, the audit entry of the deletion (none when zero).
// ErrNotFound when the team has no such domain.
func (s *Domains) DeleteDomain(ctx context.Context, teamID, id uuid.UUID, by audit.Entry, emit ...string) error {
	err := s.domainChange(ctx, `UPDATE domain SET deleted_at = now(), updated_at = now()
		WHERE id = @id AND team_id = @team AND deleted_at IS NULL RETURNING `+domainColumns,
		pgx.NamedArgs{"id": id, "team": teamID}, by, emit)
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("deleting domain %s: %w", id, err)
	}
	return nil
}

// MarkDomainPending moves a live domain whose verification is not running
// (not_started or failed) to pending, so that a check requested through
// the API shows at once. It returns the domain as it is afterwards.
func (s *Domains) MarkDomainPending(ctx context.Context, teamID, id uuid.UUID) (Domain, error) {
	_, err := s.pool.Exec(ctx, `UPDATE domain SET status = 'pending', updated_at = now(),
			record_status = (SELECT coalesce(jsonb_object_agg(k, 'pending'), '{}') FROM jsonb_object_keys(record_status) k)
		WHERE id = @id AND team_id = @team AND deleted_at IS NULL AND status IN ('not_started', 'failed')`,
		pgx.NamedArgs{"id": id, "team": teamID})
	if err != nil {
		return Domain{}, fmt.Errorf("marking domain %s pending: %w", id, mapErr(err))
	}
	return s.GetDomain(ctx, teamID, id)
}

// SetDomainStatus records the outcome of a verification check. A deleted
// domain is left alone. verified_at is set when the domain first becomes
// verified. When the status changed, the same transaction writes the
// webhook events of emit about the domain.
func (s *Domains) SetDomainStatus(ctx context.Context, id uuid.UUID, status string, records map[string]string,
	emit ...string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var was string
		err := tx.QueryRow(ctx, `SELECT status FROM domain WHERE id = @id AND deleted_at IS NULL FOR UPDATE`,
			pgx.NamedArgs{"id": id}).Scan(&was)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted
		}
		if err != nil {
			return mapErr(err)
		}
		d, err := scanDomain(tx.QueryRow(ctx, `UPDATE domain SET status = @status, record_status = @records,
				updated_at = now(),
				verified_at = CASE WHEN @status = 'verified' THEN coalesce(verified_at, now()) ELSE verified_at END
			WHERE id = @id RETURNING `+domainColumns,
			pgx.NamedArgs{"id": id, "status": status, "records": nonNilMap(records)}))
		if err != nil || was == status {
			return err
		}
		return s.emitDomainEvents(ctx, tx, d, emit)
	})
	if err != nil {
		return fmt.Errorf("setting status of domain %s: %w", id, err)
	}
	return nil
}

// SetDomainDMARCPolicy stores the DMARC policy a verification check
// found (see Domain.DMARCPolicy): "" when the domain publishes no DMARC
// record. A deleted domain is left alone.
func (s *Domains) SetDomainDMARCPolicy(ctx context.Context, id uuid.UUID, policy string) error {
	_, err := s.pool.Exec(ctx, `UPDATE domain SET dmarc_policy = @policy WHERE id = @id AND deleted_at IS NULL
		AND dmarc_policy IS DISTINCT FROM @policy::text`, pgx.NamedArgs{"id": id, "policy": policy})
	if err != nil {
		return fmt.Errorf("setting dmarc policy of domain %s: %w", id, mapErr(err))
	}
	return nil
}
