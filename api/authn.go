package api

import (
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/submit"
)

const (
	principalKey = "principal"
	authErrKey   = "auth_error"
)

// identify authenticates the request's API key, if any, before routing, so
// the rate limiter and the request log know the team of every request,
// including those to unknown routes. It never answers the request: the
// routes that need a key answer with the error it found (requireKey). A
// key this process has not cached is looked up in PostgreSQL only within
// the client address's budget of lookups (lookupBudget); past it, the
// error is a 429 and the database is not asked.
func (s *Server) identify(c *gin.Context) {
	if s.fixed != nil {
		c.Set(principalKey, *s.fixed)
		return
	}
	h := c.GetHeader("Authorization")
	if h == "" {
		c.Set(authErrKey, errorf(http.StatusUnauthorized, nameMissingAPIKey,
			"Missing API key in the authorization header. Include the header Authorization: Bearer ph_..."))
		return
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		c.Set(authErrKey, errorf(http.StatusUnauthorized, nameMissingAPIKey,
			"The authorization header must be of the form: Bearer ph_..."))
		return
	}
	token = strings.TrimSpace(token)
	if p, ok := s.auth.Cached(token); ok {
		acceptFrom(c, p)
		return
	}
	var done func(live bool)
	if auth.WellFormed(token) && s.lookups != nil {
		var wait time.Duration
		var ok bool
		if done, wait, ok = s.lookups.begin(c.Request.Context(), c.ClientIP()); !ok {
			// RFC 9110 §10.2.3: Retry-After in delay-seconds.
			retry := strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
			c.Header("Retry-After", retry)
			c.Set(authErrKey, errorf(http.StatusTooManyRequests, nameRateLimitExceeded,
				"Too many requests with unknown API keys from this address. Retry after "+retry+" s."))
			return
		}
	}
	p, err := s.auth.Authenticate(c.Request.Context(), token)
	if done != nil {
		// Only a key that matched nothing spends the budget (a failing
		// database does not).
		done(!errors.Is(err, auth.ErrInvalidKey))
	}
	switch {
	case errors.Is(err, auth.ErrInvalidKey):
		c.Set(authErrKey, errorf(http.StatusForbidden, nameInvalidAPIKey, "API key is invalid."))
	case err != nil:
		c.Set(authErrKey, err)
	default:
		acceptFrom(c, p)
	}
}

// acceptFrom makes p the request's principal when the client's address is
// within the key's allowed_ips. Outside them the key is refused with 403
// invalid_api_key: API.md's only 403 for a key (restricted_api_key is a
// 401 about permissions), with a message that says why.
func acceptFrom(c *gin.Context, p auth.Principal) {
	addr, _ := netip.ParseAddr(c.ClientIP())
	if !p.AllowsAddr(addr) {
		c.Set(authErrKey, errorf(http.StatusForbidden, nameInvalidAPIKey,
			"This API key may not be used from "+c.ClientIP()+": the address is outside the key's allowed_ips."))
		return
	}
	c.Set(principalKey, p)
}

// requireKey requires a live API key (found by identify). Sending-only
// keys pass only where sending is true.
func (s *Server) requireKey(sending bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, ok := authenticated(c)
		if !ok {
			err, _ := c.Get(authErrKey)
			if e, ok := err.(error); ok {
				s.respondError(c, e)
			} else {
				s.respondError(c, errorf(http.StatusUnauthorized, nameMissingAPIKey, "Missing API key."))
			}
			return
		}
		if !sending && !p.FullAccess() {
			s.respondError(c, errorf(http.StatusUnauthorized, nameRestrictedAPIKey,
				"This API key is restricted to only send emails."))
			return
		}
		c.Next()
	}
}

// requireOwnerKey keeps the routes the dashboard keeps for owners (the
// audit log, data requests, domain deletion) to keys whose creator owns
// the team now (auth.Principal.ByOwner): a key a member made is refused
// with 403 validation_error, API.md's 403 for a key that may not do this.
// It follows requireKey(false).
func (s *Server) requireOwnerKey(c *gin.Context) {
	if !principal(c).ByOwner {
		s.respondError(c, errOwnersOnly)
		return
	}
	c.Next()
}

// errOwnersOnly answers a member's key on an owner-only route.
var errOwnersOnly = errorf(http.StatusForbidden, nameValidation,
	"This API key was created by a team member who is not an owner; only keys created by a team owner can use this endpoint.")

// authenticated returns the request's principal, if its key was valid.
func authenticated(c *gin.Context) (auth.Principal, bool) {
	p, ok := c.Get(principalKey)
	if !ok {
		return auth.Principal{}, false
	}
	return p.(auth.Principal), true
}

// principal is the principal of a request that passed requireKey.
func principal(c *gin.Context) auth.Principal {
	p, _ := authenticated(c)
	return p
}

// sender is the request's principal as the sender of submitted mail.
func (s *Server) sender(c *gin.Context) submit.Sender {
	p := principal(c)
	return submit.Sender{TeamID: p.TeamID, KeyID: p.KeyID, DomainID: p.DomainID}
}
