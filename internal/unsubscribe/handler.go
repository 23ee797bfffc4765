package unsubscribe

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/store"
)

// Store is the part of the store the endpoints use. The contact changes
// are the API's (store.CreateContact, UpdateContact, UpdateContactTopics),
// and so are the webhook events they write with them (emit).
type Store interface {
	Contact(ctx context.Context, teamID uuid.UUID, ref store.ContactRef) (store.Contact, error)
	CreateContact(ctx context.Context, c store.Contact, segments []uuid.UUID, topics []store.TopicChoice,
		emit ...string) (store.Contact, error)
	UpdateContact(ctx context.Context, teamID uuid.UUID, ref store.ContactRef, u store.ContactUpdate,
		emit ...string) (store.Contact, error)
	UpdateContactTopics(ctx context.Context, teamID, contactID uuid.UUID, topics []store.TopicChoice, emit ...string) error
	ContactTopics(ctx context.Context, teamID, contactID uuid.UUID, p store.Page) ([]store.ContactTopic, bool, error)
	ListTopics(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.Topic, bool, error)
	RecordBroadcastUnsubscribe(ctx context.Context, teamID, broadcastID, emailID uuid.UUID, email string) error
}

// Limiter rate-limits requests per key; *ratelimit.Local and
// *ratelimit.Redis implement it.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int) (ratelimit.Result, error)
}

// Config wires a Handler.
type Config struct {
	Sealer *Sealer // opens the tokens; required
	// PublicURL is where browsers reach this server
	// (POSTHASTE_PUBLIC_URL): a preferences form posted from another
	// origin is refused. "" checks no origin.
	PublicURL string
	// Limiter bounds the requests of each client address (Rate per
	// second, burst the same); nil turns the limit off.
	Limiter Limiter
	Rate    int // default DefaultRate
	Logger  *slog.Logger
}

// DefaultRate is the requests per second a client address may make to
// the endpoints. Mailbox providers send the one-click POSTs of many users
// from few addresses, so it is not small.
const DefaultRate = 20

// MaxBody bounds a POST body: a one-click POST is 26 bytes, the
// preferences form a few kilobytes.
const MaxBody = 16 << 10

// maxTopics bounds the topics a page lists (and a form may change).
const maxTopics = 500

//go:embed templates
var templateFS embed.FS

// Handler serves Path: the one-click POST of RFC 8058, the preferences
// page and its form. It needs no session: the token in the path is the
// capability. Tokens are never logged.
type Handler struct {
	cfg    Config
	store  Store
	page   *template.Template
	origin string // of cfg.PublicURL; "" checks none
	logger *slog.Logger
}

// NewHandler returns the endpoints.
func NewHandler(cfg Config, st Store) (*Handler, error) {
	if cfg.Sealer == nil {
		return nil, errors.New("unsubscribe: no sealer")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	page, err := template.ParseFS(templateFS, "templates/page.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the preferences page: %w", err)
	}
	h := &Handler{cfg: cfg, store: st, page: page, logger: cfg.Logger.With("component", "unsubscribe")}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil {
			return nil, fmt.Errorf("public URL: %w", err)
		}
		h.origin = u.Scheme + "://" + u.Host
	}
	return h, nil
}

// ServeUnsubscribe answers GET and POST on Path<token>; client is the
// request's client address (behind trusted proxies, the one they name),
// which the rate limit is kept by.
func (h *Handler) ServeUnsubscribe(w http.ResponseWriter, r *http.Request, client string) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer") // the path holds the token
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'")
	if h.cfg.Limiter != nil {
		res, err := h.cfg.Limiter.Allow(r.Context(), "unsubscribe:"+client, h.cfg.Rate)
		if err != nil {
			// Fail open: honouring an unsubscribe matters more than the
			// limit while Redis is away.
			h.logger.Warn("rate limiter unavailable", "err", err)
		} else if !res.Allowed {
			hd.Set("Retry-After", fmt.Sprint(res.RetryAfterSeconds()))
			plain(w, http.StatusTooManyRequests, "Too many requests: try again later.")
			return
		}
	}
	text, ok := strings.CutPrefix(r.URL.Path, Path)
	if !ok || text == "" || strings.Contains(text, "/") {
		plain(w, http.StatusNotFound, "This link is not valid.")
		return
	}
	tok, err := h.cfg.Sealer.Open(text)
	if err != nil {
		plain(w, http.StatusNotFound, "This link is not valid.")
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.showPage(w, r, tok, pageState{})
	case http.MethodPost:
		h.post(w, r, tok)
	default:
		hd.Set("Allow", "GET, POST")
		plain(w, http.StatusMethodNotAllowed, "Method not allowed.")
	}
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// post handles the one-click POST (RFC 8058 §3.2: the body is
// List-Unsubscribe=One-Click, sent as multipart/form-data or
// application/x-www-form-urlencoded, without cookies or other context) and
// the preferences form (form=preferences).
func (h *Handler) post(w http.ResponseWriter, r *http.Request, tok Token) {
	form, err := readForm(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			plain(w, http.StatusRequestEntityTooLarge, "The request body is too large.")
			return
		}
		plain(w, http.StatusBadRequest, "The request body is not a form.")
		return
	}
	switch {
	case form.Get("form") == "preferences":
		if o := r.Header.Get("Origin"); h.origin != "" && o != "" && o != h.origin {
			plain(w, http.StatusForbidden, "This form may only be sent from its own page.")
			return
		}
		if err := h.savePreferences(r.Context(), tok, form); err != nil {
			h.fail(w, tok, err)
			return
		}
		h.showPage(w, r, tok, pageState{saved: true})
	case form.Get("List-Unsubscribe") == "One-Click":
		if err := h.oneClick(r.Context(), tok); err != nil {
			h.fail(w, tok, err)
			return
		}
		plain(w, http.StatusOK, "You are unsubscribed.")
	default:
		plain(w, http.StatusBadRequest, "Expected List-Unsubscribe=One-Click (RFC 8058) or the preferences form.")
	}
}

