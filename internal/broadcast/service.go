package broadcast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/unsubscribe"
)

// Waker wakes the Broadcast workflow of a broadcast, so that a canceled
// one ends at once rather than when its timer fires. A broadcast without
// a workflow is not an error.
type Waker interface {
	WakeBroadcast(ctx context.Context, id uuid.UUID) error
}

// Notifier is told that outbox entries were written (the outbox
// dispatcher), so that a broadcast sent now starts now.
type Notifier interface{ Notify() }

// Config wires a Service. Store and Submit are required.
type Config struct {
	Store  *store.Store
	Submit *submit.Service
	// Waker may be nil (a process without Temporal): a canceled broadcast
	// then ends when its workflow next looks.
	Waker Waker
	// Outbox may be nil: the broadcast's workflow then starts at the
	// dispatcher's next poll.
	Outbox Notifier
	Logger *slog.Logger // nil discards
}

// Service is what the HTTP API and the dashboard do with broadcasts:
// create, edit, send (now or scheduled), cancel, test, duplicate and
// delete them, and read them, their counts and their recipients. Bad
// input is an *invalid.Error (or a *submit.Error from the send path); a
// broadcast the team does not have is store.ErrNotFound; a change its
// status forbids a *store.BroadcastStateError; a segment or topic not the
// team's a *store.RefError.
type Service struct {
	store  *store.Store
	submit *submit.Service
	waker  Waker
	outbox Notifier
	logger *slog.Logger
	now    func() time.Time
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: cfg.Store, submit: cfg.Submit, waker: cfg.Waker, outbox: cfg.Outbox,
		logger: logger.With("component", "broadcast"), now: time.Now}
}

// Properties returns the team's contact properties as rendering needs
// them.
func (s *Service) Properties(ctx context.Context, teamID uuid.UUID) ([]Property, error) {
	return Properties(ctx, s.store.Audience, teamID)
}

// Properties returns the team's contact properties from st as rendering
// needs them.
func Properties(ctx context.Context, st *store.Audience, teamID uuid.UUID) ([]Property, error) {
	byKey, err := st.ContactPropertiesByKey(ctx, teamID)
	if err != nil {
		return nil, fmt.Errorf("loading contact properties: %w", err)
	}
	out := make([]Property, 0, len(byKey))
	for k, p := range byKey {
		prop := Property{Key: k}
		if p.Fallback != nil {
			v := propertyText(p.Fallback)
			prop.Fallback = &v
		}
		out = append(out, prop)
	}
	return out, nil
}

// Create stores a new broadcast from e and, with send, sends it at once
// or at scheduledAt (ISO 8601 or natural language, as for emails; only
// with send). A broadcast that cannot be sent is refused before anything
// is stored.
func (s *Service) Create(ctx context.Context, from submit.Sender, e Edit, send bool, scheduledAt string) (store.Broadcast, error) {
	if err := s.applyTemplate(ctx, from.TeamID, &e); err != nil {
		return store.Broadcast{}, err
	}
	if scheduledAt != "" && !send {
		return store.Broadcast{}, invalid.Errorf("scheduled_at", "The `scheduled_at` field can only be used with `send: true`.")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Broadcast{}, err
	}
	b := store.Broadcast{ID: id, TeamID: from.TeamID, ReplyTo: []string{}}
	if err := e.Apply(&b, true); err != nil {
		return store.Broadcast{}, err
	}
	var at *time.Time
	if send {
		if at, err = s.scheduleTime(scheduledAt); err != nil {
			return store.Broadcast{}, err
		}
		if err := s.checkSend(ctx, from, b); err != nil {
			return store.Broadcast{}, err
		}
	}
	created, err := s.store.Broadcasts.CreateBroadcast(ctx, b)
	if err != nil || !send {
		return created, err
	}
	return s.send(ctx, from, id, at)
}

// Update applies e to one of the team's drafts.
func (s *Service) Update(ctx context.Context, teamID, id uuid.UUID, e Edit) (store.Broadcast, error) {
	if e.Form && (e.Name == nil || strings.TrimSpace(*e.Name) == "") {
		return store.Broadcast{}, invalid.Missing("name")
	}
	if err := s.applyTemplate(ctx, teamID, &e); err != nil {
		return store.Broadcast{}, err
	}
	return s.store.Broadcasts.UpdateBroadcast(ctx, teamID, id, func(b *store.Broadcast) error { return e.Apply(b, false) })
}

