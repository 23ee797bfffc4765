package api

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// TrackingHandler serves the open and click tracking endpoints
// (/o/<token>, /c/<token>); client is the request's client address
// (gin's, which honours the trusted proxies). *tracking.Handler implements
// it.
type TrackingHandler interface {
	ServeTracking(w http.ResponseWriter, r *http.Request, client string)
}

// trackingRoutes answers the requests whose Host is a tracking host: the
// operator's (TrackingHost) or a domain's tracking subdomain. They are
// neither logged nor rate-limited per team: the handler keeps its own
// limit per client.
type trackingRoutes struct {
	host   string // the operator's tracking host, lower case; "" for none
	known  func(ctx context.Context, host string) (bool, error)
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
	r := &trackingRoutes{host: strings.ToLower(cfg.TrackingHost), engine: e}
	if cfg.Store != nil {
		r.known = cfg.Store.IsTrackingHost
	}
	return r, nil
}

// match reports whether r goes to the tracking endpoints: a tracking
// path on a tracking host.
func (t *trackingRoutes) match(r *http.Request) bool {
	if t == nil {
		return false
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/o/") && !strings.HasPrefix(p, "/c/") {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || len(host) > 253 {
		return false
	}
	if host == t.host {
		return true
	}
	if t.known == nil {
		return false
	}
	ok, err := t.known(r.Context(), host)
	return err == nil && ok
}