func (h *Handler) fail(w http.ResponseWriter, tok Token, err error) {
	h.logger.Error("changing subscriptions", "team_id", tok.TeamID, "email_id", tok.EmailID, "err", err)
	plain(w, http.StatusInternalServerError, "Something went wrong: try again later.")
}

// readForm reads a POST body of at most MaxBody bytes as a form: multipart
// or URL-encoded, whatever the content type says otherwise (some senders
// of one-click POSTs send none).
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		if err := r.ParseMultipartForm(MaxBody); err != nil {
			return nil, err
		}
		if r.MultipartForm != nil {
			_ = r.MultipartForm.RemoveAll()
		}
		return r.PostForm, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	return url.ParseQuery(string(bytes.TrimSpace(body)))
}

// topicState is a listed topic with the address's subscription to it.
type topicState struct {
	ID          uuid.UUID
	Name        string
	Description string
	Subscribed  bool
}

// subscriptions returns the address's contact (nil when it has none) and
// the topics the page lists: the team's public topics and the token's own,
// with the contact's effective subscription (its choice, else the topic's
// default).
func (h *Handler) subscriptions(ctx context.Context, tok Token) (*store.Contact, []topicState, error) {
	var ct *store.Contact
	c, err := h.store.Contact(ctx, tok.TeamID, store.ContactRef{Email: tok.Email})
	switch {
	case err == nil:
		ct = &c
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, fmt.Errorf("loading contact: %w", err)
	}
	var out []topicState
	add := func(t store.Topic, sub string) {
		if t.Visibility == "public" || (tok.TopicID != nil && t.ID == *tok.TopicID) {
			out = append(out, topicState{ID: t.ID, Name: t.Name, Description: t.Description, Subscribed: sub == store.TopicOptIn})
		}
	}
	p := store.Page{Limit: 100}
	for seen := 0; seen < maxTopics; {
		var more bool
		var last uuid.UUID
		if ct != nil {
			list, m, err := h.store.ContactTopics(ctx, tok.TeamID, ct.ID, p)
			if err != nil {
				return nil, nil, fmt.Errorf("loading topics: %w", err)
			}
			for _, t := range list {
				add(t.Topic, t.Subscription)
				last = t.ID
			}
			seen, more = seen+len(list), m && len(list) > 0
		} else {
			list, m, err := h.store.ListTopics(ctx, tok.TeamID, p)
			if err != nil {
				return nil, nil, fmt.Errorf("loading topics: %w", err)
			}
			for _, t := range list {
				add(t, t.DefaultSubscription)
				last = t.ID
			}
			seen, more = seen+len(list), m && len(list) > 0
		}
		if !more {
			break
		}
		p.After = &last
	}
	return ct, out, nil
}

// Unsubscribe does for tok what its one-click POST does (oneClick), for
// callers other than the endpoints (the inbound MX's mailto unsubscribe
// addresses): the same changes through st, with the same webhook events
// written in their transactions, failures logged to logger (may be nil).
// Doing it again changes nothing.
func Unsubscribe(ctx context.Context, st Store, logger *slog.Logger, tok Token) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{store: st, logger: logger.With("component", "unsubscribe")}
	return h.oneClick(ctx, tok)
}

