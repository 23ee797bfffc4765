// Package auth issues and checks API keys. A key is "ph_" followed by 40
// random URL-safe characters; only its SHA-256 hash is stored (the token has
// 240 bits of entropy, so a slow hash adds nothing). Authenticator caches
// hits for a short TTL, so a key revoked on another process stops working
// within that TTL, and at once on the process that revoked it (Forget).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/ttlcache"
)

// TokenPrefix starts every API key.
const TokenPrefix = "ph_"

// ErrInvalidKey means the token is malformed, unknown or revoked.
var ErrInvalidKey = errors.New("invalid api key")

// NewToken returns a fresh token, the short prefix shown in listings and
// the hash to store.
func NewToken() (token, prefix string, hash []byte, err error) {
	b := make([]byte, 30)
	if _, err := rand.Read(b); err != nil {
		return "", "", nil, fmt.Errorf("reading random bytes: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, token[:len(TokenPrefix)+6], Hash(token), nil
}

// Hash is the stored form of a token.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// WellFormed reports whether token could be a key; Authenticate refuses
// the others without a lookup.
func WellFormed(token string) bool {
	return strings.HasPrefix(token, TokenPrefix) && len(token) >= len(TokenPrefix)+32 && len(token) <= 256
}

// Principal is who an authenticated request acts for.
type Principal struct {
	TeamID     uuid.UUID
	KeyID      uuid.UUID
	Permission string     // store.PermissionFullAccess or store.PermissionSendingAccess
	DomainID   *uuid.UUID // a sending key limited to one domain
	RateLimit  int        // the team's own requests per second; 0 → the default
	// AllowedIPs are the client address ranges the key may be used
	// from; empty: any address.
	AllowedIPs []netip.Prefix
	// CreatedBy is the user who made the key (store.APIKey.CreatedBy);
	// keys the key creates are theirs too.
	CreatedBy *uuid.UUID
	// ByOwner reports whether CreatedBy owned the team when the key was
	// looked up: only such keys reach the API's owner-only routes.
	ByOwner bool
}

// AllowsAddr reports whether the key may be used from the client address
// a (an IPv4-mapped IPv6 address counts as IPv4). An invalid address is
// allowed only when the key has no ranges.
func (p Principal) AllowsAddr(a netip.Addr) bool {
	if len(p.AllowedIPs) == 0 {
		return true
	}
	a = a.Unmap()
	for _, r := range p.AllowedIPs {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// MaxAllowedIPs bounds the address ranges of one key.
const MaxAllowedIPs = 50

// ParseAllowedIPs parses a key's address ranges: CIDR prefixes or single
// addresses (a host prefix), masked, without duplicates. The error names
// the first invalid entry.
func ParseAllowedIPs(items []string) ([]netip.Prefix, error) {
	if len(items) > MaxAllowedIPs {
		return nil, fmt.Errorf("at most %d address ranges", MaxAllowedIPs)
	}
	out := make([]netip.Prefix, 0, len(items))
	seen := map[netip.Prefix]bool{}
	for _, it := range items {
		it = strings.TrimSpace(it)
		var p netip.Prefix
		var err error
		if strings.Contains(it, "/") {
			p, err = netip.ParsePrefix(it)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(it); err == nil && a.Zone() == "" {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || !p.IsValid() {
			return nil, fmt.Errorf("%q is not an IP address or CIDR range such as 203.0.113.0/24 or 2001:db8::/32", it)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(0, p.Bits()-96))
		}
		if p = p.Masked(); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// FullAccess reports whether the key may use every endpoint.
func (p Principal) FullAccess() bool { return p.Permission == store.PermissionFullAccess }

// KeyStore finds live keys by hash.
type KeyStore interface {
	UseAPIKey(ctx context.Context, hash []byte) (store.APIKey, error)
}

// maxCachedKeys bounds an Authenticator's cache.
const maxCachedKeys = 100_000

// Authenticator checks tokens. Safe for concurrent use.
type Authenticator struct {
	keys  KeyStore
	ttl   time.Duration
	now   func() time.Time
	cache *ttlcache.Cache[string, Principal] // by string(hash)
}

// NewAuthenticator returns an Authenticator whose cache keeps a key for
// ttl (0 disables caching). Revocations reach other processes within ttl.
func NewAuthenticator(keys KeyStore, ttl time.Duration) *Authenticator {
	a := &Authenticator{keys: keys, ttl: ttl, now: time.Now}
	a.cache = ttlcache.New[string, Principal](ttlcache.Config{MaxEntries: maxCachedKeys,
		Now: func() time.Time { return a.now() }})
	return a
}

// Authenticate returns the principal of a token, or ErrInvalidKey.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Principal, error) {
	if !WellFormed(token) {
		return Principal{}, ErrInvalidKey
	}
	hash := Hash(token)
	if p, ok := a.cache.Get(string(hash)); ok {
		return p, nil
	}
	start := a.now()
	k, err := a.keys.UseAPIKey(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		a.Forget(hash)
		return Principal{}, ErrInvalidKey
	}
	if err != nil {
		return Principal{}, fmt.Errorf("looking up api key: %w", err)
	}
	p := Principal{TeamID: k.TeamID, KeyID: k.ID, Permission: k.Permission, DomainID: k.DomainID,
		RateLimit: k.TeamRateLimit, AllowedIPs: k.AllowedIPs, CreatedBy: k.CreatedBy, ByOwner: k.ByOwner}
	// Kept for ttl from before the lookup, so that a revocation after
	// it is seen within ttl; a ttl of 0 keeps nothing.
	a.cache.Set(string(hash), p, a.ttl-a.now().Sub(start))
	return p, nil
}

// Cached returns the principal of a token when this process's cache holds
// it, without a database lookup: callers throttle the lookups that miss.
func (a *Authenticator) Cached(token string) (Principal, bool) {
	return a.cache.Get(string(Hash(token)))
}

// Forget drops a key from this process's cache.
func (a *Authenticator) Forget(hash []byte) {
	a.cache.Delete(string(hash))
}
