// Package submit is the one "accept mail" use case shared by the HTTP API
// and the SMTP gateway: it decodes a send request, renders the template it
// names (if any; see WithTemplate), validates it, checks that
// the team may use the sender and recipients, and durably accepts the email
// in one transaction (the email row, which holds its recipients, and an
// outbox entry). The workflow that delivers it is started afterwards by the
// outbox dispatcher, so acceptance never waits on Temporal.
package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
)

// Store is the part of the store the service uses.
type Store interface {
	Accept(ctx context.Context, a store.Acceptance) (quotaUsed int64, err error)
	TeamMembers(ctx context.Context, teamID uuid.UUID, emails []string) (map[string]bool, error)
	DomainByName(ctx context.Context, teamID uuid.UUID, name string) (store.Domain, error)
	ClaimIdempotencyKey(ctx context.Context, c store.IdempotencyClaim, lease, ttl time.Duration) (*store.IdempotencyRecord, error)
	RenewIdempotencyClaim(ctx context.Context, c store.IdempotencyClaim, lease time.Duration) error
	ReleaseIdempotencyKey(ctx context.Context, c store.IdempotencyClaim) error
	RescheduleEmail(ctx context.Context, teamID, id uuid.UUID, at time.Time,
		wake func(context.Context, store.EmailRef) error) error
	CancelEmail(ctx context.Context, teamID, id uuid.UUID) (store.EmailRef, error)
	Topic(ctx context.Context, teamID, id uuid.UUID) (store.Topic, error)
}

// Waker wakes the workflow that sends an email (see store.EmailRef) so
// that it reads the email's state again: at is the new scheduled time, nil
// for "now" (after a cancel). Waking a workflow that no longer exists is
// not an error.
type Waker interface {
	Wake(ctx context.Context, ref store.EmailRef, at *time.Time) error
}

// Notifier is told when new outbox entries were committed.
type Notifier interface{ Notify() }

// Sender is the team (and key scope) a submission acts for.
type Sender struct {
	TeamID   uuid.UUID
	KeyID    uuid.UUID
	DomainID *uuid.UUID // a sending key limited to one domain; nil for any
}

// Config wires a Service.
type Config struct {
	Store    Store
	Notifier Notifier // may be nil
	Fetcher  Fetcher  // fetches `path` attachments; nil refuses them
	// Waker wakes workflows of rescheduled and canceled emails; nil in
	// processes without Temporal (moving a started email's time earlier
	// then takes effect at its old time).
	Waker  Waker
	Logger *slog.Logger
	Now    func() time.Time // nil → time.Now
	// IdempotencyLease is how long the claim on an idempotency key of a
	// request whose process died keeps blocking the key (see
	// DefaultIdempotencyLease); 0 → the default.
	IdempotencyLease time.Duration
	// IdempotencyHeartbeat is how often a running request renews its
	// claim; 0, or not shorter than the lease → a quarter of the lease.
	IdempotencyHeartbeat time.Duration
	// Crash, when set, kills the process right after an acceptance
	// committed (faults.AfterAccept); nil in any real deployment.
	Crash *faults.Crasher
	// PublicURL is where the unsubscribe links of emails sent with a
	// topic lead (POSTHASTE_PUBLIC_URL); "" refuses sends with `topic_id`
	// (422), since their links could not be built.
	PublicURL string
	// Templates finds the templates of sends with `template`; nil → Store,
	// when it is a TemplateSource (as *store.Store is), else such sends are
	// refused.
	Templates TemplateSource
	// Health, when set, refuses the sends of a team whose sending is paused
	// for its account health (POSTHASTE_HEALTH_PAUSE); nil never refuses.
	Health HealthGate
}

// HealthGate tells whether a team's sending is paused: nil when it is not.
// It runs on every send, so it must be cheap (*store.Store reads one row).
type HealthGate interface {
	SendingPause(ctx context.Context, teamID uuid.UUID) (*health.Pause, error)
}

