// Package api is Posthaste's HTTP API: the gin router, its middleware
// (request ids, metrics, the request log, authentication, rate limits) and
// the handlers of the contract in API.md, which follows Resend's API so
// that Resend's SDKs work unchanged. Every error leaves through
// respondError.
//
// Server holds the routes and what every area shares; the handlers are
// split by area, one type each, declared in the area's first file:
// emailsAPI (emails.go, suppressions.go, logs.go, metrics.go), domainsAPI
// (domains.go), audienceAPI (contacts.go, contact_imports.go,
// contact_properties.go, segments.go, topics.go, audiences.go), templatesAPI,
// broadcastsAPI, automationsAPI (automations.go), webhooksAPI, receivingAPI (receiving.go), privacyAPI
// (datarequests.go, auditlog.go) and keysAPI (apikeys.go). Each embeds
// *Server and holds its own use cases; the API reads and changes data
// only through them, the services shared with the dashboard, built once
// by the caller and passed in Config (adapters_test.go keeps the store
// out).
//
// openapi.yaml is the OpenAPI document of every route New registers,
// served at /openapi.json (openapi.go); openapi_test.go keeps it complete
// and validates the api tests' responses against it.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/usage"
	"github.com/posthaste/posthaste/internal/webhook"
)

// maxBody is the largest request body accepted (API.md).
const maxBody = 64 << 20

// Check is one readiness check; it returns nil when its dependency answers.
type Check struct {
	Name  string
	Check func(context.Context) error
}

// Config wires a Server.
type Config struct {
	Auth   *auth.Authenticator
	Submit *submit.Service
	// Emails reads sent emails and keeps the suppression list (/emails,
	// /suppressions); Received reads received mail (/emails/receiving);
	// Usage reads the request log (/logs), the email metrics
	// (/emails/metrics), the quota used (the quota header of sending
	// responses) and the team's usage (/usage); Accounts serves
	// /api-keys; AuditLog serves /audit-log.
	// Built once by the caller, like the services below; their routes are
	// always served, so each is required (as Submit is) when they are
	// used.
	Emails   *submit.Emails
	Received *receiving.Service
	Usage    *usage.Service
	Accounts *account.Service
	AuditLog *auditlog.Log

	// The use cases the API shares with the dashboard, each built once by
	// the caller (cmd/posthaste) and handed to both. A nil one leaves its
	// routes out (they answer 404).
	Domains      *domains.Service     // /domains
	Webhooks     *webhook.Endpoints   // /webhooks
	Audience     *audience.Service    // /contacts, /contact-properties, /segments, /topics, /audiences
	Imports      *imports.Service     // /contacts/imports
	DataRequests *datareq.Service     // /data-requests
	Broadcasts   *broadcast.Service   // /broadcasts
	Templates    *templates.Service   // /templates
	Automations  *automations.Service // /events, /automations
	// Records is the operator's side of the DNS records shown with each
	// domain.
	Records records.Config
	// Keys derives the key that signs the download URLs of received
	// emails and data request archives; nil offers no download URLs.
	Keys *seal.Box

	Metrics  *telemetry.Metrics
	Gatherer prometheus.Gatherer // served at /metrics; nil → no /metrics
	// MetricsToken, when set, is the bearer token /metrics requires and
	// that makes /readyz name its failed checks; without it /readyz
	// answers only ready or not.
	MetricsToken string
	Ready        []Check
	// Dashboard serves /dashboard/; nil leaves it out.
	Dashboard http.Handler
	Logger    *slog.Logger

	// Unsubscribe serves /unsubscribe/<token> (GET and POST): the
	// anonymous one-click unsubscribe and preferences page that the
	// List-Unsubscribe links of mail sent with a topic lead to; nil leaves
	// it out. Like the dashboard's pages, these requests are neither in
	// the request log (the path holds a token) nor under the API's rate
	// limits (the handler keeps its own per client).
	Unsubscribe UnsubscribeHandler
	// Tracking serves the open and click tracking endpoints (/o/<token>,
	// /c/<token>) on any syntactically valid Host; the handler itself
	// answers only tracking hosts (api/tracking.go). nil leaves them out.
	Tracking TrackingHandler
	// Codec serves the Temporal codec endpoint under /temporal-codec/
	// (codec.Handler, guarded by its own operator token); nil leaves it
	// out (404). Its requests are neither logged nor rate-limited: the
	// path may hold the token.
	Codec http.Handler

	// Limiter rate-limits requests; nil turns rate limiting off.
	Limiter Limiter
	// DefaultRateLimit is the requests per second of teams without their
	// own limit and of each unauthenticated client address (default 10).
	DefaultRateLimit int
	// RequestLog receives an entry per API request; nil logs nothing.
	RequestLog RequestLog
	// TrustedProxies are the addresses or CIDRs whose X-Forwarded-For
	// names the client; empty trusts none (the client is the peer).
	TrustedProxies []string
	// KeyLookupRate is how many API keys that match no live key a client
	// address may present per second (burst the same) before its keys
	// that are not cached are refused with 429 without a database lookup
	// (default 10).
	KeyLookupRate int
	// Now is the clock of that budget; nil means time.Now.
	Now func() time.Time
	// HSTS sends Strict-Transport-Security on every response: set it when
	// browsers reach the server over https (RFC 6797).
	HSTS bool
	// PublicURL (POSTHASTE_PUBLIC_URL) is where clients reach the server:
	// the base of the download URLs of received emails; empty uses the
	// scheme and host of each request.
	PublicURL string
	// Unauthenticated, when set, makes every request act for this
	// principal without a key. Benchmarks only (bench compares the cost of
	// authentication); never set by the posthaste command.
	Unauthenticated *auth.Principal
}

