package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Contact is a person of a team's audience.
type Contact struct {
	ID           uuid.UUID
	TeamID       uuid.UUID
	Email        string // normalised with NormalizeAddress
	FirstName    string
	LastName     string
	Unsubscribed bool
	// Properties holds the values of the team's contact properties: string
	// or float64, as validated against their definitions by the caller.
	Properties map[string]any
	SegmentIDs []uuid.UUID // the segments it belongs to, oldest membership first
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ContactRef names a contact by id (when ID is set) or by address.
type ContactRef struct {
	ID    *uuid.UUID
	Email string
	// Segment, when set, matches the contact only while it is a member of
	// that segment (the legacy /audiences/{id}/contacts routes).
	Segment *uuid.UUID
}

// TopicChoice is a contact's subscription to a topic: TopicOptIn or
// TopicOptOut.
type TopicChoice struct {
	TopicID      uuid.UUID
	Subscription string
}

// RefError means a segment or topic named in a write does not exist in the
// team; nothing was written. It matches ErrNotFound with errors.Is.
type RefError struct {
	What string // "segment" or "topic"
	ID   uuid.UUID
}

func (e *RefError) Error() string { return e.What + " " + e.ID.String() + " not found" }

// Unwrap makes a RefError an ErrNotFound.
func (e *RefError) Unwrap() error { return ErrNotFound }

const contactColumns = `id, team_id, email, first_name, last_name, unsubscribed, properties, created_at, updated_at,
	coalesce((SELECT array_agg(cs.segment_id ORDER BY cs.created_at, cs.segment_id) FROM contact_segment cs
		WHERE cs.contact_id = contact.id), '{}')`

func scanContact(row pgx.Row) (Contact, error) {
	var c Contact
	err := row.Scan(&c.ID, &c.TeamID, &c.Email, &c.FirstName, &c.LastName, &c.Unsubscribed, &c.Properties,
		&c.CreatedAt, &c.UpdatedAt, &c.SegmentIDs)
	if c.Properties == nil {
		c.Properties = map[string]any{}
	}
	return c, mapErr(err)
}

// refArgs are the named arguments matching one contact of a team by ref.
func refArgs(teamID uuid.UUID, ref ContactRef) pgx.NamedArgs {
	return pgx.NamedArgs{"team": teamID, "id": ref.ID, "email": NormalizeAddress(ref.Email), "in_segment": ref.Segment}
}

const refWhere = `team_id = @team AND ((@id::uuid IS NOT NULL AND id = @id) OR (@id::uuid IS NULL AND email = @email))
	AND (@in_segment::uuid IS NULL OR EXISTS (SELECT 1 FROM contact_segment cs
		WHERE cs.contact_id = contact.id AND cs.segment_id = @in_segment))`

// EventContactTopicsUpdated is the webhook event of a change of a
// contact's topic choices: its data is the contact's payload with the
// choices made, as `topics`.
const EventContactTopicsUpdated = "contact.topics.updated"

// emitContactEvents writes the events of types (contact.*) about c, in
// that order, in the change's transaction tx (see emitEvent); the data of
// each is c's payload, and that of EventContactTopicsUpdated also lists
// topics.
func emitContactEvents(ctx context.Context, tx pgx.Tx, c Contact, topics []TopicChoice, types []string) error {
	return emitEvents(ctx, tx, c.TeamID, c.ID.String(), func(typ string) map[string]any {
		data := ContactPayload(c)
		if typ == EventContactTopicsUpdated {
			list := make([]map[string]string, len(topics))
			for i, t := range topics {
				list[i] = map[string]string{"id": t.TopicID.String(), "subscription": t.Subscription}
			}
			data["topics"] = list
		}
		return data
	}, types)
}

// CreateContact adds a contact with its segment memberships and topic
// choices in one transaction, which also writes the webhook events of
// emit about the new contact (see emitContactEvents). ErrConflict when
// the team already has a contact with this address; a *RefError when a
// segment or topic is not the team's.
func (s *Audience) CreateContact(ctx context.Context, c Contact, segments []uuid.UUID, topics []TopicChoice,
	emit ...string) (Contact, error) {
	if c.Properties == nil {
		c.Properties = map[string]any{}
	}
	var out Contact
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO contact (id, team_id, email, first_name, last_name, unsubscribed, properties)
			VALUES (@id, @team, @email, @first, @last, @unsub, @props)`,
			pgx.NamedArgs{"id": c.ID, "team": c.TeamID, "email": NormalizeAddress(c.Email), "first": c.FirstName,
				"last": c.LastName, "unsub": c.Unsubscribed, "props": c.Properties}); err != nil {
			return mapErr(err)
		}
		if err := addSegments(ctx, tx, c.TeamID, c.ID, segments); err != nil {
			return err
		}
		if err := setTopics(ctx, tx, c.TeamID, c.ID, topics); err != nil {
			return err
		}
		var err error
		out, err = scanContact(tx.QueryRow(ctx, `SELECT `+contactColumns+` FROM contact WHERE id = @id`,
			pgx.NamedArgs{"id": c.ID}))
		if err != nil {
			return err
		}
		return emitContactEvents(ctx, tx, out, topics, emit)
	})
	if err != nil {
		return Contact{}, fmt.Errorf("creating contact: %w", err)
	}
	return out, nil
}

// addSegments makes the contact a member of segments (the team's only).
func addSegments(ctx context.Context, tx pgx.Tx, teamID, contactID uuid.UUID, segments []uuid.UUID) error {
	if len(segments) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT want FROM unnest(@ids::uuid[]) AS want
		WHERE NOT EXISTS (SELECT 1 FROM segment WHERE team_id = @team AND id = want)`,
		pgx.NamedArgs{"team": teamID, "ids": segments})
	if err != nil {
		return mapErr(err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return mapErr(err)
	}
	if len(missing) > 0 {
		return &RefError{What: "segment", ID: missing[0]}
	}
	_, err = tx.Exec(ctx, `INSERT INTO contact_segment (team_id, contact_id, segment_id)
		SELECT DISTINCT @team::uuid, @contact::uuid, want FROM unnest(@ids::uuid[]) AS want
		ON CONFLICT DO NOTHING`, pgx.NamedArgs{"team": teamID, "contact": contactID, "ids": segments})
	return mapErr(err)
}

// setTopics records the contact's topic choices (the team's topics only);
// a later choice for the same topic wins.
func setTopics(ctx context.Context, tx pgx.Tx, teamID, contactID uuid.UUID, topics []TopicChoice) error {
	if len(topics) == 0 {
		return nil
	}
	last := map[uuid.UUID]string{}
	var ids []uuid.UUID
	for _, t := range topics {
		if _, seen := last[t.TopicID]; !seen {
			ids = append(ids, t.TopicID)
		}
		last[t.TopicID] = t.Subscription
	}
	subs := make([]string, len(ids))
	for i, id := range ids {
		subs[i] = last[id]
	}
	rows, err := tx.Query(ctx, `SELECT want FROM unnest(@ids::uuid[]) AS want
		WHERE NOT EXISTS (SELECT 1 FROM topic WHERE team_id = @team AND id = want)`,
		pgx.NamedArgs{"team": teamID, "ids": ids})
	if err != nil {
		return mapErr(err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return mapErr(err)
	}
	if len(missing) > 0 {
		return &RefError{What: "topic", ID: missing[0]}
	}
	_, err = tx.Exec(ctx, `INSERT INTO contact_topic (team_id, contact_id, topic_id, subscription)
		SELECT @team::uuid, @contact::uuid, t.id, t.sub FROM unnest(@ids::uuid[], @subs::text[]) AS t(id, sub)
		ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscription = excluded.subscription, updated_at = now()`,
		pgx.NamedArgs{"team": teamID, "contact": contactID, "ids": ids, "subs": subs})
	return mapErr(err)
}

// Contact finds one of the team's contacts.
func (s *Audience) Contact(ctx context.Context, teamID uuid.UUID, ref ContactRef) (Contact, error) {
	return scanContact(s.pool.QueryRow(ctx, `SELECT `+contactColumns+` FROM contact WHERE `+refWhere,
		refArgs(teamID, ref)))
}

// ContactUpdate holds what PATCH may change; nil fields stay. SetProperties
// are merged into the contact's properties, then RemoveProperties removed.
type ContactUpdate struct {
	Email            *string
	FirstName        *string
	LastName         *string
	Unsubscribed     *bool
	SetProperties    map[string]any
	RemoveProperties []string
	// Topics are topic choices recorded with the change (as
	// UpdateContactTopics does).
	Topics []TopicChoice
}

// UpdateContact changes one of the team's contacts and returns it; its
// transaction also writes the webhook events of emit about the contact as
// changed (see emitContactEvents, whose topics are u.Topics). ErrNotFound
// when there is none; ErrConflict when the new address is another
// contact's; a *RefError when a topic is not the team's.
func (s *Audience) UpdateContact(ctx context.Context, teamID uuid.UUID, ref ContactRef, u ContactUpdate,
	emit ...string) (Contact, error) {
	args := refArgs(teamID, ref)
	var email *string
	if u.Email != nil {
		e := NormalizeAddress(*u.Email)
		email = &e
	}
	set := u.SetProperties
	if set == nil {
		set = map[string]any{}
	}
	remove := u.RemoveProperties
	if remove == nil {
		remove = []string{}
	}
	args["new_email"], args["first"], args["last"], args["unsub"] = email, u.FirstName, u.LastName, u.Unsubscribed
	args["set"], args["remove"] = set, remove
	var c Contact
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = scanContact(tx.QueryRow(ctx, `UPDATE contact SET
			email = coalesce(@new_email, email),
			first_name = coalesce(@first, first_name),
			last_name = coalesce(@last, last_name),
			unsubscribed = coalesce(@unsub, unsubscribed),
			properties = (properties || @set::jsonb) - @remove::text[],
			updated_at = now()
		WHERE `+refWhere+` RETURNING `+contactColumns, args))
		if err != nil {
			return err
		}
		if err := setTopics(ctx, tx, teamID, c.ID, u.Topics); err != nil {
			return err
		}
		return emitContactEvents(ctx, tx, c, u.Topics, emit)
	})
	if err != nil {
		return Contact{}, fmt.Errorf("updating contact: %w", err)
	}
	return c, nil
}

