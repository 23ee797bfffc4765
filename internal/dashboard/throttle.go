package dashboard

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/password"
)

// Throttles of the endpoints that answer before sign-in. Each attempt is
// charged before the work it asks for (a password hash, a code check), so
// parallel requests cannot all slip through before the first failure is
// counted, and a charge is refunded when the attempt succeeds or never ran.
var (
	// pairLimit is per account and client address, and the limit of
	// throttle.allow and throttle.fail.
	pairLimit = limit{max: 5, window: 15 * time.Minute}
	// addressLimit is per client address across accounts and the
	// anonymous endpoints that do work (sign-in, the second factor,
	// password reset, joining by invitation, OAuth starts and callbacks).
	addressLimit = limit{max: 30, window: 15 * time.Minute}
	// accountLimit is per account across client addresses; it applies
	// alike to addresses without an account, so it tells nothing.
	accountLimit = limit{max: 30, window: 15 * time.Minute}
)

// throttleKeys is how many keys a throttle remembers.
const throttleKeys = 100_000

// A limit is how many attempts a key may make: max at once, then one more
// every window/max, so at most max per window in the long run (GCRA, the
// generic cell rate algorithm of ITU-T I.371, with a burst of max).
type limit struct {
	max    int
	window time.Duration
}

func (l limit) step() time.Duration { return l.window / time.Duration(l.max) }

// throttleKey is a key with its limit.
type throttleKey struct {
	name  string
	limit limit
}

// throttle counts attempts per key. It remembers at most capacity keys,
// each in the same few bytes (a SHA-256 prefix of the key): when full it
// forgets the key with the least charge outstanding, so a flood of new
// keys, each charged once, pushes out only its own kind, never a key that
// failures charged more.
type throttle struct {
	capacity int
	mu       sync.Mutex
	keys     map[[16]byte]*charge
	byDue    dueHeap // the key with the least charge first
}

// charge is what a key owes: it is clear again at due, each attempt
// adding its limit's step.
type charge struct {
	key   [16]byte
	due   time.Time
	index int // in throttle.byDue
}

func newThrottle() *throttle {
	return &throttle{capacity: throttleKeys, keys: map[[16]byte]*charge{}}
}

func digest(name string) [16]byte {
	s := sha256.Sum256([]byte(name))
	return [16]byte(s[:16])
}

// outstanding is how many attempts of a key still count at now.
func outstanding(c *charge, l limit, now time.Time) int {
	if c == nil || !c.due.After(now) {
		return 0
	}
	return int((c.due.Sub(now) + l.step() - 1) / l.step())
}

// count is how many attempts of k still count at now.
func (t *throttle) count(k throttleKey, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return outstanding(t.keys[digest(k.name)], k.limit, now)
}

// note charges k one attempt whatever its limit says and returns how many
// of its attempts counted before. Nothing refunds it: it ranks sign-ins in
// the password pool by how much their address tried lately, including the
// attempts the pool turned away.
func (t *throttle) note(k throttleKey, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := digest(k.name)
	n := outstanding(t.keys[key], k.limit, now)
	t.add(key, k.limit, now)
	return n
}

// take charges an attempt to every key, or to none when one of them is at
// its limit; then it returns how long until that key may try again.
func (t *throttle) take(now time.Time, keys ...throttleKey) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		c := t.keys[digest(k.name)]
		if outstanding(c, k.limit, now) >= k.limit.max {
			wait = max(wait, c.due.Sub(now)-time.Duration(k.limit.max-1)*k.limit.step())
		}
	}
	if wait > 0 {
		return false, wait
	}
	for _, k := range keys {
		t.add(digest(k.name), k.limit, now)
	}
	return true, 0
}

// refund takes back one attempt of each key.
func (t *throttle) refund(now time.Time, keys ...throttleKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		c := t.keys[digest(k.name)]
		if c == nil {
			continue
		}
		c.due = c.due.Add(-k.limit.step())
		if c.due.After(now) {
			heap.Fix(&t.byDue, c.index)
		} else {
			t.drop(c)
		}
	}
}

// allow reports whether key may make an attempt under pairLimit.
func (t *throttle) allow(key string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return outstanding(t.keys[digest(key)], pairLimit, now) < pairLimit.max
}

// fail charges an attempt of key under pairLimit.
func (t *throttle) fail(key string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(digest(key), pairLimit, now)
}

// reset forgets a key's attempts.
func (t *throttle) reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.keys[digest(key)]; c != nil {
		t.drop(c)
	}
}

func (t *throttle) add(key [16]byte, l limit, now time.Time) {
	c := t.keys[key]
	if c == nil {
		t.makeRoom(now)
		c = &charge{key: key, due: now}
		t.keys[key] = c
		heap.Push(&t.byDue, c)
	}
	c.due = later(c.due, now).Add(l.step())
	if most := now.Add(l.window); c.due.After(most) {
		c.due = most
	}
	heap.Fix(&t.byDue, c.index)
}

// makeRoom forgets the keys that are clear and, when still full, the key
// with the least charge.
func (t *throttle) makeRoom(now time.Time) {
	for len(t.byDue) > 0 && !t.byDue[0].due.After(now) {
		t.drop(t.byDue[0])
	}
	if len(t.byDue) >= t.capacity {
		t.drop(t.byDue[0])
	}
}

func (t *throttle) drop(c *charge) {
	heap.Remove(&t.byDue, c.index)
	delete(t.keys, c.key)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// dueHeap orders charges by due, soonest first (container/heap).
type dueHeap []*charge

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	c := x.(*charge)
	c.index = len(*h)
	*h = append(*h, c)
}
func (h *dueHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}

// tooManyAttempts answers a client address over addressLimit.
const tooManyAttempts = "Too many attempts from your network. Wait a few minutes and try again."

// anonymousAttempt charges an attempt to the client address at an
// endpoint that does work before sign-in (a password hash, a call to an
// identity provider). Over addressLimit it answers 429 with Retry-After
// and returns false.
func (h *Handler) anonymousAttempt(w http.ResponseWriter, r *http.Request) bool {
	ok, wait := h.throttle.take(h.now(), throttleKey{"addr|" + clientIP(r), addressLimit})
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
