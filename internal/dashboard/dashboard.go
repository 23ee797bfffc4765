// Package dashboard serves Posthaste's web dashboard under /dashboard/:
// server-rendered pages (html/template, embedded assets, a little
// progressive JavaScript for charts and copy buttons; every form works
// without it) behind a password login with sessions stored in PostgreSQL
// and CSRF tokens on every form. Domains and webhook endpoints are managed
// through the same use cases as the API (internal/domains,
// webhook.Endpoints); contacts, segments, topics and email templates with
// the API's checks (internal/audience, templates.Service) and events,
// contact imports through internal/imports, broadcasts through
// broadcast.Service, automations and their runs through
// automations.Service, and the request log, metrics and account health
// through internal/usage. Team owners also see the installation's IP
// pools and the warm-up of their addresses.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/auththrottle"
	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/usage"
	"github.com/posthaste/posthaste/internal/webhook"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Config wires the dashboard.
type Config struct {
	// The dashboard reads and changes data only through these services,
	// the use cases it shares with the API, each built once by the caller
	// (cmd/posthaste) and handed to both. Each is required (New refuses a
	// Config without it) unless its comment says otherwise.
	//
	// Domains, Webhooks and DataRequests serve their pages.
	Domains      *domains.Service
	Webhooks     *webhook.Endpoints
	DataRequests *datareq.Service
	// Accounts is the accounts service (API keys, members, invitations,
	// sessions, second factor, the reservations of system mail).
	Accounts *account.Service
	// Audience serves the pages of contacts, segments and topics.
	Audience *audience.Service
	// Imports queues the contact imports uploaded on the Contacts pages
	// and reads them back.
	Imports *imports.Service
	// Templates serves the pages of email templates.
	Templates *templates.Service
	// AuditLog records the actions written after the fact (sign-ins) and
	// serves the Audit log page.
	AuditLog *auditlog.Log
	// Usage reads the team's request log, email metrics and account
	// health (the Logs and Metrics pages).
	Usage *usage.Service
	// Broadcasts creates, edits, tests and sends broadcasts; nil hides the
	// Broadcasts page.
	Broadcasts *broadcast.Service
	// Automations keeps the team's automations and reads their runs; nil
	// hides the Automations page.
	Automations *automations.Service
	// Emails reads sent emails and keeps the suppression list; Received
	// reads received mail.
	Emails   *submit.Emails
	Received *receiving.Service
	// Auth drops revoked API keys from the key cache of this process.
	Auth *auth.Authenticator
	// TemporalUIURL links each email to its workflow; "" hides the link.
	TemporalUIURL string
	// Namespace is the Temporal namespace of the workflows.
	Namespace string
	// Records is the operator's side of the DNS records domains publish.
	Records records.Config
	// Keys seals TOTP secrets; nil makes two-factor setup unavailable.
	// (The Domains and Webhooks services seal DKIM keys and signing
	// secrets with their own.)
	Keys *seal.Box
	// SMTP is what the quick-start page tells mail clients.
	SMTP SMTPSettings
	// OAuth offers sign-in through Google and GitHub when configured.
	OAuth OAuth
	// InboundBudget is the default inbound budget of a team's receiving
	// domains, which the Receiving page shows when it is nearly spent.
	InboundBudget inmail.Budget
	// PublicURL is where browsers reach the dashboard's server, e.g.
	// https://mail.example.com: the base of the links in emails and of the
	// OAuth callbacks (PublicURL/dashboard/oauth/…). "" → http://localhost:3000.
	PublicURL string
	// Mailer sends invitations and password-reset links; nil shows owners
	// the invitation link to pass on and makes password reset unavailable.
	Mailer Mailer
	// MailLimits bound the invitation and password-reset emails per team
	// and per address; zero fields take the defaults.
	MailLimits MailLimits
	// SecureCookies marks cookies Secure; set it when served over TLS.
	SecureCookies bool
	// SessionIdleTimeout ends a session unused this long
	// (POSTHASTE_SESSION_IDLE_TIMEOUT); 0 → only the absolute lifetime.
	SessionIdleTimeout time.Duration
	// Now is the dashboard's clock (throttles, sessions, links); nil → time.Now.
	Now func() time.Time
	// TrustedProxies are the addresses or CIDRs of reverse proxies whose
	// X-Forwarded-For names the client (POSTHASTE_TRUSTED_PROXIES), for
	// the throttles of sign-in and the other forms shown before it.
	TrustedProxies []string
	// Passwords hashes and checks passwords, at its cost; nil →
	// password.Shared(), the default cost, which production keeps (tests
	// pass a cheaper Pool).
	Passwords *password.Pool
	// Warmup is the warm-up schedule of pool addresses
	// (POSTHASTE_WARMUP_SCHEDULE) and WarmupOverflow what becomes of mail
	// over it (POSTHASTE_WARMUP_OVERFLOW), which the IP pools page shows;
	// DefaultPool names the default pool.
	Warmup         ippool.Schedule
	WarmupOverflow string
	DefaultPool    string
	Logger         *slog.Logger
}

