package receiving

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
)

// Notifier is told when outbox entries were committed (the outbox
// dispatcher of this process, if any).
type Notifier interface{ Notify() }

// ActivitiesConfig wires the activity of ProcessInbound.
type ActivitiesConfig struct {
	// VERPKey verifies the signed return paths reports come to
	// (reports.VERPKeyPurpose, derived from the master key, as sending
	// signs them); nil in a process without a master key, which then
	// matches reports only to the unsigned return paths of old emails.
	VERPKey []byte
	// UnsubscribeMailtoKey verifies the mailto unsubscribe addresses of
	// emails sent with a topic (mailto.KeyPurpose); nil in a process
	// without a master key, which then unsubscribes nobody by mail.
	UnsubscribeMailtoKey []byte
	// FBLDomains are the sender domains of the feedback loops whose
	// complaints (ARF) are acted on (POSTHASTE_FBL_DOMAINS), when
	// authenticated by the domain (fromFeedbackLoop); any other
	// complaint is kept as received mail and acts on nobody. Empty: none
	// is acted on.
	FBLDomains []string
	// Outbox is told when recorded events and received emails may have
	// queued webhook messages (the outbox dispatcher of this process);
	// may be nil.
	Outbox Notifier
	// Metrics counts the email events recorded; may be nil.
	Metrics *telemetry.Metrics
	// Logger may be nil.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Activities is the activity of the ProcessInbound workflow: acting on a
// message the inbound MX accepted (reports about our emails, mailto
// unsubscriptions, received mail). The worker registers it under its
// name in workflows/contract.
type Activities struct {
	emails               *store.Emails // the emails reports are about, their events and suppressions
	audience             *store.Audience
	received             *store.Received
	outbox               Notifier
	metrics              *telemetry.Metrics
	logger               *slog.Logger
	now                  func() time.Time
	verpKey              []byte
	unsubscribeMailtoKey []byte
	fblDomains           []string
}

// NewActivities returns the activity of ProcessInbound over st's emails,
// audience and received mail.
func NewActivities(cfg ActivitiesConfig, st *store.Store) *Activities {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Activities{emails: st.Emails, audience: st.Audience, received: st.Received, outbox: cfg.Outbox,
		metrics: cfg.Metrics, logger: logger.With("component", "activities"), now: now, verpKey: cfg.VERPKey,
		unsubscribeMailtoKey: cfg.UnsubscribeMailtoKey, fblDomains: cfg.FBLDomains}
}

// record stores events of an email and counts them, as the delivery
// activities record theirs.
func (a *Activities) record(ctx context.Context, id uuid.UUID, evs []store.Event) error {
	if err := a.emails.RecordEvents(ctx, id, evs); err != nil {
		return err
	}
	if a.outbox != nil {
		// The events may have queued webhook messages.
		a.outbox.Notify()
	}
	if a.metrics != nil {
		for _, e := range evs {
			a.metrics.EmailEvents.WithLabelValues(e.Type).Inc()
		}
	}
	return nil
}

// suppress puts addresses whose bounce said the address itself is bad on
// the team's suppression list, so later sends to them are not attempted.
// Sandbox addresses never enter the list.
func (a *Activities) suppress(ctx context.Context, e store.Email, addrs []string) error {
	for _, addr := range addrs {
		if _, ok := sandbox.Outcome(addr); ok {
			continue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		emailID := e.ID
		if _, _, err := a.emails.AddSuppression(ctx, store.Suppression{ID: id, TeamID: e.TeamID, Email: addr,
			Reason: store.SuppressionBounce, EmailID: &emailID}); err != nil {
			return fmt.Errorf("suppressing a bounced address of %s: %w", e.ID, err)
		}
	}
	return nil
}