// DeleteContact removes one of the team's contacts and returns it as it
// was; its transaction also writes the webhook events of emit about it.
// ErrNotFound when there is none.
func (s *Audience) DeleteContact(ctx context.Context, teamID uuid.UUID, ref ContactRef, emit ...string) (Contact, error) {
	var c Contact
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = scanContact(tx.QueryRow(ctx, `DELETE FROM contact WHERE `+refWhere+` RETURNING `+contactColumns,
			refArgs(teamID, ref)))
		if err != nil {
			return err
		}
		return emitContactEvents(ctx, tx, c, nil, emit)
	})
	if err != nil {
		return Contact{}, fmt.Errorf("deleting contact: %w", err)
	}
	return c, nil
}

// ContactFilter narrows a list of contacts; zero values select all.
type ContactFilter struct {
	// Search matches contacts whose address, first or last name contains
	// it, case-insensitively.
	Search    string
	SegmentID *uuid.UUID
}

// likePattern is a LIKE pattern matching s anywhere, with LIKE's special
// characters taken literally (PostgreSQL's default escape is \).
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// ListContacts lists the team's contacts, newest first.
func (s *Audience) ListContacts(ctx context.Context, teamID uuid.UUID, f ContactFilter, p Page) ([]Contact, bool, error) {
	q := `SELECT ` + contactColumns + ` FROM contact WHERE team_id = @team`
	args := pgx.NamedArgs{"team": teamID}
	if f.Search != "" {
		q += ` AND (email ILIKE @q OR first_name ILIKE @q OR last_name ILIKE @q)`
		args["q"] = likePattern(f.Search)
	}
	if f.SegmentID != nil {
		q += ` AND id IN (SELECT contact_id FROM contact_segment WHERE team_id = @team AND segment_id = @segment)`
		args["segment"] = *f.SegmentID
	}
	return listPage(ctx, s.Store, p, q, args, scanContact)
}

