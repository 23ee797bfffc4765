// Package mtasts finds the SMTP MTA Strict Transport Security policies
// (RFC 8461) of recipient domains for outbound delivery.
//
// A Cache looks up a domain's "_mta-sts" TXT record (through the resolver
// it is given, which keeps answers for their TTL: package dnscache),
// fetches the policy it
// announces from https://mta-sts.<domain>/.well-known/mta-sts.txt (through
// the HTTP client it is given, which the caller guards: package egress),
// parses it, and keeps it for its max_age, fetching again when the record's
// id changes. A fetch that fails leaves the cached policy in force, or no
// policy when there is none (RFC 8461 §3.3). Policy.Matches tells whether
// an MX host is listed; applying the policy is package mta's job.
package mtasts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/posthaste/posthaste/internal/dnscache"
)

const (
	// maxBody bounds a policy body (RFC 8461 §3.2 policies are small;
	// 64 KiB is the limit senders commonly apply).
	maxBody = 64 << 10
	// defaultTimeout bounds one policy fetch.
	defaultTimeout = 30 * time.Second
	// defaultMaxPolicies bounds the cache.
	defaultMaxPolicies = 10000
	// failureBackoff is how long a failed fetch is not tried again for the
	// same record id, so that a broken policy server does not cost every
	// delivery a fetch.
	failureBackoff = 5 * time.Minute
)

// TXTResolver looks up TXT records with net.Resolver's error semantics
// (a *net.DNSError with IsNotFound when there are none).
// *dnscache.Resolver, which keeps answers for their TTL, and *net.Resolver
// implement it.
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

var (
	_ TXTResolver = (*net.Resolver)(nil)
	_ TXTResolver = (*dnscache.Resolver)(nil)
)

// Config configures a Cache.
type Config struct {
	// Resolver looks up _mta-sts TXT records, every Lookup: it should keep
	// answers for their TTL (*dnscache.Resolver). nil means
	// net.DefaultResolver, which keeps nothing.
	Resolver TXTResolver
	// HTTP fetches policies; required. It must verify certificates (its
	// RootCAs are the trusted roots) and should be the egress guard's
	// client (egress.Client.HTTPClient), which refuses private addresses
	// and follows no redirect. A 3xx answer is a failed fetch here anyway
	// (RFC 8461 §3.3).
	HTTP *http.Client
	// Port is the port of policy hosts; 0 means 443. Tests change it
	// (POSTHASTE_MTA_STS_PORT).
	Port int
	// Timeout bounds a fetch; 0 means 30 seconds.
	Timeout time.Duration
	// MaxPolicies bounds the cached policies; 0 means 10,000.
	MaxPolicies int
	// Now returns the time; nil means time.Now. A seam for tests.
	Now func() time.Time
	// Logger receives failed lookups and fetches; nil discards them.
	Logger *slog.Logger
}

// Cache looks up and keeps domains' policies. It is safe for concurrent
// use.
type Cache struct {
	resolver TXTResolver
	http     *http.Client
	port     int
	timeout  time.Duration
	max      int
	now      func() time.Time
	log      *slog.Logger
	group    singleflight.Group

	mu      sync.Mutex
	entries map[string]*entry // domain → its policy or last failure
}

// entry is what the cache knows of a domain.
type entry struct {
	policy  *Policy   // nil until a fetch succeeded
	expires time.Time // when policy stops being valid
	// failedID and retryAt remember a failed fetch for that record id.
	failedID string
	retryAt  time.Time
}