// Service accepts email. Safe for concurrent use.
type Service struct {
	store  Store
	notify Notifier
	fetch  Fetcher
	waker  Waker
	logger *slog.Logger
	now    func() time.Time
	lease  time.Duration // of idempotency claims
	beat   time.Duration // idempotency claims' heartbeat interval
	crash  *faults.Crasher
	// templates may be nil: sends with a template are then refused.
	templates TemplateSource
	publicURL string     // "" refuses sends with a topic
	health    HealthGate // may be nil
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, notify: cfg.Notifier, fetch: cfg.Fetcher, waker: cfg.Waker,
		logger: cfg.Logger, now: cfg.Now, crash: cfg.Crash, templates: cfg.Templates, publicURL: cfg.PublicURL,
		health: cfg.Health}
	if ts, ok := cfg.Store.(TemplateSource); ok && s.templates == nil {
		s.templates = ts
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.lease, s.beat = cfg.IdempotencyLease, cfg.IdempotencyHeartbeat
	if s.lease <= 0 {
		s.lease = DefaultIdempotencyLease
	}
	if s.beat <= 0 || s.beat >= s.lease {
		s.beat = s.lease / 4
	}
	return s
}

// Send validates and accepts one email and returns its id. Rejections the
// caller can fix are *Error; anything else is an internal failure.
func (s *Service) Send(ctx context.Context, from Sender, req SendRequest) (uuid.UUID, error) {
	res, err := s.SendWithOptions(ctx, from, req, SendOptions{})
	return res.ID, err
}

// SendOptions modify one send.
type SendOptions struct {
	// IdempotencyKey, when not nil, makes the request idempotent (API.md,
	// Idempotency): 1..256 characters, scoped to the team for 24 hours.
	IdempotencyKey *string
	// System marks Posthaste's own email (team invitations, password-reset
	// links, notices to owners), sent by the operator's system mailer from
	// POSTHASTE_SYSTEM_FROM: the sandbox sender may then write to addresses
	// that are not the team's members, such as someone invited to join it.
	// Every other check still applies. The API and the SMTP gateway never
	// set it.
	System bool
}

// SendResult is the answer to an accepted send, as remembered for its
// idempotency key.
type SendResult struct {
	ID uuid.UUID `json:"id"`
	// Replayed is true when the result is the remembered answer of an
	// earlier request with the same idempotency key: nothing was accepted.
	Replayed bool `json:"-"`
	// QuotaUsed is the team's usage of the month (recipients of accepted
	// emails) including this email; 0 for a replay.
	QuotaUsed int64 `json:"-"`
}

// SendWithOptions validates and accepts one email. With an idempotency key
// a repeated request returns the first result (Replayed) without side
// effects; a key used for another request, or one still in flight, is an
// *Error of KindIdempotencyMismatch or KindIdempotencyInFlight.
func (s *Service) SendWithOptions(ctx context.Context, from Sender, req SendRequest, opts SendOptions) (SendResult, error) {
	var res SendResult
	claim, replayed, err := s.claimOrReplay(ctx, from.TeamID, opts.IdempotencyKey, EndpointEmails, []any{req}, &res)
	if err != nil || replayed {
		res.Replayed = replayed
		return res, err
	}
	accepted := false
	defer s.finish(ctx, claim, &accepted)
	if !opts.System {
		if err := s.checkPaused(ctx, from.TeamID); err != nil {
			return res, err
		}
	}
	now := s.now()
	if req, err = s.applyTemplate(ctx, from.TeamID, req, nil); err != nil {
		return res, err
	}
	e, err := req.Validate(ctx, ValidateOptions{Now: now, Fetch: s.fetch})
	if err != nil {
		return res, err
	}
	known := senderDomains{}
	d, err := s.authorize(ctx, from, e, opts.System, known)
	if err != nil {
		return res, err
	}
	if err := s.checkTopic(ctx, from.TeamID, e.TopicID, nil); err != nil {
		return res, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return res, fmt.Errorf("making email id: %w", err)
	}
	res.ID = id
	row := toRow(id, from.TeamID, e, now)
	row.DomainID = domainID(d)
	if res, err = s.acceptOne(ctx, row, claim.stored(), known); err != nil {
		return res, err
	}
	accepted = true
	return res, nil
}

