package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/tracking"
)

// TrackingHandler serves the open and click tracking endpoints
// (/o/<token>, /c/<token>); client is the request's client address
// (gin's, which honours the trusted proxies). *tracking.Handler implements
// it.
type TrackingHandler interface {
	ServeTracking(w http.ResponseWriter, r *http.Request, client string)
}

// trackingRoutes answers the requests for the tracking paths, whatever
// their Host: the handler checks the host itself (against the host the
// token is bound to, then tracking.Config.TeamHost), after its rate limit
// and the token, so that an anonymous request with a made-up Host costs no
// database query. They are neither logged nor
// rate-limited per team: the handler keeps its own limit per client.
type trackingRoutes struct {
	engine *gin.Engine
}

// newTrackingRoutes returns the tracking routes of cfg; nil when cfg has
// no tracking handler.
func newTrackingRoutes(cfg Config) (*trackingRoutes, error) {
	if cfg.Tracking == nil {
		return nil, nil
	}
	e := gin.New()
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	e.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, _ any) {
		c.AbortWithStatus(http.StatusInternalServerError)
	}))
	serve := func(c *gin.Context) { cfg.Tracking.ServeTracking(c.Writer, c.Request, c.ClientIP()) }
	e.Any("/o/:token", serve)
	e.Any("/c/:token", serve)
	e.NoRoute(func(c *gin.Context) { c.String(http.StatusNotFound, "Not found.\n") })
	return &trackingRoutes{engine: e}, nil
}

// match reports whether r goes to the tracking endpoints: a tracking path
// (no API route starts with one) on a host that could be a tracking host.
// It does no I/O.
func (t *trackingRoutes) match(r *http.Request) bool {
	if t == nil {
		return false
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/o/") && !strings.HasPrefix(p, "/c/") {
		return false
	}
	_, ok := tracking.NormalizeHost(r.Host)
	return ok
}
