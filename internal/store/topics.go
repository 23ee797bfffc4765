package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Subscriptions to a topic, and topics' default_subscription: with
// TopicOptIn a contact receives the topic's mail until it opts out; with
// TopicOptOut only after it opts in.
const (
	TopicOptIn  = "opt_in"
	TopicOptOut = "opt_out"
)

// Topic is a kind of mail a team's contacts may subscribe to.
type Topic struct {
	ID                  uuid.UUID
	TeamID              uuid.UUID
	Name                string
	Description         string
	DefaultSubscription string // TopicOptIn or TopicOptOut; fixed at creation
	Visibility          string // "public" or "private"
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

const topicColumns = `id, team_id, name, description, default_subscription, visibility, created_at, updated_at`

func scanTopic(row pgx.Row) (Topic, error) {
	var t Topic
	err := row.Scan(&t.ID, &t.TeamID, &t.Name, &t.Description, &t.DefaultSubscription, &t.Visibility,
		&t.CreatedAt, &t.UpdatedAt)
	return t, mapErr(err)
}

// topicChange runs the statement q, which returns one topic, and writes
// the webhook events of emit (topic.*) about that topic in the same
// transaction, with TopicPayload as their data.
func (s *Audience) topicChange(ctx context.Context, q string, args pgx.NamedArgs, emit []string) (Topic, error) {
	var t Topic
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if t, err = scanTopic(tx.QueryRow(ctx, q, args)); err != nil {
			return err
		}
		return emitEvents(ctx, tx, t.TeamID, t.ID.String(), func(string) map[string]any { return TopicPayload(t) }, emit)
	})
	return t, err
}

// CreateTopic adds a topic and returns it; its transaction also writes
// the webhook events of emit about it.
func (s *Audience) CreateTopic(ctx context.Context, t Topic, emit ...string) (Topic, error) {
	got, err := s.topicChange(ctx, `INSERT INTO topic (id, team_id, name, description, default_subscription, visibility)
		VALUES (@id, @team, @name, @description, @default, @visibility) RETURNING `+topicColumns,
		pgx.NamedArgs{"id": t.ID, "team": t.TeamID, "name": t.Name, "description": t.Description,
			"default": t.DefaultSubscription, "visibility": t.Visibility}, emit)
	if err != nil {
		return Topic{}, fmt.Errorf("creating topic: %w", err)
	}
	return got, nil
}

// Topic finds one of the team's topics.
func (s *Audience) Topic(ctx context.Context, teamID, id uuid.UUID) (Topic, error) {
	return scanTopic(s.pool.QueryRow(ctx, `SELECT `+topicColumns+` FROM topic WHERE team_id = @team AND id = @id`,
		pgx.NamedArgs{"team": teamID, "id": id}))
}

// ListTopics lists the team's topics, newest first.
func (s *Audience) ListTopics(ctx context.Context, teamID uuid.UUID, p Page) ([]Topic, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+topicColumns+` FROM topic WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanTopic)
}

// TopicUpdate holds what PATCH may change; nil fields stay. The default
// subscription cannot change.
type TopicUpdate struct {
	Name        *string
	Description *string
	Visibility  *string
}

// UpdateTopic changes one of the team's topics and returns it; its
// transaction also writes the webhook events of emit about it.
func (s *Audience) UpdateTopic(ctx context.Context, teamID, id uuid.UUID, u TopicUpdate, emit ...string) (Topic, error) {
	return s.topicChange(ctx, `UPDATE topic SET name = coalesce(@name, name),
			description = coalesce(@description, description), visibility = coalesce(@visibility, visibility),
			updated_at = now()
		WHERE team_id = @team AND id = @id RETURNING `+topicColumns,
		pgx.NamedArgs{"team": teamID, "id": id, "name": u.Name, "description": u.Description, "visibility": u.Visibility},
		emit)
}

// DeleteTopic removes one of the team's topics with its contacts' choices;
// its transaction also writes the webhook events of emit about the topic
// as it was. ErrNotFound when there is none.
func (s *Audience) DeleteTopic(ctx context.Context, teamID, id uuid.UUID, emit ...string) (Topic, error) {
	return s.topicChange(ctx, `DELETE FROM topic WHERE team_id = @team AND id = @id RETURNING `+topicColumns,
		pgx.NamedArgs{"team": teamID, "id": id}, emit)
}

// TopicPayload is the data of topic.* webhook events.
func TopicPayload(t Topic) map[string]any {
	return map[string]any{"id": t.ID.String(), "name": t.Name, "description": t.Description,
		"default_subscription": t.DefaultSubscription, "visibility": t.Visibility,
		"created_at": t.CreatedAt.UTC().Format(webhookTime), "updated_at": t.UpdatedAt.UTC().Format(webhookTime)}
}