// UnsubscribeHandler serves the unsubscribe endpoints; client is the
// request's client address (gin's, which honours the trusted proxies).
// *unsubscribe.Handler implements it.
type UnsubscribeHandler interface {
	ServeUnsubscribe(w http.ResponseWriter, r *http.Request, client string)
}

// Server is the HTTP API: the routes and the parts every area shares
// (authentication, errors, limits, the request log, metrics, signed
// download URLs, audit entries). The handlers of each area are methods of
// the area's own type (emailsAPI, domainsAPI, audienceAPI, …), which
// embeds *Server for those shared parts and holds the area's use case.
type Server struct {
	auth    *auth.Authenticator
	metrics *telemetry.Metrics
	ready   []Check
	// box derives the key of signed download URLs; nil offers none.
	box    *seal.Box
	logger *slog.Logger
	engine *gin.Engine

	limiter     Limiter
	defaultRate int
	reqlog      RequestLog
	fixed       *auth.Principal
	lookups     *lookupBudget
	opsToken    string
	hsts        bool
	publicURL   string
	tracking    *trackingRoutes

	// The handlers, by area.
	emails      *emailsAPI
	domains     *domainsAPI
	audience    *audienceAPI
	templates   *templatesAPI
	broadcasts  *broadcastsAPI
	automations *automationsAPI
	webhooks    *webhooksAPI
	receiving   *receivingAPI
	privacy     *privacyAPI
	keys        *keysAPI
}

