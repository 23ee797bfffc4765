package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

// Domain states, as workflows set them.
const (
	DomainPending           = store.DomainPending
	DomainVerified          = store.DomainVerified
	DomainPartiallyVerified = store.DomainPartiallyVerified
	DomainFailed            = store.DomainFailed
	DomainTemporaryFailure  = store.DomainTemporaryFailure
)

// CheckDomainInput names the domain whose records to look up.
type CheckDomainInput struct{ DomainID string }

// RecordCheck is the outcome of looking one record up.
type RecordCheck struct {
	Key       string // records.KeyDKIM, ...
	Required  bool   // DKIM and SPF records are; DMARC is not
	Found     bool
	Temporary bool // the lookup failed (timeout, SERVFAIL), so the record may still be there
}

// CheckDomainResult reports a domain's records, or that it was deleted.
type CheckDomainResult struct {
	Deleted bool
	Records []RecordCheck
}

// CheckDomain looks a domain's records up through the configured resolver.
// A deleted (or unknown) domain is reported as Deleted, which ends its
// verification.
func (a *Activities) CheckDomain(ctx context.Context, in CheckDomainInput) (CheckDomainResult, error) {
	id, err := uuid.Parse(in.DomainID)
	if err != nil {
		return CheckDomainResult{}, temporal.NewNonRetryableApplicationError("bad domain id", ErrTypePermanent, err)
	}
	d, err := a.store.DomainByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.DeletedAt != nil) {
		return CheckDomainResult{Deleted: true}, nil
	}
	if err != nil {
		return CheckDomainResult{}, fmt.Errorf("loading domain %s: %w", id, err)
	}
	rs := records.Check(ctx, a.cfg.Resolver, a.cfg.Records, records.Domain{
		Name: d.Name, ReturnPath: d.ReturnPath, DKIMSelector: d.DKIMSelector, DKIMPublicKey: d.DKIMPublicKey,
		Receiving: d.Receiving == store.ReceivingEnabled,
		Tracking:  d.OpenTracking || d.ClickTracking, TrackingSubdomain: d.TrackingSubdomain,
	})
	out := CheckDomainResult{}
	for _, r := range rs {
		out.Records = append(out.Records, RecordCheck{Key: r.Key, Required: records.Required(r.Key),
			Found: r.Found, Temporary: r.Temporary})
		if !r.Found {
			a.logger.Debug("domain record not found", "domain", d.Name, "record", r.Key, "err", r.Error)
		}
		// Acceptance reads the DMARC policy for its insights (issue 19):
		// kept unless the lookup failed.
		if r.Key == records.KeyDMARC && !r.Temporary {
			if err := a.store.SetDomainDMARCPolicy(ctx, id, r.Policy); err != nil {
				return CheckDomainResult{}, err
			}
		}
	}
	return out, nil
}

// SetDomainStatusInput is the outcome of a verification step.
type SetDomainStatusInput struct {
	DomainID string
	Status   string
	Records  map[string]string // record key → status
}

// SetDomainStatus stores a domain's status and its records' statuses.
func (a *Activities) SetDomainStatus(ctx context.Context, in SetDomainStatusInput) error {
	id, err := uuid.Parse(in.DomainID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad domain id", ErrTypePermanent, err)
	}
	if _, err := a.store.DomainByID(ctx, id); err != nil {
		return a.classify(fmt.Errorf("loading domain %s: %w", id, err))
	}
	// A change of status is reported as domain.updated, written with it.
	if err := a.store.SetDomainStatus(ctx, id, in.Status, in.Records, "domain.updated"); err != nil {
		return err
	}
	a.logger.Info("domain status", "domain_id", in.DomainID, "status", in.Status)
	return nil
}
