// Package delivery is the sending slice's delivery: the activities of the
// SendEmail and SendBatch workflows (Sending) and of their reconciler
// (Reconciler). Package submit, its parent, accepts mail; this package
// does the I/O that sends it: building and storing messages, recording
// email events and suppressions, and delivering to MX hosts, within the
// warm-up allowances of the source addresses that WarmupGate counts in
// PostgreSQL. The activities of the other workflows live in the package
// of their area: internal/domains (VerifyDomain), imports (ContactImport),
// broadcast (Broadcast), datareq (DataRequest, Retention), webhook
// (DeliverWebhook), receiving (ProcessInbound) and health/notices
// (AccountHealth). Every activity is idempotent: a retry after a crash
// repeats no visible effect.
package delivery

import (
	"cmp"
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/emailevents"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/mime"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/tracking"
	"github.com/posthaste/posthaste/internal/unsubscribe"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/workflows/contract"
)

// DefaultRegion is the delivery region of the sandbox and of domains that
// name none.
const DefaultRegion = "us-east-1"

// Deliverer hands a message to the MX hosts of one domain.
type Deliverer interface {
	Deliver(ctx context.Context, domain string, env mta.Envelope) []mta.Result
}

// Senders are the Deliverers of the IP pools a process delivers from.
type Senders interface {
	// Sender returns the Deliverer of a pool ("" the default pool), or
	// false when this process does not deliver from it.
	Sender(pool string) (Deliverer, bool)
}

// OnePool is the Senders of a process that delivers from the default
// pool only, with d.
func OnePool(d Deliverer) Senders { return onePool{d} }

type onePool struct{ d Deliverer }

func (o onePool) Sender(pool string) (Deliverer, bool) { return o.d, pool == "" }

// Notifier is told when outbox entries were committed (the outbox
// dispatcher of this process, if any).
type Notifier interface{ Notify() }

// Config wires the activities of SendEmail and SendBatch (Sending).
type Config struct {
	// Hostname names this installation in the return path of sandbox
	// mail (POSTHASTE_HOSTNAME).
	Hostname string
	// Keys opens the domains' sealed DKIM keys; nil in a process without
	// a master key, which then cannot prepare mail from a domain. The
	// keys of return paths (reports.VERPKeyPurpose), of mailto
	// unsubscribe addresses (mailto.KeyPurpose) and of tracking tokens
	// (tracking.KeyPurpose) are derived from it: the inbound MX, package
	// receiving and the tracking endpoints derive the same to verify
	// them. Without it, return paths are unsigned, emails sent with a
	// topic name only the unsubscribe URL and no mail is tracked.
	Keys *seal.Box
	// Outbox is told when recorded events may have queued webhook
	// messages (the outbox dispatcher of this process); may be nil.
	Outbox Notifier
	// Now is the activities' clock; nil means time.Now. Tests pass a
	// settable clock instead of sleeping.
	Now func() time.Time
	// Crash, when set, kills the process at a point of Prepare or
	// Deliver (package faults); nil in any real deployment.
	Crash *faults.Crasher
	// Unsubscribe makes the unsubscribe links of emails sent with a topic,
	// which are built per recipient (see BuildForRecipient); nil in a
	// process without POSTHASTE_PUBLIC_URL or master key, which then fails
	// such emails.
	Unsubscribe *unsubscribe.Links
	// DefaultPool is the name of the default IP pool
	// (POSTHASTE_IP_POOLS): Prepare gives groups of teams or domains
	// assigned it the pool "", whose queues are the default ones.
	DefaultPool string
	// LocalTracking is `posthaste dev`'s own address (e.g.
	// http://localhost:8080) when it has no tracking host: mail from a
	// domain with tracking on is then tracked under it, with no Tracking
	// record to verify. "" elsewhere: tracked links go to the domain's
	// tracking host once its Tracking record is verified.
	LocalTracking string
	// FirstAttempt bounds the first delivery attempt that Prepare makes
	// of a group its worker serves (see firstAttempts); 0 means
	// DefaultFirstAttempt.
	FirstAttempt time.Duration
}