// Mailer sends the dashboard's own emails through Posthaste. They carry
// secret links, so an implementation must send them where no team's members
// can read them back.
type Mailer interface {
	SendMail(ctx context.Context, m Mail) error
}

// Mail is one plain-text email to one address.
type Mail struct {
	To      string
	Subject string
	Text    string
}

// Handler serves the dashboard. Construct with New.
type Handler struct {
	cfg      Config
	pages    map[string]*template.Template
	mux      *http.ServeMux
	logger   *slog.Logger
	throttle *auththrottle.Throttle
	// domainSvc and endpoints are the use cases shared with the API.
	domainSvc *domains.Service
	endpoints *webhook.Endpoints
	// dataReqs serves the Data requests page.
	dataReqs *datareq.Service
	// accounts changes and reads keys, members, invitations and sessions.
	accounts *account.Service
	// auditSvc records the actions written after the fact (audit.go) and
	// serves the Audit log page.
	auditSvc *auditlog.Log
	// proxies are the parsed Config.TrustedProxies.
	proxies   []netip.Prefix
	passwords *password.Pool
	oidc      oidcProviders
	now       func() time.Time
	// background counts the password-reset emails being sent.
	background sync.WaitGroup
	// The pages of each area, which embed the Handler for what they
	// share: rendering, sessions, CSRF tokens, throttles, the audit log.
	signInHandler     *signInHandler
	teamHandler       *teamHandler
	overviewHandler   *overviewHandler
	receivingHandler  *receivingHandler
	domainsHandler    *domainsHandler
	webhooksHandler   *webhooksHandler
	privacyHandler    *privacyHandler
	audienceHandler   *audienceHandler
	templatesHandler  *templatesHandler
	broadcastsHandler *broadcastsHandler
	// automationsHandler serves the Automations pages (automations.go).
	automationsHandler *automationsHandler
}

// New parses the templates and builds the routes.
func New(cfg Config) (*Handler, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://localhost:3000"
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	h := &Handler{cfg: cfg, logger: cfg.Logger.With("component", "dashboard"),
		throttle: auththrottle.New(), passwords: cfg.Passwords, now: cfg.Now, pages: map[string]*template.Template{}}
	h.signInHandler = &signInHandler{h}
	h.teamHandler = &teamHandler{h}
	h.overviewHandler = &overviewHandler{Handler: h, usage: cfg.Usage}
	h.receivingHandler = &receivingHandler{h}
	h.domainsHandler = &domainsHandler{h}
	h.webhooksHandler = &webhooksHandler{h}
	h.privacyHandler = &privacyHandler{h}
	h.audienceHandler = &audienceHandler{Handler: h, svc: cfg.Audience, imports: cfg.Imports}
	h.templatesHandler = &templatesHandler{Handler: h, svc: cfg.Templates}
	h.broadcastsHandler = &broadcastsHandler{h}
	h.automationsHandler = &automationsHandler{Handler: h, svc: cfg.Automations}
	if h.passwords == nil {
		h.passwords = password.Shared()
	}
	var err error
	if h.proxies, err = parseProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("trusted proxies: %w", err)
	}
	h.domainSvc, h.endpoints, h.dataReqs, h.auditSvc = cfg.Domains, cfg.Webhooks, cfg.DataRequests, cfg.AuditLog
	h.accounts = cfg.Accounts
	funcs := template.FuncMap{"fmtTime": fmtTime, "badge": badge, "join": strings.Join,
		"deref": func(p *int) int { return *p }, "prose": prose, "has": slices.Contains[[]string],
		"broadcastsOn": func() bool { return cfg.Broadcasts != nil }, "automationsOn": func() bool { return cfg.Automations != nil }}
	for _, page := range []string{"login", "emails", "email", "metrics", "domains", "apikeys", "suppressions", "mfa", "account", "webhooks", "webhook_event", "logs", "log", "team", "invite", "forgot", "reset",
		"domain", "domain_delete", "webhook", "webhook_delete", "quickstart",
		// Contacts, segments, topics and templates (audience.go and friends).
		"contacts", "contact", "contact_delete", "segments", "segment", "segment_delete", "topics", "topic", "topic_delete",
		"email_templates", "email_template", "email_template_delete", "contact_imports", "contact_import",
		// Received emails (receiving.go).
		"receiving", "received",
		// Broadcasts (broadcasts.go).
		"broadcasts", "broadcast",
		// Automations and their runs (automations.go).
		"automations", "automation", "automation_delete", "automation_runs", "automation_run",
		// IP pools and their warm-up (ippools.go).
		"ippools",
		// The audit log (audit.go).
		"audit",
		// Data subject requests (datarequests.go).
		"data_requests"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials*.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		h.pages[page] = t
	}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle("GET /dashboard/assets/", http.StripPrefix("/dashboard/assets/", cacheable(http.FileServerFS(assets))))
	m.HandleFunc("GET /dashboard/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dashboard/emails", http.StatusSeeOther)
	})
	h.signInHandler.routes(m)
	h.teamHandler.routes(m)
	h.overviewHandler.routes(m)
	h.receivingHandler.routes(m)
	h.domainsHandler.routes(m)
	h.webhooksHandler.routes(m)
	h.privacyHandler.routes(m)
	h.audienceHandler.routes(m)
	h.templatesHandler.routes(m)
	h.broadcastsHandler.routes(m)
	h.automationsHandler.routes(m)
	h.mux = m
	return h, nil
}

