package tracking

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/store"
)

// Event types of the email history that the endpoints record (the
// store's: they may repeat for a recipient, and move its state forward
// only).
const (
	EventOpened  = store.EventOpened
	EventClicked = store.EventClicked
)

// Store is the part of the store the endpoints use.
type Store interface {
	TrackedRecipient(ctx context.Context, teamID, emailID uuid.UUID, index int) (store.TrackedRecipient, error)
	RecordEvents(ctx context.Context, emailID uuid.UUID, events []store.Event) error
}

// Limiter rate-limits requests per key; *ratelimit.Local and
// *ratelimit.Redis implement it.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int) (ratelimit.Result, error)
}

// Notifier is told when webhook messages were queued (the outbox
// dispatcher).
type Notifier interface{ Notify() }

// DefaultRate is the requests per second a client address may make to
// the endpoints. Image proxies fetch the pixels of many users from few
// addresses, so it is not small.
const DefaultRate = 50

// Config wires a Handler.
type Config struct {
	Sealer *Sealer // opens the tokens; required
	// Limiter bounds the requests of each client address (Rate per
	// second, burst the same); nil turns the limit off.
	Limiter Limiter
	Rate    int // default DefaultRate
	Outbox  Notifier
	// SharedHost is the operator's tracking host (POSTHASTE_TRACKING_HOST,
	// normalised; see NormalizeHost), the CNAME target of every domain's
	// tracking host: a token bound to a host is served on it too.
	SharedHost string
	// TeamHost reports whether host, a request's normalised host, is the
	// tracking host of a live domain of team teamID with tracking on. It
	// may query the database, so it is called only for requests that
	// passed the rate limit and carry a valid token that may be served on
	// host; nil takes every such host for one.
	TeamHost func(ctx context.Context, teamID uuid.UUID, host string) (bool, error)
	Logger   *slog.Logger
	Now      func() time.Time // default time.Now
}

// Handler serves the tracking endpoints: OpenPath<token>, the open pixel,
// and ClickPath<token>, a redirect to the link's URL. Each hit is recorded
// in the recipient's history (an `opened` or `clicked` event with the
// client's address and user agent, and whether Classify takes it for a
// machine's), which queues the email.opened or email.clicked webhooks.
// Anything but a valid token of the path's kind, on a host it may be
// served on (see allowed), is 404. Tokens are never logged.
type Handler struct {
	cfg    Config
	store  Store
	logger *slog.Logger
}

// NewHandler returns the endpoints.
func NewHandler(cfg Config, st Store) (*Handler, error) {
	if cfg.Sealer == nil {
		return nil, errors.New("tracking: no sealer")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, store: st, logger: cfg.Logger.With("component", "tracking")}, nil
}

// Pixel is the open pixel: a transparent 1×1 GIF.
var Pixel = []byte{
	'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff,
	'!', 0xf9, 4, 1, 0, 0, 0, 0, ',', 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 'D', 1, 0, ';',
}