// applyTemplate copies the published version of the team's template
// e.TemplateID, if any, into e, on a create as on an update: its subject
// when e gives none, and its body (html and text, or its component
// document). The broadcast keeps a copy: later edits of the template do
// not change it.
func (s *Service) applyTemplate(ctx context.Context, teamID uuid.UUID, e *Edit) error {
	if e.TemplateID == nil {
		return nil
	}
	ref := *e.TemplateID
	doc := bytes.TrimSpace(e.Components)
	if e.HTML != nil || e.Text != nil || (len(doc) > 0 && string(doc) != "null") {
		return invalid.Errorf("template_id", "Give either `template_id` or `html`, `text` and `components`, not both.")
	}
	t, err := s.store.Templates.TemplateByRef(ctx, teamID, ref)
	if errors.Is(err, store.ErrNotFound) {
		return invalid.Errorf("template_id", "Invalid `template_id` field: the team has no template %q.", ref)
	}
	if err != nil {
		return err
	}
	if t.Published == nil {
		return invalid.Errorf("template_id",
			"Invalid `template_id` field: the template %q is not published. Publish it first.", ref)
	}
	p := t.Published
	if (e.Subject == nil || *e.Subject == "") && p.Subject != nil {
		subject := *p.Subject
		e.Subject = &subject
	}
	if len(p.Components) > 0 {
		e.Components = append(json.RawMessage(nil), p.Components...)
		return nil
	}
	html, text := p.HTML, ""
	if p.Text != nil {
		text = *p.Text
	}
	e.HTML, e.Text = &html, &text
	return nil
}

// Get returns one of the team's broadcasts.
func (s *Service) Get(ctx context.Context, teamID, id uuid.UUID) (store.Broadcast, error) {
	return s.store.Broadcasts.Broadcast(ctx, teamID, id)
}

// List returns a page of the team's broadcasts, newest first, and whether
// there are more.
func (s *Service) List(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.Broadcast, bool, error) {
	return s.store.Broadcasts.ListBroadcasts(ctx, teamID, p)
}

// Counts returns how the emails of one of the team's broadcasts fared.
func (s *Service) Counts(ctx context.Context, teamID, id uuid.UUID) (store.BroadcastCounts, error) {
	return s.store.Broadcasts.BroadcastCounts(ctx, teamID, id)
}

// RecipientFilter selects the recipients Recipients lists: those of one
// kind (store.BroadcastRecipientKinds; "" is all), optionally only the
// address Email, and, with kind "bounced", only bounces of BounceType
// (store.BounceTypes; "" is any).
type RecipientFilter struct {
	Kind, Email, BounceType string
}

// Recipients returns a page of the recipients of one of the team's
// broadcasts that f selects, each by the id of its email, newest first.
func (s *Service) Recipients(ctx context.Context, teamID, id uuid.UUID, f RecipientFilter, p store.Page) (
	[]store.BroadcastRecipient, bool, error) {
	if f.Kind != "" && !slices.Contains(store.BroadcastRecipientKinds(), f.Kind) {
		return nil, false, invalid.Errorf("type", "The `type` parameter must be one of %s.",
			strings.Join(store.BroadcastRecipientKinds(), ", "))
	}
	if f.BounceType != "" {
		if !slices.Contains(store.BounceTypes(), f.BounceType) {
			return nil, false, invalid.Errorf("bounce_type", "The `bounce_type` parameter must be one of %s.",
				strings.Join(store.BounceTypes(), ", "))
		}
		if f.Kind != "bounced" {
			return nil, false, invalid.Errorf("bounce_type",
				"The `bounce_type` parameter is only valid when `type` is `bounced`.")
		}
	}
	if _, err := s.store.Broadcasts.Broadcast(ctx, teamID, id); err != nil {
		return nil, false, err
	}
	return s.store.Broadcasts.BroadcastRecipients(ctx, teamID, id, f.Kind, f.Email, f.BounceType, p)
}

// ClickedLink is one link of a broadcast with its clicks; ID is the
// link's cursor (LinkCursor).
type ClickedLink struct {
	ID uuid.UUID
	store.LinkClicks
}

// LinkCursor is the cursor of a clicked link: a name-based UUID of its
// URL, the same on every page.
func LinkCursor(url string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceURL, []byte(url)) }

