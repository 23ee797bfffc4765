// Package api is Posthaste's HTTP API: the gin router, its middleware
// (request ids, metrics, authentication) and the handlers of the contract
// in API.md, which follows Resend's API so that Resend's SDKs work
// unchanged. Every error leaves through respondError.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
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
	Store    *store.Store
	Auth     *auth.Authenticator
	Submit   *submit.Service
	Metrics  *telemetry.Metrics
	Gatherer prometheus.Gatherer // served at /metrics; nil → no /metrics
	Ready    []Check
	Domains  DomainConfig
	Webhooks WebhookConfig
	Logger   *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	store    *store.Store
	auth     *auth.Authenticator
	submit   *submit.Service
	metrics  *telemetry.Metrics
	ready    []Check
	domains  DomainConfig
	webhooks WebhookConfig
	logger   *slog.Logger
	engine   *gin.Engine
}

// New builds the API.
func New(cfg Config) *Server {
	gin.SetMode(gin.ReleaseMode)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: cfg.Store, auth: cfg.Auth, submit: cfg.Submit, metrics: cfg.Metrics,
		ready: cfg.Ready, domains: cfg.Domains, webhooks: cfg.Webhooks, logger: logger.With("component", "api")}
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	e.Use(s.observe, gin.CustomRecovery(func(c *gin.Context, rec any) {
		s.respondError(c, errorf(http.StatusInternalServerError, nameApplicationError, "An unexpected error occurred."))
		s.logger.Error("panic in handler", "request_id", requestID(c), "panic", rec)
	}))
	e.NoRoute(func(c *gin.Context) {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "The requested endpoint does not exist."))
	})
	e.NoMethod(func(c *gin.Context) {
		s.respondError(c, errorf(http.StatusMethodNotAllowed, nameMethodNotAllowed,
			"Method "+c.Request.Method+" is not allowed on this endpoint."))
	})

	e.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	if cfg.Gatherer != nil {
		e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})))
	}

	sending := e.Group("/", s.authenticate(true))
	sending.POST("/emails", s.sendEmail)

	full := e.Group("/", s.authenticate(false))
	full.GET("/emails", s.listEmails)
	full.GET("/emails/:id", s.getEmail)
	full.POST("/api-keys", s.createAPIKey)
	full.GET("/api-keys", s.listAPIKeys)
	full.DELETE("/api-keys/:id", s.deleteAPIKey)
	full.POST("/domains", s.createDomain)
	full.GET("/domains", s.listDomains)
	full.GET("/domains/:id", s.getDomain)
	full.PATCH("/domains/:id", s.updateDomain)
	full.POST("/domains/:id/verify", s.verifyDomain)
	full.DELETE("/domains/:id", s.deleteDomain)
	full.GET("/suppressions", s.listSuppressions)
	full.POST("/suppressions", s.createSuppression)
	full.DELETE("/suppressions/:id", s.deleteSuppression)
	full.POST("/webhooks", s.createWebhook)
	full.GET("/webhooks", s.listWebhooks)
	full.GET("/webhooks/:id", s.getWebhook)
	full.PATCH("/webhooks/:id", s.updateWebhook)
	full.DELETE("/webhooks/:id", s.deleteWebhook)
	full.POST("/webhooks/:id/signing-secret/rotate", s.rotateWebhookSecret)
	full.POST("/webhooks/:id/test", s.testWebhook)
	full.GET("/webhooks/:id/events", s.listWebhookEvents)
	full.GET("/webhooks/:id/events/:event_id", s.getWebhookEvent)
	full.GET("/webhooks/:id/events/:event_id/attempts", s.listWebhookAttempts)
	full.POST("/webhooks/:id/events/:event_id/replay", s.replayWebhookEvent)
	s.engine = e
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.engine.ServeHTTP(w, r) }

const requestIDKey = "request_id"

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// observe gives every request an id and counts it.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	id := uuid.NewString()
	c.Set(requestIDKey, id)
	c.Header("X-Request-Id", id)
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	if s.metrics != nil {
		s.metrics.HTTPRequests.WithLabelValues(c.Request.Method, route, strconv.Itoa(status)).Inc()
		s.metrics.HTTPDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
	s.logger.Debug("request", "request_id", id, "method", c.Request.Method, "route", route,
		"status", status, "duration", time.Since(start))
}

func (s *Server) readyz(c *gin.Context) {
	failed := map[string]string{}
	for _, ch := range s.ready {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		if err := ch.Check(ctx); err != nil {
			failed[ch.Name] = err.Error()
		}
		cancel()
	}
	if len(failed) > 0 {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "failed": failed})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}