// ContactSegment is a segment a contact belongs to.
type ContactSegment struct {
	ID      uuid.UUID // the segment's
	Name    string
	AddedAt time.Time
}

// ContactSegments lists the segments of one of the team's contacts.
func (s *Audience) ContactSegments(ctx context.Context, teamID, contactID uuid.UUID, p Page) ([]ContactSegment, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT id, name, added_at FROM (SELECT s.id, s.name, cs.created_at AS added_at
			FROM contact_segment cs JOIN segment s ON s.id = cs.segment_id
			WHERE cs.team_id = @team AND cs.contact_id = @contact) m WHERE true`,
		pgx.NamedArgs{"team": teamID, "contact": contactID}, func(row pgx.Row) (ContactSegment, error) {
			var cs ContactSegment
			err := row.Scan(&cs.ID, &cs.Name, &cs.AddedAt)
			return cs, mapErr(err)
		})
}

// AddContactToSegment makes one of the team's contacts a member of one of
// its segments; adding twice is not an error. Its transaction also writes
// the webhook events of emit about the contact. A *RefError when the
// segment is not the team's.
func (s *Audience) AddContactToSegment(ctx context.Context, teamID, contactID, segmentID uuid.UUID, emit ...string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := addSegments(ctx, tx, teamID, contactID, []uuid.UUID{segmentID}); err != nil {
			return err
		}
		return emitAboutContact(ctx, tx, teamID, contactID, nil, emit)
	})
	if err != nil {
		return fmt.Errorf("adding contact to segment: %w", err)
	}
	return nil
}

// RemoveContactFromSegment ends a membership; its transaction also writes
// the webhook events of emit about the contact. ErrNotFound when there
// was none.
func (s *Audience) RemoveContactFromSegment(ctx context.Context, teamID, contactID, segmentID uuid.UUID, emit ...string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM contact_segment
			WHERE team_id = @team AND contact_id = @contact AND segment_id = @segment`,
			pgx.NamedArgs{"team": teamID, "contact": contactID, "segment": segmentID})
		if err != nil {
			return mapErr(err)
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return emitAboutContact(ctx, tx, teamID, contactID, nil, emit)
	})
	if errors.Is(err, ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("removing contact from segment: %w", err)
	}
	return nil
}