// ClickedLinks returns a page of the links clicked in one of the team's
// broadcasts, most clicked first, with their human clicks and the
// recipients who clicked each. p's cursors are LinkCursor ids; one that
// names no clicked link starts from the first (after) or ends at the last
// (before) link.
func (s *Service) ClickedLinks(ctx context.Context, teamID, id uuid.UUID, p store.Page) ([]ClickedLink, bool, error) {
	if _, err := s.store.Broadcasts.Broadcast(ctx, teamID, id); err != nil {
		return nil, false, err
	}
	all, err := s.store.Broadcasts.BroadcastClickedLinks(ctx, teamID, id)
	if err != nil {
		return nil, false, err
	}
	links := make([]ClickedLink, len(all))
	at := -1
	for i, l := range all {
		links[i] = ClickedLink{ID: LinkCursor(l.URL), LinkClicks: l}
		if (p.After != nil && links[i].ID == *p.After) || (p.Before != nil && links[i].ID == *p.Before) {
			at = i
		}
	}
	switch {
	case p.After != nil:
		links = links[at+1:]
	case p.Before != nil:
		if at < 0 {
			at = len(links)
		}
		links = links[max(0, at-p.Limit):at]
		return links, at-p.Limit > 0, nil
	}
	if len(links) > p.Limit {
		return links[:p.Limit], true, nil
	}
	return links, false, nil
}

// SegmentContacts returns how many contacts each of the team's segments
// has, what the editor shows beside each segment.
func (s *Service) SegmentContacts(ctx context.Context, teamID uuid.UUID) (map[uuid.UUID]int64, error) {
	return s.store.Broadcasts.SegmentContactCounts(ctx, teamID)
}

// Delete removes one of the team's broadcasts and returns it.
func (s *Service) Delete(ctx context.Context, teamID, id uuid.UUID) (store.Broadcast, error) {
	return s.store.Broadcasts.DeleteBroadcast(ctx, teamID, id)
}

// CopyName is the name of a duplicate of a broadcast named name: "Copy of"
// it, cut to MaxName bytes on a character boundary.
func CopyName(name string) string {
	if strings.TrimSpace(name) == "" {
		name = "untitled broadcast"
	}
	out := strings.TrimSpace("Copy of " + name)
	for len(out) > MaxName {
		_, size := utf8.DecodeLastRuneInString(out)
		out = out[:len(out)-size]
	}
	return out
}

// Duplicate copies one of the team's broadcasts, whatever its status, into
// a new draft named name(the original's name); nil name is CopyName.
func (s *Service) Duplicate(ctx context.Context, teamID, id uuid.UUID, name func(string) string) (store.Broadcast, error) {
	if name == nil {
		name = CopyName
	}
	b, err := s.store.Broadcasts.Broadcast(ctx, teamID, id)
	if err != nil {
		return store.Broadcast{}, err
	}
	newID, err := uuid.NewV7()
	if err != nil {
		return store.Broadcast{}, err
	}
	return s.store.Broadcasts.DuplicateBroadcast(ctx, teamID, id, newID, name(b.Name))
}

// SendPlan is what sending a draft would do: when (nil: now), and to how
// many contacts as of now.
type SendPlan struct {
	At       *time.Time
	Contacts int64
}

// PlanSend checks that b could be sent at scheduledAt (empty: now), as
// Send checks it except for the sender, and says when and to how many
// contacts; nothing is changed.
func (s *Service) PlanSend(ctx context.Context, b store.Broadcast, scheduledAt string) (SendPlan, error) {
	at, err := s.scheduleTime(scheduledAt)
	if err != nil {
		return SendPlan{}, err
	}
	props, err := s.Properties(ctx, b.TeamID)
	if err != nil {
		return SendPlan{}, err
	}
	if err := CheckSendable(b, props); err != nil {
		return SendPlan{}, err
	}
	n, err := s.store.Broadcasts.BroadcastAudience(ctx, b.TeamID, *b.SegmentID, b.TopicID)
	if err != nil {
		return SendPlan{}, err
	}
	return SendPlan{At: at, Contacts: n}, nil
}