// New returns a Cache.
func New(cfg Config) (*Cache, error) {
	if cfg.HTTP == nil {
		return nil, errors.New("mtasts: an HTTP client is required")
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("mtasts: port %d: out of range", cfg.Port)
	}
	c := &Cache{resolver: cfg.Resolver, http: cfg.HTTP, port: cfg.Port, timeout: cfg.Timeout,
		max: cfg.MaxPolicies, now: cfg.Now, log: cfg.Logger, entries: make(map[string]*entry)}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if c.port == 0 {
		c.port = 443
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.max <= 0 {
		c.max = defaultMaxPolicies
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Lookup returns the policy in force for domain (an ASCII name), or nil
// when there is none: no valid _mta-sts record and nothing cached, or a
// policy that could not be fetched and nothing cached (RFC 8461 §3.3). A
// policy in mode none is returned as such. Failures are logged, not
// returned: they never stop delivery by themselves. When ctx is canceled
// first, Lookup returns nil at once.
func (c *Cache) Lookup(ctx context.Context, domain string) *Policy {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	// Concurrent lookups of a domain share one; it runs apart from the
	// first caller's cancellation, which must not leave the others
	// without the policy.
	ch := c.group.DoChan(domain, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.timeout)
		defer cancel()
		return c.lookup(ctx, domain), nil
	})
	select {
	case r := <-ch:
		return r.Val.(*Policy)
	case <-ctx.Done():
		return nil // the caller is canceled: it delivers nothing
	}
}

func (c *Cache) lookup(ctx context.Context, domain string) *Policy {
	log := c.log.With("rcpt_domain", domain)
	now := c.now()
	c.mu.Lock()
	e := c.entries[domain]
	var cached *Policy
	var failedID string
	var retryAt time.Time
	if e != nil {
		if e.policy != nil && now.Before(e.expires) {
			cached = e.policy
		}
		failedID, retryAt = e.failedID, e.retryAt
	}
	c.mu.Unlock()

	// Every lookup asks for the record; the resolver keeps it for its
	// TTL, so a new policy id is seen when that runs out.
	id, err := c.recordID(ctx, domain)
	if err != nil {
		// No live record: a cached policy stays in force (RFC 8461 §3.3;
		// a domain withdraws its policy by publishing mode none).
		if !errors.Is(err, errNoRecord) {
			log.Warn("looking up the MTA-STS record failed", "err", err)
		}
		return cached
	}
	if cached != nil && cached.ID == id {
		return cached
	}
	if failedID == id && now.Before(retryAt) {
		return cached
	}
	p, err := c.fetch(ctx, domain)
	if err != nil {
		log.Warn("fetching the MTA-STS policy failed", "err", err, "cached", cached != nil)
		c.store(domain, now, func(e *entry) { e.failedID, e.retryAt = id, now.Add(failureBackoff) })
		return cached
	}
	p.ID = id
	c.store(domain, now, func(e *entry) { e.policy, e.expires, e.failedID = p, now.Add(p.MaxAge), "" })
	return p
}

// store updates domain's entry with set, making room first when the cache
// is full: expired entries go, then the one that expires first.
func (c *Cache) store(domain string, now time.Time, set func(*entry)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[domain]
	if e == nil {
		if len(c.entries) >= c.max {
			c.evict(now)
		}
		e = &entry{}
		c.entries[domain] = e
	}
	set(e)
}

func (c *Cache) evict(now time.Time) {
	var first string
	var firstAt time.Time
	for d, e := range c.entries {
		at := e.expires
		if e.retryAt.After(at) {
			at = e.retryAt
		}
		if !now.Before(at) {
			delete(c.entries, d)
			continue
		}
		if first == "" || at.Before(firstAt) {
			first, firstAt = d, at
		}
	}
	if len(c.entries) >= c.max && first != "" {
		delete(c.entries, first)
	}
}

// errNoRecord means the domain publishes no valid _mta-sts record.
var errNoRecord = errors.New("no MTA-STS record")

// recordID returns the id of domain's _mta-sts TXT record. RFC 8461 §3.1:
// records not starting with "v=STSv1" are ignored; anything but exactly
// one left, valid, means no policy (errNoRecord).
func (c *Cache) recordID(ctx context.Context, domain string) (string, error) {
	txts, err := c.resolver.LookupTXT(ctx, "_mta-sts."+domain+".")
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return "", errNoRecord
		}
		return "", fmt.Errorf("looking up _mta-sts.%s: %w", domain, err)
	}
	var sts []string
	for _, t := range txts {
		if strings.HasPrefix(t, "v=STSv1") {
			sts = append(sts, t)
		}
	}
	if len(sts) != 1 {
		return "", errNoRecord
	}
	id, err := parseRecord(sts[0])
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoRecord, err)
	}
	return id, nil
}

// fetch GETs and parses domain's policy (RFC 8461 §3.3): over HTTPS with a
// certificate valid for mta-sts.<domain>, 200 only (no redirect), media
// type text/plain, at most 64 KiB.
func (c *Cache) fetch(ctx context.Context, domain string) (*Policy, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	host := "mta-sts." + domain
	if c.port != 443 {
		host = net.JoinHostPort(host, strconv.Itoa(c.port))
	}
	u := "https://" + host + "/.well-known/mta-sts.txt"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("User-Agent", "Posthaste")
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL
		}
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d, want 200", u, resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/plain" {
		return nil, fmt.Errorf("GET %s: media type %q, want text/plain", u, resp.Header.Get("Content-Type"))
	}
	if resp.ContentLength > maxBody {
		return nil, fmt.Errorf("GET %s: body is larger than %d bytes", u, maxBody)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", u, err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("GET %s: body is larger than %d bytes", u, maxBody)
	}
	p, err := Parse(string(body))
	if err != nil {
		return nil, fmt.Errorf("policy of %s: %w", domain, err)
	}
	return p, nil
}
