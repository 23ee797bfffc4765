package datareq

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Retention are the activities of the Retention workflow: deleting what is
// past its retention (finished emails, expired rows, old audit entries
// and request log days). Data deletion is privacy's, with the erasures of
// data requests. The worker registers each under its name in
// workflows/contract.
type Retention struct {
	privacy  *store.Privacy
	insights *store.Insights // the request log's partitions
}

// NewRetention returns the activities of Retention over st's privacy and
// insights areas.
func NewRetention(st *store.Store) *Retention {
	return &Retention{privacy: st.Privacy, insights: st.Insights}
}

// PurgeEmails deletes, batch by batch, the emails (with their recipients,
// events, attachments and messages) that stopped changing before
// in.Before and are not scheduled or in flight. It heartbeats its progress;
// a retry resumes where the last attempt stopped, since deleted rows are
// gone.
func (a *Retention) PurgeEmails(ctx context.Context, in contract.PurgeInput) (contract.PurgeResult, error) {
	return a.sweep(ctx, in, func(ctx context.Context) (int, error) {
		return a.privacy.PurgeEmails(ctx, in.Before, in.BatchSize)
	})
}

// PurgeExpired deletes expired rows of the tables with their own expiry
// (idempotency records), batch by batch.
func (a *Retention) PurgeExpired(ctx context.Context, in contract.PurgeInput) (contract.PurgeResult, error) {
	return a.sweep(ctx, in, func(ctx context.Context) (int, error) {
		return a.privacy.PurgeExpired(ctx, in.Before, in.BatchSize)
	})
}

// PurgeAudit deletes, batch by batch, the oldest audit log entries
// created before in.Before, as whole prefixes of the chain (store.PurgeAudit
// keeps the last deleted entry's hash as the anchor, so the rest still
// verifies).
func (a *Retention) PurgeAudit(ctx context.Context, in contract.PurgeInput) (contract.PurgeResult, error) {
	return a.sweep(ctx, in, func(ctx context.Context) (int, error) {
		return a.privacy.PurgeAudit(ctx, in.Before, in.BatchSize)
	})
}

func (a *Retention) sweep(ctx context.Context, in contract.PurgeInput, batch func(context.Context) (int, error)) (contract.PurgeResult, error) {
	if in.BatchSize <= 0 {
		return contract.PurgeResult{}, fmt.Errorf("batch size %d must be positive", in.BatchSize)
	}
	var res contract.PurgeResult
	for {
		n, err := batch(ctx)
		if err != nil {
			return res, err
		}
		res.Deleted += n
		activity.RecordHeartbeat(ctx, res.Deleted)
		if n < in.BatchSize {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(in.Pause):
		}
	}
}

// PurgeRequestLogs drops the request log's daily partitions older than
// in.Before and creates those of the coming week.
func (a *Retention) PurgeRequestLogs(ctx context.Context, in contract.PurgeRequestLogsInput) (contract.PurgeResult, error) {
	if err := a.insights.EnsureRequestLogPartitions(ctx, in.Now, 8); err != nil {
		return contract.PurgeResult{}, err
	}
	n, err := a.insights.DropRequestLogsBefore(ctx, in.Before)
	return contract.PurgeResult{Deleted: n}, err
}