// acceptOne stores one email with the answer remembered for its claim,
// if any, and returns that answer. known holds its sender domain, as
// authorising it loaded it.
func (s *Service) acceptOne(ctx context.Context, row store.Email, claim *store.IdempotencyClaim,
	known senderDomains) (SendResult, error) {
	res := SendResult{ID: row.ID}
	a := store.Acceptance{Emails: []store.Email{row}, Idempotency: claim}
	if claim != nil {
		var err error
		if a.Response, err = json.Marshal(res); err != nil {
			return SendResult{}, fmt.Errorf("encoding response: %w", err)
		}
	}
	used, err := s.accept(ctx, a, known)
	if err != nil {
		return SendResult{}, err
	}
	res.QuotaUsed = used
	s.logger.Debug("email accepted", "team_id", row.TeamID, "email_id", row.ID)
	return res, nil
}

// accept stores an acceptance, tells the dispatcher and returns the
// team's quota usage. known holds the sender domains of its emails, as
// authorising them loaded them, so their insights need no lookup. Over the
// quota the error is a *store.QuotaExceededError and nothing was accepted.
func (s *Service) accept(ctx context.Context, a store.Acceptance, known senderDomains) (int64, error) {
	if err := attachInsights(a.Emails, known); err != nil {
		return 0, err
	}
	used, err := s.store.Accept(ctx, a)
	if err != nil {
		if errors.Is(err, store.ErrClaimLost) {
			return 0, inFlight()
		}
		return 0, fmt.Errorf("accepting email: %w", err)
	}
	s.crash.At(faults.AfterAccept)
	if s.notify != nil {
		s.notify.Notify()
	}
	return used, nil
}

// senderDomains holds the sender domains one request loaded while
// authorising it, by lower-case name (nil: the team has no such domain),
// so that a batch, or a message whose envelope sender, From and Sender
// share a domain, loads it once, and its insights (attachInsights) read
// the same row again without a query.
type senderDomains map[string]*store.Domain

// byID returns the loaded domain with that id, nil when none was loaded.
func (k senderDomains) byID(id uuid.UUID) *store.Domain {
	for _, d := range k {
		if d != nil && d.ID == id {
			return d
		}
	}
	return nil
}

// domainID is the id of a sender domain, nil for the sandbox (nil d).
func domainID(d *store.Domain) *uuid.UUID {
	if d == nil {
		return nil
	}
	id := d.ID
	return &id
}

// authorize checks that the team may send from e.From to its recipients
// and returns the sender domain (nil for the sandbox). A domain must be
// the team's, of exactly the From domain (a subdomain is its own domain),
// and verified or in temporary failure; a key limited to a domain sends
// only from that domain. System email (SendOptions.System) from the
// sandbox sender may go to anyone. known caches the domains the request
// loaded (see authorizeSender).
func (s *Service) authorize(ctx context.Context, from Sender, e Email, system bool, known senderDomains) (*store.Domain, error) {
	d, err := s.authorizeSender(ctx, from, e.From, "from", known)
	if err != nil || d != nil {
		return d, err
	}
	return nil, s.authorizeSandbox(ctx, from, e, system)
}