// Sending are the activities of SendEmail and SendBatch: preparing,
// delivering and recording the outcomes of emails.
type Sending struct {
	recorder
	audience    *store.Audience
	mta         Senders // nil in processes that do not deliver
	logger      *slog.Logger
	now         func() time.Time
	signers     *signerCache
	hostname    string
	keys        *seal.Box
	crash       *faults.Crasher
	unsubscribe *unsubscribe.Links
	// verpKey signs the return paths of emails sent from a domain, one
	// per recipient (reports.RecipientReturnPath), so that only a report
	// about a recipient of an email we sent reaches the inbound MX; nil
	// without a master key, which then cannot prepare mail from a domain
	// anyway.
	verpKey []byte
	// unsubscribeMailtoKey makes the mailto unsubscribe addresses of
	// emails sent with a topic from a domain (mailto.Make); nil: those
	// emails name only the URL.
	unsubscribeMailtoKey []byte
	// localTracking and localTrackingHost are Config.LocalTracking and
	// its host name.
	localTracking, localTrackingHost string
	// trackingKey seals the tokens of tracked links and open pixels
	// (tracking.Sealer); nil: no mail is tracked.
	trackingKey []byte
	// localRegions are the delivery regions whose queues the workflow
	// worker running these activities also serves, for the IP pools it
	// has Senders for: Prepare lets the workflow make the first delivery
	// attempt of their groups a local activity
	// (contract.DeliveryGroup.Local). Set by WithLocalDelivery.
	localRegions []string
	defaultPool  string
	// firstWithin is Config.FirstAttempt.
	firstWithin time.Duration
}

// recorder records the events of an email and puts the addresses they
// bounce on the suppression list (package receiving does the same for
// received reports).
type recorder struct {
	emails  *store.Emails
	outbox  Notifier
	metrics *telemetry.Metrics
}

// New returns the activities of SendEmail and SendBatch, delivering from
// the default pool with d (see NewWithSenders). d may be nil in processes
// that do not deliver; metrics and logger may be nil.
func New(cfg Config, st *store.Store, d Deliverer, metrics *telemetry.Metrics, logger *slog.Logger) *Sending {
	var senders Senders
	if d != nil {
		senders = OnePool(d)
	}
	return NewWithSenders(cfg, st, senders, metrics, logger)
}

// NewWithSenders returns the activities of SendEmail and SendBatch of a
// process that delivers from the IP pools of senders, over st's emails
// and audience; senders may be nil in processes that do not deliver,
// metrics and logger may be nil.
func NewWithSenders(cfg Config, st *store.Store, senders Senders, metrics *telemetry.Metrics, logger *slog.Logger) *Sending {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	a := &Sending{recorder: recorder{emails: st.Emails, outbox: cfg.Outbox, metrics: metrics}, audience: st.Audience,
		mta: senders, logger: logger.With("component", "activities"), now: now, signers: newSignerCache(),
		hostname: cfg.Hostname, keys: cfg.Keys, crash: cfg.Crash, unsubscribe: cfg.Unsubscribe,
		defaultPool: cfg.DefaultPool, firstWithin: cmp.Or(cfg.FirstAttempt, DefaultFirstAttempt)}
	if u, err := url.Parse(cfg.LocalTracking); err == nil && cfg.LocalTracking != "" && u.Hostname() != "" {
		a.localTracking, a.localTrackingHost = cfg.LocalTracking, u.Hostname()
	}
	if cfg.Keys != nil {
		a.verpKey = cfg.Keys.DeriveKey(reports.VERPKeyPurpose)
		a.unsubscribeMailtoKey = cfg.Keys.DeriveKey(mailto.KeyPurpose)
		a.trackingKey = cfg.Keys.DeriveKey(tracking.KeyPurpose)
	}
	return a
}

// WithLocalDelivery returns activities that differ from a only in that
// Prepare lets the first delivery attempt of groups of the given regions,
// from the IP pools a has Senders for, run as a local activity. A worker
// that runs workflows and serves those regions' and pools' delivery
// queues registers them on its workflow queue; a process that does not
// deliver (no Senders) never delivers locally.
func (a *Sending) WithLocalDelivery(regions []string) *Sending {
	s := *a
	if s.mta != nil {
		s.localRegions = slices.Clone(regions)
	} else {
		s.localRegions = nil
	}
	return &s
}

// sends reports whether this process delivers from pool.
func (a *Sending) sends(pool string) bool {
	if a.mta == nil {
		return false
	}
	_, ok := a.mta.Sender(pool)
	return ok
}

// record stores events and counts them (emailevents.Recorder.Record).
func (a *recorder) record(ctx context.Context, id uuid.UUID, evs []store.Event) error {
	return a.events().Record(ctx, id, evs)
}

// events is the recorder of a's events and suppressions.
func (a *recorder) events() emailevents.Recorder {
	return emailevents.Recorder{Emails: a.emails, Outbox: a.outbox, Metrics: a.metrics}
}

