package automations

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// StoreRefs checks a definition's references in the store.
type StoreRefs struct{ St *store.Store }

// TemplatePublished tells whether the team has the template (by id or
// alias) and it is published.
func (r StoreRefs) TemplatePublished(ctx context.Context, teamID uuid.UUID, ref string) (bool, error) {
	t, err := r.St.Templates.TemplateByRef(ctx, teamID, ref)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && t.Published != nil, err
}

// SegmentExists tells whether the team has the segment.
func (r StoreRefs) SegmentExists(ctx context.Context, teamID, id uuid.UUID) (bool, error) {
	_, err := r.St.Audience.Segment(ctx, teamID, id)
	return found(err)
}

// TopicExists tells whether the team has the topic.
func (r StoreRefs) TopicExists(ctx context.Context, teamID, id uuid.UUID) (bool, error) {
	_, err := r.St.Audience.Topic(ctx, teamID, id)
	return found(err)
}

func found(err error) (bool, error) {
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
