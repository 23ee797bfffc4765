package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Delivery defaults of the DeliverWebhook workflow's activity.
const (
	// DefaultDisableAfter is how long an endpoint may fail continuously
	// before it is disabled.
	DefaultDisableAfter = 5 * 24 * time.Hour
	// webhookBatch bounds the messages one pass reads, and webhookGroups
	// the order keys (emails, domains) they belong to.
	webhookBatch  = 500
	webhookGroups = 200
	// webhookConcurrency bounds the POSTs in flight per endpoint (one per
	// order key at a time).
	webhookConcurrency = 16
	// webhookPassBudget stops a pass from starting new attempts, so the
	// activity ends well within its timeout.
	webhookPassBudget = 30 * time.Second
)

// errNoKey marks signing keys that cannot be opened; its text is the one
// the activity has always reported.
var errNoKey = errors.New("DKIM key unavailable")

// Notice tells a team's owners that an endpoint was disabled.
type Notice struct {
	TeamID    uuid.UUID
	WebhookID uuid.UUID
	Endpoint  string
	Reason    string
}

// Noticer tells a team's owners that one of their endpoints was disabled.
type Noticer interface {
	WebhookDisabled(ctx context.Context, n Notice) error
}

// Activities is the activity of the DeliverWebhook workflow: delivery
// passes over an endpoint's messages. The worker registers it under its
// name in workflows/contract.
type Activities struct {
	webhooks     *store.Webhooks
	client       *Client // nil in a process that delivers no webhooks
	keys         *seal.Box
	schedule     []time.Duration
	disableAfter time.Duration
	notices      Noticer
	metrics      *telemetry.Metrics
	logger       *slog.Logger
	now          func() time.Time
}

// ActivitiesConfig configures webhook delivery.
type ActivitiesConfig struct {
	// Client posts messages; nil in a process that delivers no webhooks.
	Client *Client
	// Keys opens the endpoints' signing secrets; nil in a process without
	// a master key, which then cannot deliver webhooks.
	Keys *seal.Box
	// Schedule is the delay before each retry; nil → DefaultSchedule.
	Schedule []time.Duration
	// DisableAfter disables an endpoint failing continuously this long;
	// 0 → DefaultDisableAfter.
	DisableAfter time.Duration
	// Notices tells owners about disabled endpoints; nil → logged only.
	Notices Noticer
	// Metrics counts attempts; may be nil.
	Metrics *telemetry.Metrics
	// Logger may be nil.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests pass a settable clock.
	Now func() time.Time
}

// NewActivities returns the activity of DeliverWebhook over st.
func NewActivities(cfg ActivitiesConfig, st *store.Webhooks) *Activities {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	schedule := cfg.Schedule
	if schedule == nil {
		schedule = DefaultSchedule
	}
	disableAfter := cfg.DisableAfter
	if disableAfter <= 0 {
		disableAfter = DefaultDisableAfter
	}
	return &Activities{webhooks: st, client: cfg.Client, keys: cfg.Keys, schedule: schedule,
		disableAfter: disableAfter, notices: cfg.Notices, metrics: cfg.Metrics,
		logger: logger.With("component", "activities"), now: now}
}

// DeliverWebhooks makes one delivery pass over an endpoint's undelivered
// messages: every message whose turn has come is posted, signed anew, and
// each attempt is stored with its outcome. Messages with the same order key
// (the email or domain they are about) go one at a time in the order they
// were recorded, and a failed one holds back those after it until it is
// delivered or fails for good; different keys go in parallel. A failed
// attempt schedules the next one (Schedule with jitter, or Retry-After on
// 429/503) or fails the message when no retry is left; 410 disables the
// endpoint, and so does failing continuously for DisableAfter.
func (a *Activities) DeliverWebhooks(ctx context.Context, in contract.DeliverWebhooksInput) (contract.DeliverWebhooksResult, error) {
	id, err := uuid.Parse(in.WebhookID)
	if err != nil {
		return contract.DeliverWebhooksResult{}, temporal.NewNonRetryableApplicationError("bad webhook id", contract.ErrTypePermanent, err)
	}
	if a.client == nil {
		return contract.DeliverWebhooksResult{}, errors.New("this process does not deliver webhooks")
	}
	w, err := a.webhooks.WebhookByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && w.Status != store.WebhookEnabled) {
		return contract.DeliverWebhooksResult{Stop: true}, nil
	}
	if err != nil {
		return contract.DeliverWebhooksResult{}, fmt.Errorf("loading webhook %s: %w", id, err)
	}
	keys, err := a.webhookKeys(w)
	if err != nil {
		return contract.DeliverWebhooksResult{}, err
	}
	start := a.now()
	msgs, err := a.webhooks.DueMessages(ctx, id, start, webhookGroups, webhookBatch)
	if err != nil {
		return contract.DeliverWebhooksResult{}, err
	}

	// Group by order key, keeping the order of first appearance.
	var order []string
	groups := map[string][]store.WebhookMessage{}
	for _, m := range msgs {
		if _, ok := groups[m.OrderKey]; !ok {
			order = append(order, m.OrderKey)
		}
		groups[m.OrderKey] = append(groups[m.OrderKey], m)
	}
	var (
		attempted atomic.Int32
		wg        sync.WaitGroup
		sem       = make(chan struct{}, webhookConcurrency)
		stopped   atomic.Bool
		errMu     sync.Mutex
		firstErr  error
	)
	for _, key := range order {
		g := groups[key]
		if at := g[0].NextAttemptAt; at != nil && at.After(start) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, m := range g {
				if stopped.Load() || ctx.Err() != nil || a.now().Sub(start) > webhookPassBudget {
					return
				}
				if at := m.NextAttemptAt; at != nil && at.After(a.now()) {
					return
				}
				attempted.Add(1)
				ok, disabled, err := a.attemptWebhook(ctx, w, keys, m)
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					stopped.Store(true)
					return
				}
				if disabled {
					stopped.Store(true)
				}
				if !ok {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return contract.DeliverWebhooksResult{}, firstErr
	}
	if stopped.Load() {
		if w, err := a.webhooks.WebhookByID(ctx, id); err != nil || w.Status != store.WebhookEnabled {
			return contract.DeliverWebhooksResult{Stop: true}, nil
		}
	}
	next, err := a.webhooks.NextWebhookAttempt(ctx, id)
	if err != nil {
		return contract.DeliverWebhooksResult{}, err
	}
	// Another pass at once only when this one got something done: what is
	// due now but was not attempted (the batch or the time budget ran out)
	// or became due meanwhile.
	more := attempted.Load() > 0 && next != nil && !next.After(a.now())
	if !more && next != nil && !next.After(a.now()) {
		// Due yet not attempted (should not happen): look again in a
		// second rather than at once, so the workflow cannot spin.
		later := a.now().Add(time.Second)
		next = &later
	}
	return contract.DeliverWebhooksResult{More: more, NextAt: next}, nil
}

