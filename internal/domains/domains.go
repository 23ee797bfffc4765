// Package domains is the one "manage sender domains" use case shared by
// the HTTP API and the dashboard: listing and reading a team's domains,
// adding a domain (its name, region and return path checked, a DKIM key
// made and sealed), changing its tracking and TLS settings, starting its
// verification and deleting it, each change emitting its domain.* webhook
// event and recording its audit entry; and the IP pools (with their
// warm-up) a team's mail leaves from. It also holds the list of delivery
// regions, the DNS records of a domain with their statuses, and the
// VerifyDomain workflow's activities (Activities).
package domains

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// Regions are the delivery regions a domain can choose, the default
// first. Each has its own delivery task queue
// (workflows.DeliverTaskQueue); migration 00002 lists them in a CHECK.
var Regions = []string{"us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"}

// ValidRegion reports whether r is one of Regions.
func ValidRegion(r string) bool { return slices.Contains(Regions, r) }

// DefaultReturnPath is the label of the return-path subdomain of a domain
// added without custom_return_path.
const DefaultReturnPath = "send"

// TLSModes are the values of a domain's tls setting.
var TLSModes = []string{store.TLSOpportunistic, store.TLSEnforced}

// ErrNoMasterKey refuses to add a domain on a server without a master key
// to seal its DKIM key.
var ErrNoMasterKey = errors.New("domains cannot be added: the server has no master key (POSTHASTE_MASTER_KEY) to protect their DKIM keys")

// ErrVerificationUnavailable wraps the error of a verification that could
// not be started; the domain was marked pending and may be verified later.
var ErrVerificationUnavailable = errors.New("domain verification is unavailable")

// Verifier starts and stops the verification of domains.
type Verifier interface {
	// Verify makes the domain's verification check its records at once,
	// starting the verification when none is running.
	Verify(ctx context.Context, domainID string) error
	// Forget stops the verification of a deleted domain.
	Forget(ctx context.Context, domainID string) error
}

// Config is what a Service needs besides the store.
type Config struct {
	// Keys seals new DKIM keys; nil makes Add fail with ErrNoMasterKey.
	Keys *seal.Box
	// DKIMSelector is the selector of new domains' DKIM keys.
	DKIMSelector string
	// Verifier may be nil: Verify then fails with ErrVerificationUnavailable.
	Verifier Verifier
	Logger   *slog.Logger
}

// Service lists, adds, changes, verifies and deletes teams' domains.
// Every method takes the team of the caller and answers store.ErrNotFound
// for another team's domain. The methods that change a domain take the
// actor (an audit entry with the actor and its client filled in); the
// store writes the entry in the change's transaction, so the change and
// its entry are made or fail together. Verify is the exception: what it
// records is the start of the verification, which is no database change,
// so its entry is written once the verification has started.
type Service struct {
	cfg    Config
	store  *store.Store
	audit  *auditlog.Log
	logger *slog.Logger
}

// New returns a Service on st.
func New(cfg Config, st *store.Store) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, store: st, audit: auditlog.New(st), logger: cfg.Logger.With("component", "domains")}
}

// CanVerify reports whether the service can start verifications.
func (s *Service) CanVerify() bool { return s.cfg.Verifier != nil }

// Get returns the team's domain id.
func (s *Service) Get(ctx context.Context, teamID, id uuid.UUID) (store.Domain, error) {
	return s.store.Domains.GetDomain(ctx, teamID, id)
}

// List returns a page of the team's domains, newest first.
func (s *Service) List(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.Domain, bool, error) {
	return s.store.Domains.ListDomains(ctx, teamID, p)
}

// Request is a domain to add. Nil fields take their defaults: the first
// region, the return path "send", tracking off, opportunistic TLS.
type Request struct {
	Name          string
	Region        *string
	ReturnPath    *string // custom_return_path
	OpenTracking  *bool
	ClickTracking *bool
	TLS           *string
	// Receiving is capabilities.receiving: store.ReceivingEnabled or
	// store.ReceivingDisabled (the default).
	Receiving *string
	// TrackingSubdomain is tracking_subdomain, a DNS label (default
	// store.DefaultTrackingSubdomain).
	TrackingSubdomain *string
}