// emitAboutContact writes the events of types about the contact as tx
// sees it (see emitContactEvents); none when types is empty.
func emitAboutContact(ctx context.Context, tx pgx.Tx, teamID, contactID uuid.UUID, topics []TopicChoice, types []string) error {
	if len(types) == 0 {
		return nil
	}
	c, err := scanContact(tx.QueryRow(ctx, `SELECT `+contactColumns+` FROM contact WHERE team_id = @team AND id = @id`,
		pgx.NamedArgs{"team": teamID, "id": contactID}))
	if err != nil {
		return err
	}
	return emitContactEvents(ctx, tx, c, topics, types)
}

// ContactTopic is a topic with a contact's effective subscription to it:
// the contact's choice, or the topic's default without one.
type ContactTopic struct {
	Topic
	Subscription string
}

// ContactTopics lists the team's topics with the contact's subscription
// to each.
func (s *Audience) ContactTopics(ctx context.Context, teamID, contactID uuid.UUID, p Page) ([]ContactTopic, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+topicColumns+`, coalesce((SELECT ct.subscription FROM contact_topic ct
			WHERE ct.contact_id = @contact AND ct.topic_id = topic.id), default_subscription)
		FROM topic WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID, "contact": contactID}, func(row pgx.Row) (ContactTopic, error) {
			var ct ContactTopic
			err := row.Scan(&ct.ID, &ct.TeamID, &ct.Name, &ct.Description, &ct.DefaultSubscription, &ct.Visibility,
				&ct.CreatedAt, &ct.UpdatedAt, &ct.Subscription)
			return ct, mapErr(err)
		})
}

// UpdateContactTopics records a contact's topic choices in one
// transaction, which also writes the webhook events of emit about the
// contact as it was before (see emitContactEvents). A *RefError when a
// topic is not the team's.
func (s *Audience) UpdateContactTopics(ctx context.Context, teamID, contactID uuid.UUID, topics []TopicChoice,
	emit ...string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := emitAboutContact(ctx, tx, teamID, contactID, topics, emit); err != nil {
			return err
		}
		if err := setTopics(ctx, tx, teamID, contactID, topics); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE contact SET updated_at = now() WHERE team_id = @team AND id = @id`,
			pgx.NamedArgs{"team": teamID, "id": contactID})
		return mapErr(err)
	})
	if err != nil {
		return fmt.Errorf("updating contact topics: %w", err)
	}
	return nil
}