// authorizeSender checks that the team may send as addr (the `from` field,
// or an SMTP envelope sender) and returns its domain, nil for the sandbox
// sender. The domain is looked up in known first and stored there once
// loaded; known may be nil (no cache).
func (s *Service) authorizeSender(ctx context.Context, from Sender, addr address.Address, field string,
	known senderDomains) (*store.Domain, error) {
	if sandbox.IsDomain(addr.Domain) {
		if from.DomainID != nil {
			return nil, Errorf(KindForbidden, field,
				"This API key can only send from its own domain, not from the sandbox domain %s.",
				strings.ToLower(addr.Domain))
		}
		if !sandbox.IsSender(addr.Addr()) {
			return nil, Errorf(KindForbidden, field,
				"The sandbox domain %s can only send from onboarding@%[1]s.", strings.ToLower(addr.Domain))
		}
		return nil, nil
	}
	name := strings.ToLower(addr.Domain)
	d, ok := known[name]
	if !ok {
		loaded, err := s.store.DomainByName(ctx, from.TeamID, name)
		switch {
		case err == nil:
			d = &loaded
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("checking domain %s: %w", addr.Domain, err)
		}
		if known != nil {
			known[name] = d
		}
	}
	if d == nil {
		return nil, Errorf(KindForbidden, field,
			"The %s domain is not verified. Add and verify your domain, or send from %s to test.",
			addr.Domain, sandbox.Sender)
	}
	if from.DomainID != nil && *from.DomainID != d.ID {
		return nil, Errorf(KindForbidden, field,
			"This API key is restricted to another domain and cannot send from %s.", addr.Domain)
	}
	if !d.Sendable() {
		return nil, Errorf(KindForbidden, field,
			"The %s domain is not verified (its status is %s). Publish its DNS records and verify it.",
			addr.Domain, d.Status)
	}
	return d, nil
}

// AuthorizeSender checks that the team may send as addr (a broadcast's
// `from`: "Name <a@b>" or a bare address; field names it in errors) and
// returns its domain and the domain's id (nil for the sandbox sender). The
// errors are *Error, like a send's.
func (s *Service) AuthorizeSender(ctx context.Context, from Sender, addr, field string) (string, *uuid.UUID, error) {
	if err := s.checkPaused(ctx, from.TeamID); err != nil {
		return "", nil, err
	}
	a, err := address.Parse(addr)
	if err != nil {
		return "", nil, Errorf(KindInvalidParameter, field, "Invalid `%s` field. The email address needs to follow "+
			"the `email@example.com` or `Name <email@example.com>` format.", field)
	}
	d, err := s.authorizeSender(ctx, from, a, field, nil)
	if err != nil {
		return "", nil, err
	}
	return strings.ToLower(a.Domain), domainID(d), nil
}

// checkPaused refuses (KindForbidden: 403 validation_error, SMTP 550
// 5.7.1) the sends of a team whose sending is paused for its account
// health, naming the rate and its threshold.
func (s *Service) checkPaused(ctx context.Context, team uuid.UUID) error {
	if s.health == nil {
		return nil
	}
	p, err := s.health.SendingPause(ctx, team)
	if err != nil {
		return fmt.Errorf("checking account health: %w", err)
	}
	if p != nil {
		return Errorf(KindForbidden, "", "%s", p.Message())
	}
	return nil
}

// authorizeSandbox checks the recipients of a send from the sandbox
// sender; system email may go to anyone.
func (s *Service) authorizeSandbox(ctx context.Context, from Sender, e Email, system bool) error {
	if system {
		return nil
	}
	// The sandbox sender writes to the sandbox addresses and to the team's
	// own members, nobody else.
	var others []string
	for _, list := range [][]address.Address{e.To, e.Cc, e.Bcc} {
		for _, a := range list {
			if _, ok := sandbox.Outcome(a.Addr()); !ok {
				others = append(others, a.Addr())
			}
		}
	}
	if len(others) == 0 {
		return nil
	}
	members, err := s.store.TeamMembers(ctx, from.TeamID, others)
	if err != nil {
		return fmt.Errorf("checking team members: %w", err)
	}
	for _, o := range others {
		if !members[strings.ToLower(o)] {
			return Errorf(KindForbidden, "to",
				"You can only send testing emails from %s to your own team's addresses or to the sandbox "+
					"addresses delivered@, bounced@, complained@ and suppressed@%s. To send to %s, verify a domain.",
				strings.ToLower(e.From.Addr()), strings.ToLower(e.From.Domain), o)
		}
	}
	return nil
}

