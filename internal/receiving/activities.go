package receiving

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/emailevents"
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

// record stores events and counts them (emailevents.Recorder.Record).
func (a *Activities) record(ctx context.Context, id uuid.UUID, evs []store.Event) error {
	return a.events().Record(ctx, id, evs)
}

// events is the recorder of a's events and suppressions.
func (a *Activities) events() emailevents.Recorder {
	return emailevents.Recorder{Emails: a.emails, Outbox: a.outbox, Metrics: a.metrics}
}

// suppress puts addresses whose bounce said they are bad on the team's
// suppression list (emailevents.Recorder.SuppressBounced).
func (a *Activities) suppress(ctx context.Context, e store.Email, addrs []string) error {
	return a.events().SuppressBounced(ctx, e, addrs)
}