// trackingSubdomain checks and normalizes a tracking_subdomain: one DNS
// label. nil stays nil.
func trackingSubdomain(v *string) (*string, error) {
	if v == nil {
		return nil, nil
	}
	label := strings.ToLower(strings.TrimSpace(*v))
	if !dnsLabel.MatchString(label) {
		return nil, invalid.Errorf("tracking_subdomain",
			"The `tracking_subdomain` field must be one DNS label of letters, digits and hyphens, such as links.")
	}
	return &label, nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Name checks and normalizes a domain name: lower-case ASCII (punycode
// for internationalized names), at least two labels, not the sandbox.
func Name(name string) (string, error) {
	name = strings.TrimSuffix(strings.TrimSpace(name), ".")
	if name == "" {
		return "", invalid.Missing("name")
	}
	bad := invalid.Errorf("name", "The `name` field must be a domain name such as example.com, not %q.", name)
	if strings.ContainsAny(name, "@<>\" \t,;") {
		return "", bad
	}
	a, err := address.Parse("postmaster@" + name)
	if err != nil || !strings.Contains(a.Domain, ".") || strings.HasPrefix(a.Domain, "[") {
		return "", bad
	}
	if sandbox.IsDomain(a.Domain) {
		return "", invalid.Errorf("name", "The `name` field cannot be the sandbox domain %s, which works without verification.", sandbox.Domain)
	}
	return a.Domain, nil
}

// checkTLS accepts nil (unchanged) and the TLSModes.
func checkTLS(v *string) error {
	if v != nil && !slices.Contains(TLSModes, *v) {
		return invalid.Errorf("tls", "The `tls` field must be opportunistic or enforced.")
	}
	return nil
}

// checkReceiving accepts nil (unchanged) and the receiving capabilities.
func checkReceiving(v *string) error {
	if v != nil && *v != store.ReceivingEnabled && *v != store.ReceivingDisabled {
		return invalid.Errorf("capabilities.receiving", "The `capabilities.receiving` field must be enabled or disabled.")
	}
	return nil
}

// Add checks req and adds the domain to the team, with a new DKIM key and
// every record not started, for actor (audit.DomainCreate). A name the
// team already has is an *invalid.Error.
func (s *Service) Add(ctx context.Context, teamID uuid.UUID, req Request, actor audit.Entry) (store.Domain, error) {
	name, err := Name(req.Name)
	if err != nil {
		return store.Domain{}, err
	}
	region := Regions[0]
	if req.Region != nil {
		if !ValidRegion(*req.Region) {
			return store.Domain{}, invalid.Errorf("region", "The `region` field must be one of %s.", strings.Join(Regions, ", "))
		}
		region = *req.Region
	}
	rp := DefaultReturnPath
	if req.ReturnPath != nil {
		rp = strings.ToLower(strings.TrimSpace(*req.ReturnPath))
		if !dnsLabel.MatchString(rp) {
			return store.Domain{}, invalid.Errorf("custom_return_path",
				"The `custom_return_path` field must be one DNS label of letters, digits and hyphens, such as send.")
		}
	}
	tracking, err := trackingSubdomain(req.TrackingSubdomain)
	if err != nil {
		return store.Domain{}, err
	}
	if err := checkTLS(req.TLS); err != nil {
		return store.Domain{}, err
	}
	if err := checkReceiving(req.Receiving); err != nil {
		return store.Domain{}, err
	}
	if s.cfg.Keys == nil {
		return store.Domain{}, ErrNoMasterKey
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Domain{}, err
	}
	key, err := dkim.GenerateKey()
	if err != nil {
		return store.Domain{}, fmt.Errorf("making the DKIM key of %s: %w", name, err)
	}
	sealed, err := s.cfg.Keys.Seal(key.PrivatePKCS8, id[:])
	if err != nil {
		return store.Domain{}, fmt.Errorf("sealing the DKIM key of %s: %w", name, err)
	}
	d := store.Domain{ID: id, TeamID: teamID, Name: name, Region: region,
		Status: store.DomainNotStarted, ReturnPath: rp, TLS: store.TLSOpportunistic,
		DKIMSelector: s.cfg.DKIMSelector, DKIMPublicKey: key.PublicBase64, DKIMPrivateKey: sealed,
		RecordStatus: map[string]string{}, Receiving: store.ReceivingDisabled,
		TrackingSubdomain: store.DefaultTrackingSubdomain}
	if tracking != nil {
		d.TrackingSubdomain = *tracking
	}
	if req.Receiving != nil {
		d.Receiving = *req.Receiving
	}
	if req.OpenTracking != nil {
		d.OpenTracking = *req.OpenTracking
	}
	if req.ClickTracking != nil {
		d.ClickTracking = *req.ClickTracking
	}
	if req.TLS != nil {
		d.TLS = *req.TLS
	}
	for _, k := range records.Keys {
		d.RecordStatus[k] = store.DomainNotStarted
	}
	e, err := audit.Succeeded(actor, audit.DomainCreate, "domain", id.String(), map[string]any{"name": name})
	if err != nil {
		return store.Domain{}, err
	}
	e.TeamID = &teamID
	if err := s.store.Domains.CreateDomainBy(ctx, d, e, "domain.created"); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Domain{}, invalid.Errorf("name", "The domain %s has already been added.", name)
		}
		return store.Domain{}, err
	}
	return s.store.Domains.GetDomain(ctx, teamID, id)
}

