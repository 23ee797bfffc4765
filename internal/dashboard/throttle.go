package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/auththrottle"
	"github.com/posthaste/posthaste/internal/password"
)

// Throttles of the endpoints that answer before sign-in. Each attempt is
// charged before the work it asks for (a password hash, a code check), so
// parallel requests cannot all slip through before the first failure is
// counted, and a charge is refunded when the attempt succeeds or never ran.
var (
	// pairLimit is per account and client address, and the limit of
	// the password-reset keys.
	pairLimit = auththrottle.Limit{Max: 5, Window: 15 * time.Minute}
	// addressLimit is per client address across accounts and the
	// anonymous endpoints that do work (sign-in, the second factor,
	// password reset, joining by invitation, OAuth starts and callbacks).
	addressLimit = auththrottle.Limit{Max: 30, Window: 15 * time.Minute}
	// accountLimit is per account across client addresses; it applies
	// alike to addresses without an account, so it tells nothing.
	accountLimit = auththrottle.Limit{Max: 30, Window: 15 * time.Minute}
)

// throttleKey is a throttle's key with its limit.
type throttleKey = auththrottle.Key

// tooManyAttempts answers a client address over addressLimit.
const tooManyAttempts = "Too many attempts from your network. Wait a few minutes and try again."

// anonymousAttempt charges an attempt to the client address at an
// endpoint that does work before sign-in (a password hash, a call to an
// identity provider). Over addressLimit it answers 429 with Retry-After
// and returns false.
func (h *Handler) anonymousAttempt(w http.ResponseWriter, r *http.Request) bool {
	ok, wait := h.throttle.Take(h.now(), throttleKey{Name: "addr|" + clientIP(r), Limit: addressLimit})
	if !ok {
		retryAfter(w, wait)
		http.Error(w, tooManyAttempts, http.StatusTooManyRequests)
	}
	return ok
}

// retryAfter sets Retry-After (RFC 9110 §10.2.3) to wait, in whole
// seconds, at least one.
func retryAfter(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", fmt.Sprint(max(int((wait+time.Second-1)/time.Second), 1)))
}

// busy reports whether err means the work was not done for want of
// capacity (a saturated password pool) or because the client left.
func busy(err error) bool {
	return errors.Is(err, password.ErrOverloaded) || errors.Is(err, context.Canceled)
}

// parseProxies reads the addresses and CIDRs of trusted reverse proxies.
func parseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

type clientKey struct{}

// withClient records the client's address in the request's context, for
// clientIP.
func (h *Handler) withClient(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), clientKey{}, h.clientAddr(r)))
}

// clientAddr is the address of the client: the peer, or, when the peer is
// a trusted proxy, the rightmost address of X-Forwarded-For (then
// X-Real-IP) that is not a trusted proxy, as gin's ClientIP finds it for
// the API. Every X-Forwarded-For field line counts (RFC 9110 §5.3), so a
// client's own line cannot hide the proxy's.
func (h *Handler) clientAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if !h.trusted(peer) {
		return peer
	}
	for _, name := range []string{"X-Forwarded-For", "X-Real-IP"} {
		items := strings.Split(strings.Join(r.Header.Values(name), ","), ",")
		for i := len(items) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(items[i]))
			if err != nil {
				break
			}
			if a = a.Unmap(); i == 0 || !h.trusted(a) {
				return a
			}
		}
	}
	return peer
}

func (h *Handler) trusted(a netip.Addr) bool {
	for _, p := range h.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddrOf is the client's address as withClient found it, "" when
// unknown.
func clientAddrOf(r *http.Request) string {
	a, ok := r.Context().Value(clientKey{}).(netip.Addr)
	if !ok || !a.IsValid() {
		return ""
	}
	return a.String()
}

// clientIP is the client's address as throttles key it: an IPv4 address,
// or the /64 of an IPv6 address, since one client easily has a whole /64.
func clientIP(r *http.Request) string {
	a, ok := r.Context().Value(clientKey{}).(netip.Addr)
	if !ok || !a.IsValid() {
		return r.RemoteAddr
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