// ServeTracking answers GET (and HEAD) on OpenPath<token> and
// ClickPath<token>; client is the request's client address (behind
// trusted proxies, the one they name), which the rate limit is kept by.
// The checks run cheapest first so that what an anonymous client can
// make the server do is bounded: the rate limit, then the token and the
// host it is bound to (no I/O), then the host's domain (TeamHost, a
// query), then the recording.
func (h *Handler) ServeTracking(w http.ResponseWriter, r *http.Request, client string) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store, max-age=0")
	hd.Set("Referrer-Policy", "no-referrer") // the path holds the token
	hd.Set("X-Content-Type-Options", "nosniff")
	if h.cfg.Limiter != nil {
		res, err := h.cfg.Limiter.Allow(r.Context(), "tracking:"+client, h.cfg.Rate)
		if err != nil {
			// Fail open: the links in delivered mail must keep working.
			h.logger.Warn("rate limiter unavailable", "err", err)
		} else if !res.Allowed {
			hd.Set("Retry-After", fmt.Sprint(res.RetryAfterSeconds()))
			plain(w, http.StatusTooManyRequests, "Too many requests: try again later.")
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	kind, text := Open, ""
	if t, ok := strings.CutPrefix(r.URL.Path, OpenPath); ok {
		text = t
	} else if t, ok := strings.CutPrefix(r.URL.Path, ClickPath); ok {
		kind, text = Click, t
	}
	tok, err := h.cfg.Sealer.Open(text) // "" and over-long texts too are ErrInvalid
	if err != nil || tok.Kind != kind {
		plain(w, http.StatusNotFound, "Not found.")
		return
	}
	switch h.allowed(r, tok) {
	case refused:
		plain(w, http.StatusNotFound, "Not found.")
		return
	case unknown:
		hd.Set("Retry-After", "60")
		plain(w, http.StatusServiceUnavailable, "Service unavailable: try again later.")
		return
	}
	h.record(r, client, tok)
	if kind == Open {
		hd.Set("Content-Type", "image/gif")
		hd.Set("Content-Length", fmt.Sprint(len(Pixel)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(Pixel)
		}
		return
	}
	// The URL was sealed in the token: it is the link as it was sent.
	hd.Set("Location", tok.URL)
	w.WriteHeader(http.StatusFound)
}

// The answers of allowed.
const (
	served  = iota // the token may be served on the request's host
	refused        // it may not
	unknown        // it cannot be told now
)

// allowed says whether tok may be served on r's host, so that a token of
// one team never redirects, nor is recorded, under another team's domain
// (and certificate). A token bound to a host (Token.Host) is served on the
// operator's shared tracking host, and on the host it was issued for while
// that is a tracking host of the token's team (TeamHost: the domain may
// have been deleted, or gone to another team). A failed lookup counts as
// one: like the limiter, the check fails open, for the links in delivered
// mail must keep working while the database is unwell (the recording fails
// then too, and is only logged), and the host was checked against the
// token already. A token of the first format, which names no host, is
// served only on a tracking host of its team; as nothing but the lookup
// vouches for the host, a failed one is unknown (503).
func (h *Handler) allowed(r *http.Request, tok Token) int {
	host, ok := NormalizeHost(r.Host)
	if !ok {
		return refused
	}
	if tok.Host != "" {
		if host == h.cfg.SharedHost {
			return served
		}
		if host != tok.Host {
			return refused
		}
	}
	if h.cfg.TeamHost == nil {
		return served
	}
	known, err := h.cfg.TeamHost(r.Context(), tok.TeamID, host)
	switch {
	case err != nil && tok.Host != "":
		h.logger.Warn("looking up a tracking host", "host", host, "err", err)
		return served
	case err != nil:
		h.logger.Warn("looking up a tracking host", "host", host, "err", err)
		return unknown
	case known:
		return served
	}
	return refused
}

// NormalizeHost returns the host of hostport, a request's Host, as
// tracking hosts are compared: lower case, without the port, the brackets
// of an IPv6 literal or a trailing dot. ok is false when the host is empty,
// longer than a DNS name (253 octets, RFC 1035 §2.3.4), or holds a
// character that neither a host name nor an IP literal has.
func NormalizeHost(hostport string) (host string, ok bool) {
	host = hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || len(host) > 253 {
		return "", false
	}
	for _, c := range []byte(host) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == ':':
		default:
			return "", false
		}
	}
	return host, true
}

// record records the hit in the recipient's history. A failure is logged,
// not answered: the pixel and the link are served all the same.
func (h *Handler) record(r *http.Request, client string, tok Token) {
	ctx := r.Context()
	rcpt, err := h.store.TrackedRecipient(ctx, tok.TeamID, tok.EmailID, tok.Recipient)
	if errors.Is(err, store.ErrNotFound) {
		return // the email was deleted
	}
	if err != nil {
		h.logger.Warn("looking up a tracked recipient", "email", tok.EmailID, "err", err)
		return
	}
	if !store.Trackable(rcpt.Status) {
		return
	}
	now := h.cfg.Now()
	ip, _ := netip.ParseAddr(client)
	ua := r.UserAgent()
	machine, reason := Classify(Hit{Kind: tok.Kind, Method: r.Method, UserAgent: ua, IP: ip, At: now,
		Delivered: rcpt.DeliveredAt})
	detail := map[string]any{
		"ipAddress": client,
		"userAgent": ua,
		"timestamp": now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"machine":   machine,
	}
	if machine {
		detail["machineReason"] = reason
	}
	typ := EventOpened
	if tok.Kind == Click {
		typ = EventClicked
		detail["link"] = tok.URL
		detail["linkIndex"] = tok.Link
	}
	ev := store.Event{Type: typ, Recipient: rcpt.Address, Detail: detail, CreatedAt: now}
	if err := h.store.RecordEvents(ctx, tok.EmailID, []store.Event{ev}); err != nil {
		h.logger.Warn("recording a tracked "+tok.Kind.String(), "email", tok.EmailID, "err", err)
		return
	}
	if h.cfg.Outbox != nil {
		h.cfg.Outbox.Notify()
	}
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