// TopicBlocked returns, of the addresses, those that must not receive mail
// sent with the team's topic, keyed by normalised address: contacts that
// unsubscribed from everything, contacts whose subscription (their choice,
// or the topic's default) is opt_out, and, when the topic's default is
// opt_out, addresses that are not contacts (they never opted in).
// ErrNotFound when the topic is not the team's.
func (s *Audience) TopicBlocked(ctx context.Context, teamID, topicID uuid.UUID, emails []string) (map[string]bool, error) {
	norm := make([]string, len(emails))
	for i, e := range emails {
		norm[i] = NormalizeAddress(e)
	}
	var def string
	err := s.pool.QueryRow(ctx, `SELECT default_subscription FROM topic WHERE team_id = @team AND id = @id`,
		pgx.NamedArgs{"team": teamID, "id": topicID}).Scan(&def)
	if err != nil {
		return nil, fmt.Errorf("loading topic %s: %w", topicID, mapErr(err))
	}
	rows, err := s.pool.Query(ctx, `SELECT addr FROM unnest(@emails::text[]) AS addr
		LEFT JOIN contact c ON c.team_id = @team AND c.email = addr
		LEFT JOIN contact_topic ct ON ct.contact_id = c.id AND ct.topic_id = @topic
		WHERE coalesce(c.unsubscribed, false) OR coalesce(ct.subscription, @default) = 'opt_out'`,
		pgx.NamedArgs{"team": teamID, "topic": topicID, "emails": norm, "default": def})
	if err != nil {
		return nil, fmt.Errorf("checking topic subscriptions: %w", mapErr(err))
	}
	blocked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("checking topic subscriptions: %w", mapErr(err))
	}
	out := make(map[string]bool, len(blocked))
	for _, b := range blocked {
		out[b] = true
	}
	return out, nil
}

// ContactPayload is the data of contact.* webhook events.
func ContactPayload(c Contact) map[string]any {
	segs := make([]string, len(c.SegmentIDs))
	for i, id := range c.SegmentIDs {
		segs[i] = id.String()
	}
	return map[string]any{"id": c.ID.String(), "email": c.Email, "first_name": c.FirstName, "last_name": c.LastName,
		"unsubscribed": c.Unsubscribed, "segment_ids": segs, "created_at": c.CreatedAt.UTC().Format(webhookTime),
		"updated_at": c.UpdatedAt.UTC().Format(webhookTime)}
}