// oneClick unsubscribes the token's address from its topic, or from
// everything when the token has none, creating the contact if the team
// has none for the address. Doing it again changes nothing.
func (h *Handler) oneClick(ctx context.Context, tok Token) error {
	ct, topics, err := h.subscriptions(ctx, tok)
	if err != nil {
		return err
	}
	if tok.TopicID == nil {
		if ct != nil && ct.Unsubscribed {
			return nil
		}
		return h.apply(ctx, tok, ct, nil, true)
	}
	for _, t := range topics {
		if t.ID == *tok.TopicID {
			if !t.Subscribed {
				return nil // opted out already (or never opted in)
			}
			return h.apply(ctx, tok, ct, []store.TopicChoice{{TopicID: t.ID, Subscription: store.TopicOptOut}},
				ct != nil && ct.Unsubscribed)
		}
	}
	return nil // the topic was deleted: none of its mail can come
}

// savePreferences applies the preferences form: every listed topic is
// subscribed when checked and unsubscribed when not; "everything"
// unsubscribes from all mail.
func (h *Handler) savePreferences(ctx context.Context, tok Token, form url.Values) error {
	ct, topics, err := h.subscriptions(ctx, tok)
	if err != nil {
		return err
	}
	checked := map[string]bool{}
	for _, id := range form["topic"] {
		checked[id] = true
	}
	var changes []store.TopicChoice
	for _, t := range topics {
		want := checked[t.ID.String()]
		if want == t.Subscribed {
			continue
		}
		sub := store.TopicOptOut
		if want {
			sub = store.TopicOptIn
		}
		changes = append(changes, store.TopicChoice{TopicID: t.ID, Subscription: sub})
	}
	return h.apply(ctx, tok, ct, changes, form.Get("everything") == "on")
}

// apply makes the changes, creating the contact when there is none, and
// emits the webhook events the API's contact changes emit.
func (h *Handler) apply(ctx context.Context, tok Token, ct *store.Contact, changes []store.TopicChoice, unsubscribed bool) error {
	if err := h.applyChanges(ctx, tok, ct, changes, unsubscribed); err != nil {
		return err
	}
	if tok.BroadcastID == nil {
		return nil
	}
	left := unsubscribed && (ct == nil || !ct.Unsubscribed)
	for _, c := range changes {
		left = left || (c.Subscription == store.TopicOptOut && tok.TopicID != nil && c.TopicID == *tok.TopicID)
	}
	if !left {
		return nil
	}
	// The broadcast's report counts who left through its email.
	return h.store.RecordBroadcastUnsubscribe(ctx, tok.TeamID, *tok.BroadcastID, tok.EmailID, tok.Email)
}

// applyChanges makes the changes of apply.
func (h *Handler) applyChanges(ctx context.Context, tok Token, ct *store.Contact, changes []store.TopicChoice, unsubscribed bool) error {
	if ct == nil {
		if len(changes) == 0 && !unsubscribed {
			return nil // nothing to remember
		}
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		events := []string{audience.EventContactCreated}
		if len(changes) > 0 {
			events = append(events, audience.EventContactTopicsUpdated)
		}
		_, err = h.store.CreateContact(ctx, store.Contact{ID: id, TeamID: tok.TeamID, Email: tok.Email,
			Unsubscribed: unsubscribed}, nil, changes, events...)
		if errors.Is(err, store.ErrConflict) {
			// Created meanwhile (another click): change that one.
			existing, err := h.store.Contact(ctx, tok.TeamID, store.ContactRef{Email: tok.Email})
			if err != nil {
				return fmt.Errorf("loading contact: %w", err)
			}
			return h.applyChanges(ctx, tok, &existing, changes, unsubscribed)
		}
		return err
	}
	if len(changes) > 0 {
		if err := h.store.UpdateContactTopics(ctx, tok.TeamID, ct.ID, changes, audience.EventContactTopicsUpdated); err != nil {
			return err
		}
	}
	if unsubscribed != ct.Unsubscribed {
		id := ct.ID
		if _, err := h.store.UpdateContact(ctx, tok.TeamID, store.ContactRef{ID: &id},
			store.ContactUpdate{Unsubscribed: &unsubscribed}, audience.EventContactUpdated); err != nil {
			return err
		}
	}
	return nil
}

type pageState struct {
	saved bool
}

// pageData is what the preferences page shows.
type pageData struct {
	Email        string
	Action       string
	Topics       []topicState
	Unsubscribed bool
	Saved        bool
	Error        string
}

func (h *Handler) showPage(w http.ResponseWriter, r *http.Request, tok Token, st pageState) {
	ct, topics, err := h.subscriptions(r.Context(), tok)
	if err != nil {
		h.fail(w, tok, err)
		return
	}
	d := pageData{Email: tok.Email, Action: r.URL.Path, Topics: topics, Saved: st.saved}
	if ct != nil {
		d.Unsubscribed = ct.Unsubscribed
	}
	var buf bytes.Buffer
	if err := h.page.Execute(&buf, d); err != nil {
		h.fail(w, tok, fmt.Errorf("rendering the preferences page: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}