// Settings are the settings Update may change; nil fields stay.
type Settings = store.DomainUpdate

// Update changes a domain's tracking, TLS and receiving settings for
// actor (audit.DomainUpdate).
func (s *Service) Update(ctx context.Context, teamID, id uuid.UUID, u Settings, actor audit.Entry) (store.Domain, error) {
	if err := checkTLS(u.TLS); err != nil {
		return store.Domain{}, err
	}
	label, err := trackingSubdomain(u.TrackingSubdomain)
	if err != nil {
		return store.Domain{}, err
	}
	u.TrackingSubdomain = label
	if err := checkReceiving(u.Receiving); err != nil {
		return store.Domain{}, err
	}
	e, err := audit.Succeeded(actor, audit.DomainUpdate, "domain", id.String(), nil)
	if err != nil {
		return store.Domain{}, err
	}
	e.TeamID = &teamID
	if err := s.store.Domains.UpdateDomain(ctx, teamID, id, u, e, "domain.updated"); err != nil {
		return store.Domain{}, err
	}
	return s.store.Domains.GetDomain(ctx, teamID, id)
}

// Verify marks a domain whose verification is not running pending and
// makes its verification check the records at once, for actor
// (audit.DomainVerify). It returns the domain as marked; a verification
// that cannot be started is ErrVerificationUnavailable (and not audited).
func (s *Service) Verify(ctx context.Context, teamID, id uuid.UUID, actor audit.Entry) (store.Domain, error) {
	d, err := s.store.Domains.MarkDomainPending(ctx, teamID, id)
	if err != nil {
		return store.Domain{}, err
	}
	if s.cfg.Verifier == nil {
		return d, ErrVerificationUnavailable
	}
	if err := s.cfg.Verifier.Verify(ctx, d.ID.String()); err != nil {
		return d, fmt.Errorf("%w: %w", ErrVerificationUnavailable, err)
	}
	if err := s.audit.Success(ctx, actor, teamID, audit.DomainVerify, "domain", id.String(), nil); err != nil {
		return d, err
	}
	return d, nil
}

