package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// RotationOverlap is how long the previous secret keeps signing after a
// rotation (API.md).
const RotationOverlap = 24 * time.Hour

// ErrDisabled refuses to replay an event of a disabled endpoint.
var ErrDisabled = errors.New("the webhook is disabled")

// ErrNoMasterKey refuses to create endpoints and to open or rotate their
// secrets on a server without a master key.
var ErrNoMasterKey = errors.New("webhook secrets need the master key (POSTHASTE_MASTER_KEY)")

// Waker wakes the delivery of an endpoint (its DeliverWebhook workflow).
type Waker interface {
	Wake(ctx context.Context, webhookID string) error
}

// EndpointsConfig is what Endpoints needs besides the store.
type EndpointsConfig struct {
	// Keys seals and opens signing secrets; nil makes Create, Secret and
	// Rotate fail with ErrNoMasterKey.
	Keys *seal.Box
	// Client posts test events; nil makes Test fail.
	Client *Client
	// Waker wakes an endpoint's delivery after a change; may be nil.
	Waker Waker
	// AllowHTTP accepts plain http endpoints (POSTHASTE_ALLOW_PRIVATE_EGRESS).
	AllowHTTP bool
	// Now stamps rotations; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Endpoints is the one "manage webhook endpoints" use case shared by the
// HTTP API and the dashboard: listing, creating, changing and deleting a
// team's endpoints, showing and rotating their signing secrets, sending
// them a test event, and listing their events and attempts and replaying
// an event. Every method that takes a team answers store.ErrNotFound for
// another team's endpoint. The methods that change an endpoint take the
// actor (an audit entry with the actor and its client filled in); the
// store writes the change's audit entry in the change's transaction, so
// the change and its entry are made or fail together.
type Endpoints struct {
	cfg    EndpointsConfig
	store  *store.Store
	logger *slog.Logger
}

// NewEndpoints returns Endpoints on st.
func NewEndpoints(cfg EndpointsConfig, st *store.Store) *Endpoints {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Endpoints{cfg: cfg, store: st, logger: cfg.Logger.With("component", "webhooks")}
}

// AllowHTTP reports whether plain http endpoints are accepted.
func (e *Endpoints) AllowHTTP() bool { return e.cfg.AllowHTTP }

// CanTest reports whether Test can send events (a client is configured).
func (e *Endpoints) CanTest() bool { return e.cfg.Client != nil }

// List returns a page of the team's endpoints, newest first.
func (e *Endpoints) List(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.Webhook, bool, error) {
	return e.store.Webhooks.ListWebhooks(ctx, teamID, p)
}

// Get returns the team's endpoint id.
func (e *Endpoints) Get(ctx context.Context, teamID, id uuid.UUID) (store.Webhook, error) {
	return e.store.Webhooks.GetWebhook(ctx, teamID, id)
}

// ParseEndpoint checks an endpoint URL: absolute https (http too where
// private targets are allowed) with a host. Where it points is checked by
// the egress guard at every attempt, since DNS answers change.
func (e *Endpoints) ParseEndpoint(v string) (string, error) {
	v = strings.TrimSpace(v)
	u, err := url.Parse(v)
	scheme := "https"
	if e.cfg.AllowHTTP {
		scheme = "https or http"
	}
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && e.cfg.AllowHTTP)) {
		return "", invalid.Errorf("endpoint", "The `endpoint` field must be an absolute %s URL.", scheme)
	}
	return u.String(), nil
}