// claimSkew lets a workflow timer that fires slightly before the stored
// scheduled time (clocks of the Temporal server, the worker and PostgreSQL
// differ a little) still claim the email.
const claimSkew = 2 * time.Second

// Prepare claims the email for sending (store.ClaimForSending: the one
// conditional update that decides races with cancel and reschedule and
// records `sent`), builds its MIME message, signs it with the sender
// domain's DKIM key, stores it once, records `suppressed` for recipients on
// the team's suppression list or outside the email's topic (see
// store.TopicBlocked), and splits the others into sandbox
// simulations and per-domain delivery groups carrying the sender domain's
// region, TLS mode and return path. A canceled email is skipped; one moved
// later reports its new time. An email sent with a topic is built again
// per recipient by Deliver (see BuildForRecipient); without unsubscribe
// links (Config.Unsubscribe) it fails permanently here.
//
// The claim's commit runs while the email is loaded and its message built
// and signed; the message is stored only once the claim has decided. When
// this worker serves a group's region and pool (DeliveryGroup.Local),
// Prepare also makes that group's first delivery attempt
// (DeliveryGroup.First, see firstAttempts): the message it just built goes
// to the MX without another local activity, load or round trip through the
// workflow.
func (a *Sending) Prepare(ctx context.Context, in contract.PrepareInput) (contract.PrepareResult, error) {
	started := a.now()
	id, err := uuid.Parse(in.EmailID)
	if err != nil {
		return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("bad email id", contract.ErrTypePermanent, err)
	}
	var (
		claim    store.SendClaim
		claimErr error
		claimed  = make(chan struct{})
	)
	go func() {
		defer close(claimed)
		claim, claimErr = a.emails.ClaimForSending(ctx, id, a.now(), claimSkew)
	}()
	// The email, its domain, its IP pool and the message an earlier try
	// stored come in one round trip; the message is built unless stored.
	load, msg, buildErr := a.loadAndBuild(ctx, id)
	<-claimed
	if errors.Is(claimErr, store.ErrNotFound) {
		// Erased by a data request after it was canceled: nothing to send.
		return contract.PrepareResult{Skip: true}, nil
	}
	if claimErr != nil {
		return contract.PrepareResult{}, claimErr
	}
	switch {
	case claim.LastEvent == store.EventCanceled:
		return contract.PrepareResult{Skip: true}, nil
	case !claim.Claimed && claim.LastEvent == store.EventScheduled:
		return contract.PrepareResult{NotDue: claim.ScheduledAt}, nil
	}
	a.crash.At(faults.InPrepare)
	if claim.Claimed && a.metrics != nil {
		a.metrics.EmailEvents.WithLabelValues(store.EventSent).Inc()
	}
	// Claimed now, or by an earlier try of this step: store the message
	// (once) and hand out the recipients.
	if buildErr != nil {
		return contract.PrepareResult{}, buildErr
	}
	b, err := a.route(&load)
	if err != nil {
		return contract.PrepareResult{}, err
	}
	e := load.Email
	if load.Message == nil { // not stored by an earlier try
		// A concurrent try may have stored its own build first: the
		// stored message is the one that is sent.
		if load.Message, err = a.emails.SaveMessage(ctx, e.TeamID, e.ID, messageID(e), msg); err != nil {
			return contract.PrepareResult{}, err
		}
	}
	var real []string
	for _, r := range b.rcpts {
		if _, ok := sandbox.Outcome(r.Address); !ok {
			real = append(real, r.Address)
		}
	}
	suppressed := map[string]string{} // address: the reason it is on the list
	offTopic := map[string]bool{}     // not subscribed to the email's topic
	if len(real) > 0 {
		if suppressed, err = a.emails.SuppressionReasons(ctx, e.TeamID, real); err != nil {
			return contract.PrepareResult{}, err
		}
		if e.TopicID != nil {
			offTopic, err = a.audience.TopicBlocked(ctx, e.TeamID, *e.TopicID, real)
			if errors.Is(err, store.ErrNotFound) { // deleted since: no longer scoped
				offTopic, err = map[string]bool{}, nil
			}
			if err != nil {
				return contract.PrepareResult{}, err
			}
		}
	}
	res, evs := b.split(suppressed, offTopic)
	res.TeamID = e.TeamID
	if len(evs) > 0 {
		if err := a.record(ctx, id, evs); err != nil {
			return contract.PrepareResult{}, err
		}
	}
	a.trace(ctx, "email prepared", e, started, "groups", len(res.Groups))
	a.firstAttempts(ctx, load, res.Groups)
	return res, nil
}