// webhookKeys opens the endpoint's signing keys: the current one, and the
// previous one while it still signs after a rotation. Keys that cannot be
// opened are a permanent error.
func (a *Activities) webhookKeys(w store.Webhook) ([][]byte, error) {
	keys, err := Keys(a.keys, w, a.now())
	if err != nil {
		return nil, contract.Permanent(fmt.Errorf("%w: %w", errNoKey, err))
	}
	return keys, nil
}

// attemptWebhook posts one message and stores the outcome. It reports
// whether the message was delivered and whether the endpoint was disabled.
func (a *Activities) attemptWebhook(ctx context.Context, w store.Webhook, keys [][]byte, m store.WebhookMessage) (ok, disabled bool, err error) {
	at := a.client.Post(ctx, w.Endpoint, MessageID(m.ID), m.Payload, keys)
	n := m.Attempts + 1
	o := store.AttemptOutcome{WebhookID: w.ID, TeamID: w.TeamID, Succeeded: at.OK()}
	o.Attempt, err = AttemptRow(m.ID, at)
	if err != nil {
		return false, false, err
	}
	switch {
	case at.OK():
		o.Status = store.MessageSuccess
	case at.Gone():
		o.Status = store.MessageFailed
	default:
		if d, retry := NextAttempt(a.schedule, n, at, Jitter()); retry {
			next := at.At.Add(at.Duration + d)
			o.Status, o.NextAt = store.MessageAttempting, &next
		} else {
			o.Status = store.MessageFailed
		}
	}
	since, err := a.webhooks.RecordWebhookAttempt(ctx, o)
	if err != nil {
		return false, false, err
	}
	if a.metrics != nil {
		a.metrics.WebhookAttempts.WithLabelValues(at.Outcome()).Inc()
	}
	log := a.logger.With("team_id", w.TeamID, "webhook_id", w.ID, "message_id", m.ID, "type", m.Type,
		"attempt", n, "status", at.Status, "duration", at.Duration)
	if at.OK() {
		log.Debug("webhook delivered")
		return true, false, nil
	}
	log.Info("webhook attempt failed", "err", at.Err, "message_status", o.Status)
	reason := ""
	switch {
	case at.Gone():
		reason = "The endpoint answered 410 Gone."
	case since != nil && a.now().Sub(*since) >= a.disableAfter:
		reason = fmt.Sprintf("Every delivery has failed since %s.", since.UTC().Format(time.RFC3339))
	default:
		return false, false, nil
	}
	return false, true, a.disableWebhook(ctx, w, reason)
}

// disableWebhook disables the endpoint and, once, tells the team's owners.
func (a *Activities) disableWebhook(ctx context.Context, w store.Webhook, reason string) error {
	changed, err := a.webhooks.DisableWebhook(ctx, w.ID, reason)
	if err != nil || !changed {
		return err
	}
	a.logger.Warn("webhook disabled", "team_id", w.TeamID, "webhook_id", w.ID, "reason", reason)
	if a.notices == nil {
		return nil
	}
	if err := a.notices.WebhookDisabled(ctx, Notice{TeamID: w.TeamID, WebhookID: w.ID,
		Endpoint: w.Endpoint, Reason: reason}); err != nil {
		// The endpoint stays disabled; the notice is best effort.
		a.logger.Warn("telling owners about a disabled webhook", "team_id", w.TeamID, "webhook_id", w.ID, "err", err)
	}
	return nil
}
