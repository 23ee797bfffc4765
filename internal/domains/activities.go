package domains

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Activities are the activities of the VerifyDomain workflow: looking a
// domain's records up and storing its status. The worker registers each
// under its name in workflows/contract.
type Activities struct {
	domains  *store.Domains
	logger   *slog.Logger
	resolver *net.Resolver
	records  records.Config
}

// ActivitiesConfig wires the Activities.
type ActivitiesConfig struct {
	// Records is the operator's side of the domains' DNS records.
	Records records.Config
	// Resolver looks domain records up (POSTHASTE_DNS_SERVER); nil means
	// the system resolver.
	Resolver *net.Resolver
	// Logger may be nil.
	Logger *slog.Logger
}

// NewActivities returns the activities of VerifyDomain over st.
func NewActivities(cfg ActivitiesConfig, st *store.Domains) *Activities {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Activities{domains: st, logger: logger.With("component", "activities"), resolver: cfg.Resolver,
		records: cfg.Records}
}

// CheckDomain looks a domain's records up through the configured resolver.
// A deleted (or unknown) domain is reported as Deleted, which ends its
// verification.
func (a *Activities) CheckDomain(ctx context.Context, in contract.CheckDomainInput) (contract.CheckDomainResult, error) {
	id, err := uuid.Parse(in.DomainID)
	if err != nil {
		return contract.CheckDomainResult{}, temporal.NewNonRetryableApplicationError("bad domain id", contract.ErrTypePermanent, err)
	}
	d, err := a.domains.DomainByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.DeletedAt != nil) {
		return contract.CheckDomainResult{Deleted: true}, nil
	}
	if err != nil {
		return contract.CheckDomainResult{}, fmt.Errorf("loading domain %s: %w", id, err)
	}
	rs := records.Check(ctx, a.resolver, a.records, records.Domain{
		Name: d.Name, ReturnPath: d.ReturnPath, DKIMSelector: d.DKIMSelector, DKIMPublicKey: d.DKIMPublicKey,
		Receiving: d.Receiving == store.ReceivingEnabled,
		Tracking:  d.OpenTracking || d.ClickTracking, TrackingSubdomain: d.TrackingSubdomain,
	})
	out := contract.CheckDomainResult{}
	for _, r := range rs {
		out.Records = append(out.Records, contract.RecordCheck{Key: r.Key, Required: records.Required(r.Key),
			Found: r.Found, Temporary: r.Temporary})
		if !r.Found {
			a.logger.Debug("domain record not found", "domain", d.Name, "record", r.Key, "err", r.Error)
		}
		// Acceptance reads the DMARC policy for its insights (issue 19):
		// kept unless the lookup failed.
		if r.Key == records.KeyDMARC && !r.Temporary {
			if err := a.domains.SetDomainDMARCPolicy(ctx, id, r.Policy); err != nil {
				return contract.CheckDomainResult{}, err
			}
		}
	}
	return out, nil
}

// SetDomainStatus stores a domain's status and its records' statuses. A
// missing domain is a permanent error.
func (a *Activities) SetDomainStatus(ctx context.Context, in contract.SetDomainStatusInput) error {
	id, err := uuid.Parse(in.DomainID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad domain id", contract.ErrTypePermanent, err)
	}
	if _, err := a.domains.DomainByID(ctx, id); err != nil {
		err = fmt.Errorf("loading domain %s: %w", id, err)
		if errors.Is(err, store.ErrNotFound) {
			return contract.Permanent(err)
		}
		return err
	}
	// A change of status is reported as domain.updated, written with it.
	if err := a.domains.SetDomainStatus(ctx, id, in.Status, in.Records, "domain.updated"); err != nil {
		return err
	}
	a.logger.Info("domain status", "domain_id", in.DomainID, "status", in.Status)
	return nil
}
