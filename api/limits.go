package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/ratelimit"
)

// Limiter takes one request from a key's bucket of limit requests per
// second (burst the same). ratelimit.Local and ratelimit.Redis implement it.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int) (ratelimit.Result, error)
}

var (
	_ Limiter = (*ratelimit.Local)(nil)
	_ Limiter = (*ratelimit.Redis)(nil)
)

// limit applies the rate limit after identify: per team for a valid key,
// per client address otherwise. Each request counts once, whatever it
// carries (a batch is one request). Every response gets the headers of
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit-Policy, RateLimit)
// and the older RateLimit-Limit/-Remaining/-Reset that Resend's SDKs read;
// a refused request gets 429 rate_limit_exceeded with Retry-After.
func (s *Server) limit(c *gin.Context) {
	if s.limiter == nil {
		return
	}
	key, perSecond := "addr:"+c.ClientIP(), s.defaultRate
	if p, ok := authenticated(c); ok {
		key = "team:" + p.TeamID.String()
		if p.RateLimit > 0 {
			perSecond = p.RateLimit
		}
	}
	r, err := s.limiter.Allow(c.Request.Context(), key, perSecond)
	if err != nil {
		s.respondError(c, err)
		return
	}
	h := c.Writer.Header()
	limit, remaining, reset := strconv.Itoa(r.Limit), strconv.Itoa(r.Remaining), strconv.Itoa(r.ResetSeconds())
	// Draft 11 §5 and §6: the quota policy (q requests per w seconds) and
	// the remaining quota (r) with the seconds until it resets (t).
	h.Set("RateLimit-Policy", `"default";q=`+limit+`;w=1`)
	h.Set("RateLimit", `"default";r=`+remaining+`;t=`+reset)
	h.Set("RateLimit-Limit", limit)
	h.Set("RateLimit-Remaining", remaining)
	h.Set("RateLimit-Reset", reset)
	if !r.Allowed {
		// RFC 9110 §10.2.3: Retry-After in delay-seconds.
		h.Set("Retry-After", strconv.Itoa(r.RetryAfterSeconds()))
		s.respondError(c, errorf(http.StatusTooManyRequests, nameRateLimitExceeded,
			"Too many requests. You can only make "+limit+" requests per second. Retry after "+
				strconv.Itoa(r.RetryAfterSeconds())+" s."))
	}
}
