package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// CheckDomain looks a domain's records up through the configured resolver.
// A deleted (or unknown) domain is reported as Deleted, which ends its
// verification.
func (a *Domains) CheckDomain(ctx context.Context, in contract.CheckDomainInput) (contract.CheckDomainResult, error) {
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

// SetDomainStatus stores a domain's status and its records' statuses.
func (a *Domains) SetDomainStatus(ctx context.Context, in contract.SetDomainStatusInput) error {
	id, err := uuid.Parse(in.DomainID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad domain id", contract.ErrTypePermanent, err)
	}
	if _, err := a.domains.DomainByID(ctx, id); err != nil {
		return classify(fmt.Errorf("loading domain %s: %w", id, err))
	}
	// A change of status is reported as domain.updated, written with it.
	if err := a.domains.SetDomainStatus(ctx, id, in.Status, in.Records, "domain.updated"); err != nil {
		return err
	}
	a.logger.Info("domain status", "domain_id", in.DomainID, "status", in.Status)
	return nil
}
