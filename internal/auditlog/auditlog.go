// Package auditlog is the one way the API, the dashboard and the other
// services write and read the audit log (package audit defines its
// entries and hash chain; package store keeps it): recording an action,
// listing a team's entries and verifying the whole chain.
package auditlog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// Log records and reads the audit log of an installation.
type Log struct {
	store *store.Privacy
}

// New returns the Log kept by st.
func New(st *store.Store) *Log {
	if st == nil {
		return &Log{}
	}
	return &Log{store: st.Privacy}
}

// Record appends e with detail (a small object without personal data, or
// nil) as its Detail, synchronously, in a transaction of its own.
func (l *Log) Record(ctx context.Context, e audit.Entry, detail map[string]any) error {
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return fmt.Errorf("encoding the detail of %s: %w", e.Action, err)
		}
		e.Detail = string(b)
	}
	_, err := l.store.AppendAudit(ctx, e)
	return err
}

// Success records a successful action by actor (an entry with the actor
// and its client filled in) on a target of the team.
func (l *Log) Success(ctx context.Context, actor audit.Entry, teamID uuid.UUID, action audit.Action,
	targetType, targetID string, detail map[string]any) error {
	actor.TeamID, actor.Action, actor.Outcome = &teamID, action, audit.Success
	actor.TargetType, actor.TargetID = targetType, targetID
	return l.Record(ctx, actor, detail)
}

// List returns a page of the team's entries matching f, newest first.
func (l *Log) List(ctx context.Context, teamID uuid.UUID, f audit.Filter, p store.Page) ([]audit.Entry, bool, error) {
	return l.store.ListAudit(ctx, teamID, f, p)
}

// Verify walks the whole chain and returns how many entries it checked;
// a broken link is an *audit.BrokenError naming the first bad entry.
func (l *Log) Verify(ctx context.Context) (int64, error) {
	return l.store.VerifyAudit(ctx)
}