// check refuses a Config without one of its required services.
func (cfg Config) check() error {
	var missing []string
	for _, s := range []struct {
		name string
		nil  bool
	}{
		{"Domains", cfg.Domains == nil}, {"Webhooks", cfg.Webhooks == nil}, {"DataRequests", cfg.DataRequests == nil},
		{"Accounts", cfg.Accounts == nil}, {"Audience", cfg.Audience == nil}, {"Imports", cfg.Imports == nil},
		{"Templates", cfg.Templates == nil}, {"AuditLog", cfg.AuditLog == nil}, {"Usage", cfg.Usage == nil},
		{"Emails", cfg.Emails == nil}, {"Received", cfg.Received == nil},
	} {
		if s.nil {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dashboard: Config lacks required services: %s", strings.Join(missing, ", "))
	}
	return nil
}

// ServeHTTP implements http.Handler with the dashboard's security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	if !strings.HasSuffix(r.URL.Path, "/preview") {
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-src 'self'; "+
			"frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Frame-Options", "DENY")
	}
	h.mux.ServeHTTP(w, h.withClient(r))
}

func cacheable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// render writes a page; data is the page's own value.
func (h *Handler) render(w http.ResponseWriter, status int, page string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := h.pages[page].Execute(w, v); err != nil {
		h.logger.Error("rendering page", "page", page, "err", err)
	}
}

// view is what every template gets.
type view struct {
	Title   string
	Nav     string // active navigation entry
	Session *store.Session
	CSRF    string
	Data    any
}

// fail answers an error: 503 with Retry-After when the password pool is
// saturated or the client left (not logged: it is what a flood looks
// like); otherwise 500, logging err with the route's pattern, never the
// path: the paths of invitation and reset links hold their tokens.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if busy(err) {
		retryAfter(w, busyRetry)
		http.Error(w, serverBusy, http.StatusServiceUnavailable)
		return
	}
	h.logger.Error("dashboard request failed", "route", r.Pattern, "err", err)
	http.Error(w, "Something went wrong. Try again.", http.StatusInternalServerError)
}

// byPathID runs load with the {id} path value of r. A malformed or unknown
// id answers 404 (another team's ids are unknown), any other error 500;
// ok is false when it answered.
func byPathID[T any](h *Handler, w http.ResponseWriter, r *http.Request, load func(uuid.UUID) (T, error)) (v T, ok bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return v, false
	}
	if v, err = load(id); err != nil {
		h.failOr404(w, r, err)
		return v, false
	}
	return v, true
}

// failOr404 answers an error of a store lookup: 404 for ErrNotFound.
func (h *Handler) failOr404(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrNotFound) {
		http.NotFound(w, r)
		return
	}
	h.fail(w, r, err)
}

// link is the absolute URL of a dashboard path, for emails.
func (h *Handler) link(path string) string { return h.cfg.PublicURL + path }

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// prose shows a message of the API's vocabulary to a person: `field`
// quotes become <code> elements, everything else is escaped.
func prose(msg string) template.HTML {
	parts := strings.Split(msg, "`")
	var b strings.Builder
	for i, p := range parts {
		p = template.HTMLEscapeString(p)
		if i%2 == 1 && i < len(parts)-1 {
			p = "<code>" + p + "</code>"
		} else if i%2 == 1 {
			p = "`" + p // an unmatched quote stays as it was
		}
		b.WriteString(p)
	}
	return template.HTML(b.String()) //nolint:gosec // every part is escaped above
}

// badge is the CSS class of a state badge.
func badge(state string) string {
	switch state {
	case store.EventDelivered, store.EventOpened, store.EventClicked, store.EventSent, store.DomainVerified,
		store.WebhookEnabled, store.MessageSuccess:
		return "ok"
	case store.EventBounced, store.EventComplained, store.EventFailed, store.EventSuppressed, store.WebhookDisabled:
		return "bad"
	case store.EventDeliveryDelayed, store.EventScheduled, store.EventQueued, store.DomainPending,
		store.DomainTemporaryFailure, store.MessageAttempting:
		return "wait"
	}
	return "neutral"
}