// ParseTypes checks the event types of a subscription: at least one, each
// one of Types; duplicates are dropped.
func ParseTypes(v []string) ([]string, error) {
	if len(v) == 0 {
		return nil, invalid.Errorf("events", "The `events` field must list at least one event type.")
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range v {
		if !ValidType(t) {
			return nil, invalid.Errorf("events", "The `events` field holds an unknown event type %q; known types are %s.",
				t, strings.Join(Types, ", "))
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// Create checks and adds an enabled endpoint to the team for actor
// (audit.WebhookCreate). It returns the endpoint and its signing secret
// (whsec_…).
func (e *Endpoints) Create(ctx context.Context, teamID uuid.UUID, endpoint string, events []string, actor audit.Entry) (store.Webhook, string, error) {
	endpoint, err := e.ParseEndpoint(endpoint)
	if err != nil {
		return store.Webhook{}, "", err
	}
	if events, err = ParseTypes(events); err != nil {
		return store.Webhook{}, "", err
	}
	if e.cfg.Keys == nil {
		return store.Webhook{}, "", ErrNoMasterKey
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Webhook{}, "", err
	}
	key := NewSecret()
	sealed, err := e.cfg.Keys.Seal(key, id[:])
	if err != nil {
		return store.Webhook{}, "", fmt.Errorf("sealing the secret of webhook %s: %w", id, err)
	}
	w := store.Webhook{ID: id, TeamID: teamID, Endpoint: endpoint, Events: events,
		Status: store.WebhookEnabled, Secret: sealed}
	by, err := succeeded(actor, teamID, audit.WebhookCreate, id, nil)
	if err != nil {
		return store.Webhook{}, "", err
	}
	if err := e.store.Webhooks.CreateWebhookBy(ctx, w, by); err != nil {
		return store.Webhook{}, "", err
	}
	return w, FormatSecret(key), nil
}

// Change is what Update changes; nil fields stay.
type Change struct {
	Endpoint *string
	Events   *[]string
	Status   *string // enabled or disabled
}

// Update checks and applies a change to a team's endpoint for actor
// (audit.WebhookUpdate). Enabling it starts its delivery anew; disabling
// ends it at its next pass.
func (e *Endpoints) Update(ctx context.Context, teamID, id uuid.UUID, c Change, actor audit.Entry) error {
	return e.update(ctx, teamID, id, c, actor, nil)
}

// SetStatus enables or disables a team's endpoint, like Update with only
// Status, recording the status in the audit entry's detail (the
// dashboard's enable and disable buttons).
func (e *Endpoints) SetStatus(ctx context.Context, teamID, id uuid.UUID, status string, actor audit.Entry) error {
	return e.update(ctx, teamID, id, Change{Status: &status}, actor, map[string]any{"status": status})
}

func (e *Endpoints) update(ctx context.Context, teamID, id uuid.UUID, c Change, actor audit.Entry, detail map[string]any) error {
	var u store.WebhookUpdate
	if c.Endpoint != nil {
		v, err := e.ParseEndpoint(*c.Endpoint)
		if err != nil {
			return err
		}
		u.Endpoint = &v
	}
	if c.Events != nil {
		var err error
		if u.Events, err = ParseTypes(*c.Events); err != nil {
			return err
		}
	}
	if c.Status != nil {
		if *c.Status != store.WebhookEnabled && *c.Status != store.WebhookDisabled {
			return invalid.Errorf("status", "The `status` field must be enabled or disabled.")
		}
		u.Status = c.Status
	}
	by, err := succeeded(actor, teamID, audit.WebhookUpdate, id, detail)
	if err != nil {
		return err
	}
	if err := e.store.Webhooks.UpdateWebhook(ctx, teamID, id, u, by); err != nil {
		return err
	}
	if u.Status != nil {
		e.wake(ctx, id)
	}
	return nil
}

// Delete deletes a team's endpoint with its events and attempts, for actor
// (audit.WebhookDelete).
func (e *Endpoints) Delete(ctx context.Context, teamID, id uuid.UUID, actor audit.Entry) error {
	by, err := succeeded(actor, teamID, audit.WebhookDelete, id, nil)
	if err != nil {
		return err
	}
	if err := e.store.Webhooks.DeleteWebhook(ctx, teamID, id, by); err != nil {
		return err
	}
	e.wake(ctx, id) // its delivery ends when it finds the endpoint gone
	return nil
}

// wake nudges an endpoint's delivery; a failure is logged, since the
// delivery also wakes on the endpoint's next event.
func (e *Endpoints) wake(ctx context.Context, id uuid.UUID) {
	if e.cfg.Waker == nil {
		return
	}
	if err := e.cfg.Waker.Wake(ctx, id.String()); err != nil {
		e.logger.Warn("waking webhook delivery", "webhook_id", id, "err", err)
	}
}

// Secret returns the current signing secret of w (whsec_…).
func (e *Endpoints) Secret(w store.Webhook) (string, error) {
	if e.cfg.Keys == nil {
		return "", ErrNoMasterKey
	}
	keys, err := Keys(e.cfg.Keys, w, e.cfg.Now())
	if err != nil {
		return "", err
	}
	return FormatSecret(keys[0]), nil
}

// Rotate gives w a new signing secret and returns it; the old one keeps
// signing for RotationOverlap, so receivers can switch without losing
// events. actor is recorded as audit.WebhookRotateSecret.
func (e *Endpoints) Rotate(ctx context.Context, w store.Webhook, actor audit.Entry) (string, error) {
	if e.cfg.Keys == nil {
		return "", ErrNoMasterKey
	}
	key := NewSecret()
	sealed, err := e.cfg.Keys.Seal(key, w.ID[:])
	if err != nil {
		return "", fmt.Errorf("sealing the secret of webhook %s: %w", w.ID, err)
	}
	by, err := succeeded(actor, w.TeamID, audit.WebhookRotateSecret, w.ID, nil)
	if err != nil {
		return "", err
	}
	if err := e.store.Webhooks.RotateWebhookSecret(ctx, w.TeamID, w.ID, sealed, e.cfg.Now().Add(RotationOverlap), by); err != nil {
		return "", err
	}
	return FormatSecret(key), nil
}

// Test sends w a sample event of type typ (email.sent when ""), now and
// once, signed like any event, and records it with its attempt so it
// shows among the endpoint's events. An unknown type is an *invalid.Error.
func (e *Endpoints) Test(ctx context.Context, w store.Webhook, typ string) (store.WebhookAttempt, error) {
	if typ == "" {
		typ = "email.sent"
	}
	if !ValidType(typ) {
		return store.WebhookAttempt{}, invalid.Errorf("type", "The `type` field must be one of %s.", strings.Join(Types, ", "))
	}
	if e.cfg.Client == nil {
		return store.WebhookAttempt{}, errors.New("test events need a webhook client")
	}
	keys, err := Keys(e.cfg.Keys, w, e.cfg.Now())
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	mid, err := uuid.NewV7()
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	body, err := json.Marshal(Sample(typ, e.cfg.Now()))
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	m := store.WebhookMessage{ID: mid, TeamID: w.TeamID, WebhookID: w.ID, Type: typ, OrderKey: mid.String(),
		Payload: body, Status: store.MessageAttempting}
	if err := e.store.Webhooks.InsertWebhookMessage(ctx, m); err != nil {
		return store.WebhookAttempt{}, err
	}
	at := e.cfg.Client.Post(ctx, w.Endpoint, MessageID(mid), body, keys)
	row, err := AttemptRow(mid, at)
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	status := store.MessageFailed
	if at.OK() {
		status = store.MessageSuccess
	}
	if _, err := e.store.Webhooks.RecordWebhookAttempt(ctx, store.AttemptOutcome{Attempt: row, WebhookID: w.ID,
		TeamID: w.TeamID, Status: status, Succeeded: at.OK()}); err != nil {
		return store.WebhookAttempt{}, err
	}
	return row, nil
}

// succeeded is the audit entry of a successful action by actor on the
// team's endpoint id, which the store appends with the change.
func succeeded(actor audit.Entry, teamID uuid.UUID, action audit.Action, id uuid.UUID, detail map[string]any) (audit.Entry, error) {
	actor.TeamID = &teamID
	return audit.Succeeded(actor, action, "webhook", id.String(), detail)
}