// checkTopic checks that the team has the topic an email is scoped to (nil
// is none) and that its unsubscribe links can be built (Config.PublicURL).
// known caches the topics a batch already found; nil for none.
func (s *Service) checkTopic(ctx context.Context, team uuid.UUID, topic *uuid.UUID, known map[uuid.UUID]bool) error {
	if topic != nil && s.publicURL == "" {
		return Errorf(KindValidation, "topic_id", "Invalid `topic_id` field. An email sent with a topic carries "+
			"an unsubscribe link to this server, and this server has no public URL (POSTHASTE_PUBLIC_URL) to build "+
			"it with: its operator must set one before emails can be sent with a topic.")
	}
	if topic == nil || known[*topic] {
		return nil
	}
	if _, err := s.store.Topic(ctx, team, *topic); errors.Is(err, store.ErrNotFound) {
		return Errorf(KindValidation, "topic_id", "Invalid `topic_id` field. There is no topic %s.", *topic)
	} else if err != nil {
		return fmt.Errorf("loading topic %s: %w", *topic, err)
	}
	if known != nil {
		known[*topic] = true
	}
	return nil
}

func toRow(id, team uuid.UUID, e Email, now time.Time) store.Email {
	row := store.Email{
		ID:           id,
		TeamID:       team,
		From:         e.From.String(),
		FromDomain:   e.From.Domain,
		To:           display(e.To),
		Cc:           display(e.Cc),
		Bcc:          display(e.Bcc),
		ReplyTo:      display(e.ReplyTo),
		Subject:      e.Subject,
		GenerateText: e.GenerateText,
		ScheduledAt:  e.ScheduledAt,
		TopicID:      e.TopicID,
		TemplateID:   e.TemplateID,
		LastEvent:    store.EventQueued,
		CreatedAt:    now.UTC(),
	}
	if e.ScheduledAt != nil {
		row.LastEvent = store.EventScheduled
	}
	if e.HTML != "" {
		row.HTML = &e.HTML
	}
	if e.Text != "" || !e.GenerateText {
		row.Text = &e.Text
	}
	for _, h := range e.Headers {
		row.Headers = append(row.Headers, store.Header{Name: h.Name, Value: h.Value})
	}
	row.Tags = toStoreTags(e.Tags)
	for _, a := range e.Attachments {
		row.Attachments = append(row.Attachments, store.Attachment{
			Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID, Content: a.Content,
		})
	}
	seen := map[string]bool{}
	for _, g := range []struct {
		kind string
		list []address.Address
	}{{"to", e.To}, {"cc", e.Cc}, {"bcc", e.Bcc}} {
		for _, a := range g.list {
			key := strings.ToLower(a.Addr())
			if seen[key] {
				continue // one delivery per address, whatever fields name it
			}
			seen[key] = true
			row.Recipients = append(row.Recipients, store.Recipient{
				Address: a.Addr(), Kind: g.kind, Domain: a.Domain, Status: row.LastEvent,
			})
		}
	}
	return row
}

func toStoreTags(tags []Tag) []store.Tag {
	var out []store.Tag
	for _, t := range tags {
		out = append(out, store.Tag{Name: t.Name, Value: t.Value})
	}
	return out
}

func display(list []address.Address) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	return out
}

// StoreOf is the Store (and TemplateSource) of the opened store: its
// emails, with the members, domains, topics, contacts and templates that
// sending checks.
func StoreOf(st *store.Store) Store {
	return storeAreas{st.Emails, st.Accounts, st.Domains, st.Audience, st.Templates}
}

// storeAreas joins the areas sending reads; each method it needs comes from
// exactly one of them.
type storeAreas struct {
	*store.Emails
	*store.Accounts
	*store.Domains
	*store.Audience
	*store.Templates
}

var (
	_ Store          = storeAreas{}
	_ TemplateSource = storeAreas{}
)