// New builds the API.
func New(cfg Config) (*Server, error) {
	gin.SetMode(gin.ReleaseMode)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{auth: cfg.Auth, metrics: cfg.Metrics, ready: cfg.Ready, box: cfg.Keys,
		logger: logger.With("component", "api"), limiter: cfg.Limiter, defaultRate: cfg.DefaultRateLimit, reqlog: cfg.RequestLog, fixed: cfg.Unauthenticated,
		opsToken: cfg.MetricsToken, hsts: cfg.HSTS, publicURL: strings.TrimRight(cfg.PublicURL, "/")}
	if s.defaultRate <= 0 {
		s.defaultRate = 10
	}
	if cfg.KeyLookupRate <= 0 {
		cfg.KeyLookupRate = 10
	}
	s.lookups = newLookupBudget(cfg.KeyLookupRate, cfg.Now)
	s.emails = &emailsAPI{Server: s, submit: cfg.Submit, emails: cfg.Emails, usage: cfg.Usage}
	s.domains = &domainsAPI{Server: s, domainSvc: cfg.Domains, records: cfg.Records}
	s.audience = &audienceAPI{Server: s, svc: cfg.Audience, imports: cfg.Imports}
	s.templates = &templatesAPI{Server: s, svc: cfg.Templates}
	s.broadcasts = &broadcastsAPI{Server: s, broadcastSvc: cfg.Broadcasts}
	s.automations = &automationsAPI{Server: s, svc: cfg.Automations}
	s.webhooks = &webhooksAPI{Server: s, endpoints: cfg.Webhooks}
	s.receiving = &receivingAPI{Server: s, received: cfg.Received}
	s.privacy = &privacyAPI{Server: s, dataRequests: cfg.DataRequests, auditLog: cfg.AuditLog}
	s.keys = &keysAPI{Server: s}
	if cfg.Accounts != nil {
		s.keys.keys = cfg.Accounts.Keys
	}
	doc, err := openAPIDoc()
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	tr, err := newTrackingRoutes(cfg)
	if err != nil {
		return nil, fmt.Errorf("tracking routes: %w", err)
	}
	s.tracking = tr
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("trusted proxies: %w", err)
	}
	// Every API request (not the probes and metrics) is logged, then
	// authenticated if it carries a key, then rate-limited per team or per
	// client address, before routing: unknown routes count too.
	// The recovery writes nothing of its own: gin's would dump the request
	// (its path may hold an invitation or reset token, its cookies a
	// session) to stderr; the route and the stack are logged instead.
	e.Use(s.observe, s.api(s.logRequest), gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		s.respondError(c, errorf(http.StatusInternalServerError, nameApplicationError, "An unexpected error occurred."))
		s.logger.Error("panic in handler", "request_id", requestID(c), "route", routeLabel(c), "panic", rec,
			"stack", string(debug.Stack()))
	}), s.api(s.identify), s.api(s.limit))
	e.NoRoute(func(c *gin.Context) {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "The requested endpoint does not exist."))
	})
	e.NoMethod(func(c *gin.Context) {
		s.respondError(c, errorf(http.StatusMethodNotAllowed, nameMethodNotAllowed,
			"Method "+c.Request.Method+" is not allowed on this endpoint."))
	})

	e.GET("/healthz", func(c *gin.Context) { c.PureJSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/openapi.json", serveOpenAPI(doc))
	e.GET("/readyz", s.readyz)
	if cfg.Gatherer != nil {
		e.GET("/metrics", gin.WrapH(MetricsHandler(cfg.Gatherer, cfg.MetricsToken)))
	}

	if cfg.Dashboard != nil {
		toDashboard := func(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/dashboard/") }
		e.GET("/", toDashboard)
		e.GET("/dashboard", toDashboard)
		e.Any("/dashboard/*path", gin.WrapH(cfg.Dashboard))
	}

	if cfg.Unsubscribe != nil {
		serve := func(c *gin.Context) { cfg.Unsubscribe.ServeUnsubscribe(c.Writer, c.Request, c.ClientIP()) }
		e.GET("/unsubscribe/:token", serve)
		e.POST("/unsubscribe/:token", serve)
	}

	if cfg.Codec != nil {
		e.Any(CodecPath+"*path", gin.WrapH(cfg.Codec))
	}

	sending := e.Group("/", s.requireKey(true))
	sending.POST("/emails", s.emails.sendEmail)
	sending.POST("/emails/batch", s.emails.sendBatch)

	// Downloads of received emails and of sent emails' attachments are
	// authorized by their signed URL, not a key (receiving.go,
	// sent_attachments.go).
	e.GET("/emails/receiving/:id/raw", s.receiving.downloadReceivedRaw)
	e.GET("/emails/receiving/:id/attachments/:attachment_id/download", s.receiving.downloadReceivedAttachment)
	e.GET("/emails/:id/attachments/:attachment_id/download", s.emails.downloadSentAttachment)
	if cfg.DataRequests != nil {
		e.GET("/data-requests/:id/download", s.privacy.downloadDataRequest)
	}
	// The public view of a shared email, authorized by the token in its
	// query (shares.go).
	e.GET(SharePath, s.emails.viewSharedEmail)
	e.GET(SharePath+"/content", s.emails.viewSharedContent)

	full := e.Group("/", s.requireKey(false))
	full.GET("/emails/receiving", s.receiving.listReceivedEmails)
	full.GET("/emails/receiving/:id", s.receiving.getReceivedEmail)
	full.GET("/emails/receiving/:id/attachments", s.receiving.listReceivedAttachments)
	full.GET("/emails/receiving/:id/attachments/:attachment_id", s.receiving.getReceivedAttachment)
	full.GET("/emails", s.emails.listEmails)
	// gin matches the static segment before the :id parameter.
	full.GET("/emails/metrics", s.emails.emailMetrics)
	full.GET("/emails/:id", s.emails.getEmail)
	full.PATCH("/emails/:id", s.emails.updateEmail)
	full.POST("/emails/:id/cancel", s.emails.cancelEmail)
	full.POST("/emails/:id/share", s.emails.shareEmail)
	full.GET("/emails/:id/attachments", s.emails.listSentAttachments)
	full.GET("/emails/:id/attachments/:attachment_id", s.emails.getSentAttachment)
	full.POST("/api-keys", s.keys.createAPIKey)
	full.GET("/api-keys", s.keys.listAPIKeys)
	full.PATCH("/api-keys/:id", s.keys.updateAPIKey)
	full.DELETE("/api-keys/:id", s.keys.deleteAPIKey)
	full.GET("/suppressions", s.emails.listSuppressions)
	full.POST("/suppressions", s.emails.createSuppression)
	full.GET("/suppressions/:id", s.emails.getSuppression)
	full.POST("/suppressions/batch/add", s.emails.batchAddSuppressions)
	full.POST("/suppressions/batch/remove", s.emails.batchRemoveSuppressions)
	full.DELETE("/suppressions/:id", s.emails.deleteSuppression)
	if cfg.Templates != nil {
		full.POST("/templates", s.templates.createTemplate)
		full.GET("/templates", s.templates.listTemplates)
		full.GET("/templates/:id", s.templates.getTemplate)
		full.PATCH("/templates/:id", s.templates.updateTemplate)
		full.DELETE("/templates/:id", s.templates.deleteTemplate)
		full.POST("/templates/:id/publish", s.templates.publishTemplate)
		full.POST("/templates/:id/duplicate", s.templates.duplicateTemplate)
	}
	full.GET("/usage", s.emails.getUsage)
	full.GET("/logs", s.emails.listLogs)
	full.GET("/audit-log", s.requireOwnerKey, s.privacy.listAuditLog)
	full.GET("/logs/:id", s.emails.getLog)
	if cfg.Audience != nil {
		full.POST("/contacts", s.audience.createContact)
		full.GET("/contacts", s.audience.listContacts)
		full.GET("/contacts/:id", s.audience.getContact)
		full.PATCH("/contacts/:id", s.audience.updateContact)
		full.DELETE("/contacts/:id", s.audience.deleteContact)
		full.GET("/contacts/:id/segments", s.audience.listContactSegments)
		full.POST("/contacts/:id/segments/:segment_id", s.audience.addContactSegment)
		full.DELETE("/contacts/:id/segments/:segment_id", s.audience.removeContactSegment)
		full.GET("/contacts/:id/topics", s.audience.listContactTopics)
		full.PATCH("/contacts/:id/topics", s.audience.updateContactTopics)
		full.POST("/contact-properties", s.audience.createContactProperty)
		full.GET("/contact-properties", s.audience.listContactProperties)
		full.GET("/contact-properties/:id", s.audience.getContactProperty)
		full.PATCH("/contact-properties/:id", s.audience.updateContactProperty)
		full.DELETE("/contact-properties/:id", s.audience.deleteContactProperty)
		full.POST("/segments", s.audience.createSegment)
		full.GET("/segments", s.audience.listSegments)
		full.GET("/segments/:id", s.audience.getSegment)
		full.PATCH("/segments/:id", s.audience.updateSegment)
		full.DELETE("/segments/:id", s.audience.deleteSegment)
		full.GET("/segments/:id/contacts", s.audience.listSegmentContacts)
		// Resend's legacy audiences: segments by another name (audiences.go).
		legacy := audiencesAPI{s.audience}
		full.POST("/audiences", legacy.createAudience)
		full.GET("/audiences", legacy.listAudiences)
		full.GET("/audiences/:id", legacy.getAudience)
		full.DELETE("/audiences/:id", legacy.deleteAudience)
		full.POST("/audiences/:id/contacts", legacy.createAudienceContact)
		full.GET("/audiences/:id/contacts", legacy.listAudienceContacts)
		full.GET("/audiences/:id/contacts/:contact_id", legacy.getAudienceContact)
		full.PATCH("/audiences/:id/contacts/:contact_id", legacy.updateAudienceContact)
		full.DELETE("/audiences/:id/contacts/:contact_id", legacy.deleteAudienceContact)
		full.POST("/topics", s.audience.createTopic)
		full.GET("/topics", s.audience.listTopics)
		full.GET("/topics/:id", s.audience.getTopic)
		full.PATCH("/topics/:id", s.audience.updateTopic)
		full.DELETE("/topics/:id", s.audience.deleteTopic)
	}
	if cfg.Domains != nil {
		full.POST("/domains", s.domains.createDomain)
		full.GET("/domains", s.domains.listDomains)
		full.GET("/domains/:id", s.domains.getDomain)
		full.PATCH("/domains/:id", s.domains.updateDomain)
		full.POST("/domains/:id/verify", s.domains.verifyDomain)
		full.DELETE("/domains/:id", s.domains.deleteDomain) // owners only: domains.Service.Delete
	}
	if cfg.DataRequests != nil {
		full.POST("/data-requests", s.requireOwnerKey, s.privacy.createDataRequest)
		full.GET("/data-requests", s.requireOwnerKey, s.privacy.listDataRequests)
		full.GET("/data-requests/:id", s.requireOwnerKey, s.privacy.getDataRequest)
	}
	if cfg.Webhooks != nil {
		full.POST("/webhooks", s.webhooks.createWebhook)
		full.GET("/webhooks", s.webhooks.listWebhooks)
		full.GET("/webhooks/:id", s.webhooks.getWebhook)
		full.PATCH("/webhooks/:id", s.webhooks.updateWebhook)
		full.DELETE("/webhooks/:id", s.webhooks.deleteWebhook)
		full.POST("/webhooks/:id/signing-secret/rotate", s.webhooks.rotateWebhookSecret)
		full.POST("/webhooks/:id/test", s.webhooks.testWebhook)
		full.GET("/webhooks/:id/events", s.webhooks.listWebhookEvents)
		full.GET("/webhooks/:id/events/:event_id", s.webhooks.getWebhookEvent)
		full.GET("/webhooks/:id/events/:event_id/attempts", s.webhooks.listWebhookAttempts)
		full.POST("/webhooks/:id/events/:event_id/replay", s.webhooks.replayWebhookEvent)
	}
	if cfg.Imports != nil {
		full.POST("/contacts/imports", s.audience.createContactImport)
		full.GET("/contacts/imports", s.audience.listContactImports)
		full.GET("/contacts/imports/:id", s.audience.getContactImport)
	}
	if cfg.Broadcasts != nil {
		full.POST("/broadcasts", s.broadcasts.createBroadcast)
		full.GET("/broadcasts", s.broadcasts.listBroadcasts)
		full.GET("/broadcasts/:id", s.broadcasts.getBroadcast)
		full.PATCH("/broadcasts/:id", s.broadcasts.updateBroadcast)
		full.DELETE("/broadcasts/:id", s.broadcasts.deleteBroadcast)
		full.POST("/broadcasts/:id/duplicate", s.broadcasts.duplicateBroadcast)
		full.POST("/broadcasts/:id/send", s.broadcasts.sendBroadcast)
		full.POST("/broadcasts/:id/cancel", s.broadcasts.cancelBroadcast)
		full.GET("/broadcasts/:id/recipients", s.broadcasts.listBroadcastRecipients)
		full.GET("/broadcasts/:id/clicked-links", s.broadcasts.listClickedLinks)
	}
	if cfg.Automations != nil {
		full.POST("/events", s.automations.createEvent)
		full.GET("/events", s.automations.listEvents)
		full.POST("/events/send", s.automations.sendEvent)
		full.GET("/events/:id", s.automations.getEvent)
		full.PATCH("/events/:id", s.automations.updateEvent)
		full.DELETE("/events/:id", s.automations.deleteEvent)
		full.POST("/automations", s.automations.createAutomation)
		full.GET("/automations", s.automations.listAutomations)
		full.GET("/automations/:id", s.automations.getAutomation)
		full.PATCH("/automations/:id", s.automations.updateAutomation)
		full.DELETE("/automations/:id", s.automations.deleteAutomation)
		full.POST("/automations/:id/duplicate", s.automations.duplicateAutomation)
		full.POST("/automations/:id/stop", s.automations.stopAutomation)
		full.GET("/automations/:id/runs", s.automations.listRuns)
		full.GET("/automations/:id/runs/:run_id", s.automations.getRun)
	}
	s.engine = e
	return s, nil
}

// api runs h only for API requests, not for probes and metrics.
func (s *Server) api(h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if opsPath(c.Request.URL.Path) {
			c.Next()
			return
		}
		h(c)
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.tracking.match(r) {
		s.tracking.engine.ServeHTTP(w, r)
		return
	}
	s.engine.ServeHTTP(w, r)
}

const requestIDKey = "request_id"

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// hstsValue is the Strict-Transport-Security of a server reached over
// https: a year, this host only (RFC 6797 §6.1; subdomains may serve
// other things).
const hstsValue = "max-age=31536000"

// observe gives every request an id and counts it.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	id := uuid.NewString()
	c.Set(requestIDKey, id)
	c.Header("X-Request-Id", id)
	if s.hsts {
		c.Header("Strict-Transport-Security", hstsValue)
	}
	c.Next()
	route := routeLabel(c)
	status := c.Writer.Status()
	// Labels come from bounded sets only (telemetry.MethodLabel, the
	// routes, the status codes), so clients cannot grow the metrics.
	method := telemetry.MethodLabel(c.Request.Method)
	if s.metrics != nil {
		s.metrics.HTTPRequests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
		s.metrics.HTTPDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
	s.logger.Debug("request", "request_id", id, "method", method, "route", route,
		"status", status, "duration", time.Since(start))
}

// routeLabel is the request's route pattern (never its path, which may
// hold a token), "unmatched" when no route matched.
func routeLabel(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return "unmatched"
}

// readyz answers 200 or 503. Which checks failed, with their errors (which
// may name internal hosts), only a caller with the metrics token learns;
// the failures are logged either way.
func (s *Server) readyz(c *gin.Context) {
	failed := RunChecks(c.Request.Context(), s.ready)
	if len(failed) == 0 {
		c.PureJSON(http.StatusOK, gin.H{"status": "ready"})
		return
	}
	s.logger.Warn("readiness checks failed", "failed", failed)
	body := gin.H{"status": "unavailable"}
	if s.opsToken != "" && BearerIs(c.Request, s.opsToken) {
		body["failed"] = failed
	}
	c.PureJSON(http.StatusServiceUnavailable, body)
}

// MetricsHandler serves g's metrics; with a token, only to requests that
// carry it as a bearer token (RFC 6750 §2.1), others get 401.
func MetricsHandler(g prometheus.Gatherer, token string) http.Handler {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	if token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !BearerIs(r, token) {
			// RFC 6750 §3: the challenge of a protected resource.
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "A bearer token is required.", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// BearerIs reports whether r carries token as its bearer token, comparing
// in constant time.
func BearerIs(r *http.Request, token string) bool {
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	want := sha256.Sum256([]byte(token))
	have := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(want[:], have[:]) == 1
}

// RunChecks runs readiness checks, each within 2 seconds, and returns the
// failed ones by name with their errors; empty when all pass.
func RunChecks(ctx context.Context, checks []Check) map[string]string {
	failed := map[string]string{}
	for _, ch := range checks {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := ch.Check(cctx); err != nil {
			failed[ch.Name] = err.Error()
		}
		cancel()
	}
	return failed
}