// TopicOptOutReason is the reason a recipient not subscribed to the
// email's topic ends failed with (the email.failed event's failed.reason).
func TopicOptOutReason(topicID uuid.UUID) string {
	return "The recipient is not subscribed to topic " + topicID.String() + "."
}

// loadAndBuild loads the email for sending (attachments included) and,
// unless an earlier try stored it, builds its message (see buildMessage).
// No message is built when the email cannot be sent as it is (no
// unsubscribe links for a topic, its domain gone): Prepare says why.
func (a *Sending) loadAndBuild(ctx context.Context, id uuid.UUID) (store.EmailToSend, []byte, error) {
	load, err := a.emails.EmailForSending(ctx, id, true)
	if err != nil {
		return load, nil, err
	}
	e := load.Email
	if load.Message != nil || (perRecipient(e) && a.unsubscribe == nil) || (e.DomainID != nil && load.Domain == nil) {
		return load, nil, nil
	}
	msg, err := a.buildMessage(e, load.Domain)
	return load, msg, err
}

// buildMessage builds the message of e (or takes the source submitted
// over SMTP) and signs it with the key of d (nil: the sandbox sender).
func (a *Sending) buildMessage(e store.Email, d *store.Domain) ([]byte, error) {
	msg := e.Source // submitted over SMTP: delivered as submitted
	if msg == nil {
		var err error
		if msg, err = BuildMessage(e, a.now()); err != nil {
			// The failure reaches the history in the clear, and a
			// parse error quotes the address it could not parse.
			var rcpts []string
			for _, r := range e.Recipients {
				rcpts = append(rcpts, r.Address)
			}
			why := withoutAddresses(err.Error(), rcpts)
			return nil, temporal.NewNonRetryableApplicationError("building message: "+why, contract.ErrTypePermanent, errors.New(why))
		}
	}
	if d == nil {
		return msg, nil
	}
	msg, err := a.sign(*d, msg)
	if err != nil {
		return nil, classify(err)
	}
	return msg, nil
}

// errNoKey marks a domain key that cannot be used: retrying cannot fix it.
var errNoKey = errors.New("DKIM key unavailable")

// sign adds the domain's DKIM signature to msg.
func (a *Sending) sign(d store.Domain, msg []byte) ([]byte, error) {
	key, err := a.domainKey(d)
	if err != nil {
		return nil, err
	}
	return signWith(d, key, msg)
}

// domainKey opens the domain's DKIM private key, once per key and process.
func (a *Sending) domainKey(d store.Domain) (crypto.Signer, error) {
	return a.signers.get(d.ID, d.DKIMPrivateKey, func() (crypto.Signer, error) { return a.openKey(d) })
}

// openKey unseals and parses the domain's DKIM private key.
func (a *Sending) openKey(d store.Domain) (crypto.Signer, error) {
	if a.keys == nil {
		return nil, fmt.Errorf("%w: no master key (POSTHASTE_MASTER_KEY) to open the key of %s", errNoKey, d.Name)
	}
	der, err := a.keys.Open(d.DKIMPrivateKey, d.ID[:])
	if err != nil {
		return nil, fmt.Errorf("%w: opening the key of %s: %w", errNoKey, d.Name, err)
	}
	key, err := dkim.ParsePrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoKey, err)
	}
	return key, nil
}

func signWith(d store.Domain, key crypto.Signer, msg []byte) ([]byte, error) {
	return dkim.Sign(msg, d.Name, d.DKIMSelector, key)
}

// errEgressRefused is matched by a *refusedError.
var errEgressRefused = errors.New("refused by the egress policy")

// refusedError is a delivery the egress policy refused: every MX host of
// the domain has only addresses Posthaste may not connect to
// (mta.Refused). Retrying cannot fix it. Its text is the reason shown.
type refusedError struct{ reason string }

func (e *refusedError) Error() string        { return e.reason }
func (e *refusedError) Is(target error) bool { return target == errEgressRefused }

// classify turns errors that retrying cannot fix (a missing domain or
// DKIM key, MX hosts the egress policy refuses) into non-retryable
// application errors of type contract.ErrTypePermanent, whose message is the reason
// shown for the failure; everything else stays retryable.
func classify(err error) error {
	if errors.Is(err, errNoKey) || errors.Is(err, store.ErrNotFound) || errors.Is(err, errEgressRefused) {
		return contract.Permanent(err)
	}
	return err
}