// Delete deletes a domain for the user by: no new email is accepted from
// it, its verification stops. It returns the domain as it was. Only the
// team's owners delete domains (SECURITY.md), whether in the dashboard
// (by is the signed-in user) or through the API (by is the user who made
// the calling key): store.ErrOwnersOnly for anyone else, checked before
// the domain is looked up so that a member learns nothing more. actor is
// recorded as audit.DomainDelete.
func (s *Service) Delete(ctx context.Context, teamID uuid.UUID, by *uuid.UUID, id uuid.UUID, actor audit.Entry) (store.Domain, error) {
	if by == nil {
		return store.Domain{}, store.ErrOwnersOnly
	}
	switch role, err := s.store.Sessions.MemberRole(ctx, teamID, *by); {
	case errors.Is(err, store.ErrNotFound):
		return store.Domain{}, store.ErrOwnersOnly
	case err != nil:
		return store.Domain{}, fmt.Errorf("checking the role: %w", err)
	case role != "owner":
		return store.Domain{}, store.ErrOwnersOnly
	}
	d, err := s.store.Domains.GetDomain(ctx, teamID, id)
	if err != nil {
		return store.Domain{}, err
	}
	e, err := audit.Succeeded(actor, audit.DomainDelete, "domain", id.String(), nil)
	if err != nil {
		return store.Domain{}, err
	}
	e.TeamID = &teamID
	if err := s.store.Domains.DeleteDomain(ctx, teamID, id, e, "domain.deleted"); err != nil {
		return store.Domain{}, err
	}
	// The verification also ends by itself at its next check.
	if s.cfg.Verifier != nil {
		if err := s.cfg.Verifier.Forget(ctx, id.String()); err != nil {
			s.logger.Warn("stopping domain verification", "team_id", teamID, "domain", d.Name, "err", err)
		}
	}
	return d, nil
}

// Record is a DNS record of a domain with the status of its last check.
type Record struct {
	records.Record
	Status string
}

// RecordsDomain is what the records of d depend on.
func RecordsDomain(d store.Domain) records.Domain {
	return records.Domain{Name: d.Name, ReturnPath: d.ReturnPath, DKIMSelector: d.DKIMSelector,
		DKIMPublicKey: d.DKIMPublicKey, Receiving: d.Receiving == store.ReceivingEnabled,
		Tracking: d.OpenTracking || d.ClickTracking, TrackingSubdomain: d.TrackingSubdomain}
}

// Records returns the records of d in display order with their statuses;
// a record never checked is not_started.
func Records(cfg records.Config, d store.Domain) []Record {
	rs := records.For(cfg, RecordsDomain(d))
	out := make([]Record, len(rs))
	for i, r := range rs {
		status := d.RecordStatus[r.Key]
		if status == "" {
			status = store.DomainNotStarted
		}
		out[i] = Record{Record: r, Status: status}
	}
	return out
}

// RecordJSON is a record as Resend's API and webhook events show it.
type RecordJSON struct {
	Record   string `json:"record"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	TTL      string `json:"ttl"`
	Status   string `json:"status"`
	Value    string `json:"value"`
	Priority *int   `json:"priority,omitempty"`
}

// RecordsJSON returns the records of d as GET /domains/{id} and the
// domain.* webhook events show them (store.Config.DomainRecords).
func RecordsJSON(cfg records.Config, d store.Domain) []RecordJSON {
	out := []RecordJSON{}
	for _, r := range Records(cfg, d) {
		rj := RecordJSON{Record: r.Record.Record, Name: r.Name, Type: r.Type, TTL: "Auto", Status: r.Status, Value: r.Value}
		if r.Type == "MX" {
			p := r.Priority
			rj.Priority = &p
		}
		out = append(out, rj)
	}
	return out
}

// NoTrackingHostWarning is TrackingWarning's message.
const NoTrackingHostWarning = "Open and click tracking are on, but this server has no tracking host " +
	"(POSTHASTE_TRACKING_HOST, by default the host of POSTHASTE_PUBLIC_URL) for the domain's Tracking record " +
	"to point at, so its mail is sent untracked. Ask the server's operator to set one."

// TrackingWarning says why the mail of d is sent untracked although its
// open or click tracking is on: the server has no tracking host, so the
// domain has no Tracking record (`posthaste dev` tracks under its own
// address instead, cfg.LocalTracking). "" when tracking is off or works.
func TrackingWarning(cfg records.Config, d store.Domain) string {
	if !(d.OpenTracking || d.ClickTracking) || cfg.TrackingHost != "" || cfg.LocalTracking != "" {
		return ""
	}
	return NoTrackingHostWarning
}