// Send sends one of the team's drafts now, or at scheduledAt when it is
// not empty.
func (s *Service) Send(ctx context.Context, from submit.Sender, id uuid.UUID, scheduledAt string) (store.Broadcast, error) {
	at, err := s.scheduleTime(scheduledAt)
	if err != nil {
		return store.Broadcast{}, err
	}
	return s.send(ctx, from, id, at)
}

// send sends the draft id at at (nil: now) and tells the outbox.
func (s *Service) send(ctx context.Context, from submit.Sender, id uuid.UUID, at *time.Time) (store.Broadcast, error) {
	b, err := s.store.Broadcasts.SendBroadcast(ctx, from.TeamID, id, at, func(b store.Broadcast) error { return s.checkSend(ctx, from, b) })
	if err == nil && s.outbox != nil {
		s.outbox.Notify()
	}
	return b, err
}

// Cancel cancels one of the team's broadcasts that is scheduled or under
// way, and wakes its workflow so that it ends now.
func (s *Service) Cancel(ctx context.Context, teamID, id uuid.UUID) (store.Broadcast, error) {
	b, err := s.store.Broadcasts.CancelBroadcast(ctx, teamID, id)
	if err != nil {
		return store.Broadcast{}, err
	}
	if s.waker != nil {
		// The cancel has committed: the workflow hands over no further
		// chunk whether or not it hears of it now.
		if err := s.waker.WakeBroadcast(ctx, id); err != nil {
			s.logger.Warn("waking canceled broadcast", "broadcast_id", id, "err", err)
		}
	}
	return b, nil
}

func (s *Service) scheduleTime(scheduledAt string) (*time.Time, error) {
	if scheduledAt == "" {
		return nil, nil
	}
	at, err := submit.ParseScheduledAt("scheduled_at", scheduledAt, s.now())
	if err != nil {
		return nil, err
	}
	return &at, nil
}

// checkSend refuses a broadcast that cannot be sent: incomplete, using
// variables no contact can fill, or from a sender the team may not use.
func (s *Service) checkSend(ctx context.Context, from submit.Sender, b store.Broadcast) error {
	props, err := s.Properties(ctx, b.TeamID)
	if err != nil {
		return err
	}
	if err := CheckSendable(b, props); err != nil {
		return err
	}
	_, _, err = s.submit.AuthorizeSender(ctx, from, b.From, "from")
	return err
}

// TestSubject prefixes the subject of a test send.
const TestSubject = "[Test] "

// SendTest sends one email of b, as it is now (a draft included), to
// address, rendered with the team's contact for that address if there is
// one: the way a marketer checks a broadcast in their own inbox. The
// unsubscribe link of a test leads nowhere. It goes through the send path
// like any email (the sandbox sender may write to the team's members).
func (s *Service) SendTest(ctx context.Context, from submit.Sender, b store.Broadcast, address string) (uuid.UUID, error) {
	if b.From == "" {
		return uuid.Nil, invalid.Missing("from")
	}
	if b.HTML == nil && b.Text == nil {
		return uuid.Nil, invalid.Errorf("html", "The broadcast has no content yet.")
	}
	c := store.BroadcastContact{Email: address}
	ct, err := s.store.Audience.Contact(ctx, b.TeamID, store.ContactRef{Email: address})
	switch {
	case err == nil:
		c = store.BroadcastContact{ID: ct.ID, Email: ct.Email, FirstName: ct.FirstName, LastName: ct.LastName,
			Properties: ct.Properties}
	case !errors.Is(err, store.ErrNotFound):
		return uuid.Nil, fmt.Errorf("reading contact: %w", err)
	}
	props, err := s.Properties(ctx, b.TeamID)
	if err != nil {
		return uuid.Nil, err
	}
	r, err := Render(b, c, props)
	if err != nil {
		return uuid.Nil, invalid.Errorf("html", "The broadcast cannot be rendered for %s: %s.", address, err)
	}
	subject := TestSubject + unsubscribe.ReplacePlaceholders(r.Subject, "#")
	req := submit.SendRequest{From: b.From, To: submit.AddressList{address}, ReplyTo: submit.AddressList(b.ReplyTo),
		Subject: &subject}
	if r.HTML != nil {
		h := unsubscribe.ReplacePlaceholders(*r.HTML, "#")
		req.HTML = &h
	}
	if r.Text != nil {
		t := unsubscribe.ReplacePlaceholders(*r.Text, "#")
		req.Text = &t
	}
	return s.submit.Send(ctx, from, req)
}