// DomainReturnPath is the per-email VERP envelope sender of an email sent
// from a domain, bounces+<email id>-<signature>@<return path>.<domain>
// (reports.SignedReturnPath under key), which Prepare still hands the
// delivery groups: Deliver sends each recipient's copy with its own
// return path instead (recipientReturnPaths), as it has since migration
// 00040. Without a key it is the unsigned bounces+<email id>@<host>,
// which Deliver sends as it is and the inbound MX routes only for emails
// from before signing.
func DomainReturnPath(key []byte, emailID uuid.UUID, d store.Domain) string {
	host := d.ReturnPath + "." + d.Name
	if len(key) == 0 {
		return reports.VERPPrefix + emailID.String() + "@" + host
	}
	return reports.SignedReturnPath(key, emailID, host)
}

// messageID is stable for an email so that a rebuilt message is identical:
// the one it was submitted with, else <email id>@<sender domain>.
func messageID(e store.Email) string {
	if e.MessageID != "" {
		return e.MessageID
	}
	return e.ID.String() + "@" + e.FromDomain
}

// BuildMessage renders an email as an RFC 5322 message dated at.
func BuildMessage(e store.Email, at time.Time) ([]byte, error) {
	from, err := mimeAddress(e.From)
	if err != nil {
		return nil, err
	}
	m := mime.Message{
		From:         from,
		Subject:      e.Subject,
		GenerateText: e.GenerateText,
		MessageID:    messageID(e),
		Date:         at,
	}
	if m.To, err = mimeAddresses(e.To); err != nil {
		return nil, err
	}
	if m.Cc, err = mimeAddresses(e.Cc); err != nil {
		return nil, err
	}
	if m.ReplyTo, err = mimeAddresses(e.ReplyTo); err != nil {
		return nil, err
	}
	if e.HTML != nil {
		m.HTML = *e.HTML
	}
	if e.Text != nil {
		m.Text = *e.Text
	}
	for _, h := range e.Headers {
		m.Headers = append(m.Headers, mime.Header{Name: h.Name, Value: h.Value})
	}
	for _, at := range e.Attachments {
		m.Attachments = append(m.Attachments, mime.Attachment{
			Filename: at.Filename, ContentType: at.ContentType, ContentID: at.ContentID, Content: at.Content,
		})
	}
	return mime.Build(m)
}

// RecordEvents records events in order.
func (a *Sending) RecordEvents(ctx context.Context, in contract.RecordEventsInput) error {
	id, err := uuid.Parse(in.EmailID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad email id", contract.ErrTypePermanent, err)
	}
	now := a.now()
	evs := make([]store.Event, len(in.Events))
	for i, e := range in.Events {
		evs[i] = store.Event{Type: e.Type, Recipient: e.Recipient, Detail: e.Detail, CreatedAt: now}
	}
	err = a.record(ctx, id, evs)
	if errors.Is(err, store.ErrNotFound) {
		// Erased by a data request while it was being sent: there is
		// nothing left to record the events on.
		a.logger.Info("events of an email that no longer exists dropped", "email_id", id)
		return nil
	}
	return err
}

// returnPath is the VERP envelope sender that routes bounces back to the
// email: bounces+<email id>@<sender domain>.
func returnPath(e store.Email, hostname string) string {
	domain := e.FromDomain
	if sandbox.IsDomain(domain) && hostname != "" {
		domain = hostname
	}
	return "bounces+" + e.ID.String() + "@" + domain
}

// LoadBatch lists the emails of a batch that are still to be sent, with
// their current scheduled times (none when all were canceled, or on a
// retry after they were all sent).
func (a *Sending) LoadBatch(ctx context.Context, in contract.LoadBatchInput) (contract.LoadBatchResult, error) {
	id, err := uuid.Parse(in.BatchID)
	if err != nil {
		return contract.LoadBatchResult{}, temporal.NewNonRetryableApplicationError("bad batch id", contract.ErrTypePermanent, err)
	}
	emails, err := a.emails.BatchEmails(ctx, id)
	if err != nil {
		return contract.LoadBatchResult{}, err
	}
	res := contract.LoadBatchResult{Emails: make([]contract.BatchEmail, len(emails))}
	for i, e := range emails {
		res.Emails[i] = contract.BatchEmail{EmailID: e.ID.String(), ScheduledAt: e.ScheduledAt}
	}
	return res, nil
}
