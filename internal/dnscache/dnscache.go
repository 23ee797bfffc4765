// Package dnscache is the caching stub resolver of outbound delivery: MX
// records, host addresses (A and AAAA) and TXT records, kept for their TTL
// as a real MTA keeps them, so that a burst of deliveries to one domain
// asks DNS once.
//
// A Resolver sends recursive queries to the configured servers
// (POSTHASTE_DNS_SERVER, else the nameservers of /etc/resolv.conf, see
// ServersFromResolvConf) in order, over UDP with EDNS0 and again over TCP
// when the answer is truncated (RFC 7766 §5). It follows CNAME chains in
// answers, asking again for a target the answer leaves out. Positive
// answers are kept for their smallest TTL, up to Config.MaxTTL; negative
// answers (NXDOMAIN and NODATA) for the TTL of their SOA record, at most its
// MINIMUM field (RFC 2308 §5), up to Config.MaxNegativeTTL; temporary
// failures (SERVFAIL, timeouts) are not kept. Concurrent identical lookups
// make one query.
//
// Its methods have the signatures and error semantics of net.Resolver's: a
// name that does not exist or has no records of the type is a
// *net.DNSError with IsNotFound set; a failure that may pass is one with
// IsTemporary set.
//
// Client is the transport under it, without a cache, which package dane
// shares to ask its validating resolver.
package dnscache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/posthaste/posthaste/internal/ttlcache"
)

// Config configures a Resolver.
type Config struct {
	// Servers are the recursive resolvers, "host:port", tried in order;
	// required.
	Servers []string
	// Timeout bounds each query to one server; 0 means 5 seconds.
	Timeout time.Duration
	// MaxTTL caps how long a positive answer is kept; 0 means 5 minutes,
	// a negative value keeps none.
	MaxTTL time.Duration
	// MaxNegativeTTL caps how long a negative answer is kept; 0 means 1
	// minute, a negative value keeps none.
	MaxNegativeTTL time.Duration
	// MaxEntries bounds the answers kept; 0 means 10,000.
	MaxEntries int
	// Now returns the time; nil means time.Now. A seam for tests.
	Now func() time.Time
}

// Resolver answers and caches lookups. It is safe for concurrent use.
type Resolver struct {
	client    *Client
	maxTTL    time.Duration
	maxNegTTL time.Duration
	cache     *ttlcache.Cache[question, answer]
}

// question is a cache key: a canonical (lower-case, absolute) name and a
// record type.
type question struct {
	name  string
	qtype uint16
}

// answer is what a question got: the records of its type at the end of
// its CNAME chain, or none (NXDOMAIN or NODATA).
type answer struct {
	rrs    []dns.RR
	server string // that answered, for errors
}

// maxCNAMEs bounds a CNAME chain, as resolvers do against loops.
const maxCNAMEs = 8

// New returns a Resolver.
func New(cfg Config) (*Resolver, error) {
	client, err := NewClient(cfg.Servers, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	r := &Resolver{
		client:    client,
		maxTTL:    cfg.MaxTTL,
		maxNegTTL: cfg.MaxNegativeTTL,
		cache:     ttlcache.New[question, answer](ttlcache.Config{MaxEntries: cfg.MaxEntries, Now: cfg.Now}),
	}
	if r.maxTTL == 0 {
		r.maxTTL = 5 * time.Minute
	}
	if r.maxNegTTL == 0 {
		r.maxNegTTL = time.Minute
	}
	return r, nil
}

// ServersFromResolvConf returns the nameservers of a resolv.conf file as
// host:port, for New (and package dane) when no DNS server is configured.
func ServersFromResolvConf(path string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	out := make([]string, 0, len(cc.Servers))
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	return out, nil
}

// LookupMX returns the MX records of name, host names absolute (with the
// trailing dot), in the order of the answer; a null MX (RFC 7505) is
// returned as the host ".".
func (r *Resolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	a, err := r.lookup(ctx, name, dns.TypeMX)
	if err != nil {
		return nil, err
	}
	out := make([]*net.MX, 0, len(a.rrs))
	for _, rr := range a.rrs {
		if mx, ok := rr.(*dns.MX); ok {
			out = append(out, &net.MX{Host: mx.Mx, Pref: mx.Preference})
		}
	}
	return out, nil
}

// LookupNetIP returns the addresses of host: network "ip4" asks for A
// records, "ip6" for AAAA, "ip" for both (IPv4 addresses first). An IP
// address is returned as is. With "ip", one family's addresses are
// returned even when the other's lookup failed.
func (r *Resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	var types []uint16
	switch network {
	case "ip":
		types = []uint16{dns.TypeA, dns.TypeAAAA}
	case "ip4":
		types = []uint16{dns.TypeA}
	case "ip6":
		types = []uint16{dns.TypeAAAA}
	default:
		return nil, &net.DNSError{Err: "unsupported network " + network, Name: host}
	}
	type result struct {
		a   answer
		err error
	}
	results := make([]chan result, len(types))
	for i, qtype := range types {
		results[i] = make(chan result, 1)
		go func() {
			a, err := r.lookup(ctx, host, qtype)
			results[i] <- result{a, err}
		}()
	}
	var addrs []netip.Addr
	var firstErr error
	for _, ch := range results {
		res := <-ch
		if res.err != nil {
			if firstErr == nil || isNotFound(firstErr) {
				firstErr = res.err // a failure says more than "not found"
			}
			continue
		}
		for _, rr := range res.a.rrs {
			switch rr := rr.(type) {
			case *dns.A:
				if a, ok := netip.AddrFromSlice(rr.A.To4()); ok {
					addrs = append(addrs, a)
				}
			case *dns.AAAA:
				if a, ok := netip.AddrFromSlice(rr.AAAA.To16()); ok {
					addrs = append(addrs, a)
				}
			}
		}
	}
	if len(addrs) > 0 {
		return addrs, nil
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// LookupTXT returns the TXT records of name, the character-strings of each
// record joined (RFC 7208 §3.3 and RFC 8461 §3.1 read them so).
func (r *Resolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	a, err := r.lookup(ctx, name, dns.TypeTXT)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(a.rrs))
	for _, rr := range a.rrs {
		if t, ok := rr.(*dns.TXT); ok {
			var b strings.Builder
			for _, s := range t.Txt {
				b.WriteString(unescapeTXT(s))
			}
			out = append(out, b.String())
		}
	}
	return out, nil
}

func isNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// lookup answers name and qtype from the cache or the servers. A negative
// answer is a *net.DNSError with IsNotFound, and is cached too.
func (r *Resolver) lookup(ctx context.Context, name string, qtype uint16) (answer, error) {
	q := question{name: dns.CanonicalName(name), qtype: qtype}
	a, err := r.cache.Load(ctx, q, func(ctx context.Context) (answer, time.Duration, error) {
		return r.resolve(ctx, q)
	})
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) {
			return answer{}, err
		}
		// The caller's context ended.
		return answer{}, &net.DNSError{Err: err.Error(), Name: name, UnwrapErr: err,
			IsTimeout: errors.Is(err, context.DeadlineExceeded)}
	}
	if len(a.rrs) == 0 {
		return answer{}, &net.DNSError{Err: "no such host", Name: name, Server: a.server, IsNotFound: true}
	}
	return a, nil
}

// resolve asks the servers for q, following CNAMEs, and says how long the
// answer may be kept. Only negative answers and answers with records come
// back without an error.
func (r *Resolver) resolve(ctx context.Context, q question) (answer, time.Duration, error) {
	name := q.name
	ttl := time.Duration(-1) // the smallest TTL met so far; -1 for none yet
	take := func(t uint32) {
		if d := time.Duration(t) * time.Second; ttl < 0 || d < ttl {
			ttl = d
		}
	}
	for range maxCNAMEs + 1 {
		resp, server, err := r.exchange(ctx, name, q.qtype)
		if err != nil {
			return answer{}, 0, err
		}
		// Walk the chain from name through the answer section.
		rrs, target := chase(resp.Answer, name, q.qtype, take)
		if len(rrs) > 0 {
			return answer{rrs: rrs, server: server}, capTTL(ttl, r.maxTTL), nil
		}
		if target != name && resp.Rcode == dns.RcodeSuccess && !hasNegativeSOA(resp) {
			// The answer stops at an alias whose target it does not
			// cover: ask for the target.
			name = target
			continue
		}
		// NXDOMAIN or NODATA, for the last name of the chain (RFC 6604).
		// RFC 2308 §5: kept for the SOA's TTL, at most its MINIMUM; an
		// answer without SOA is not kept.
		neg := time.Duration(0)
		for _, rr := range resp.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				neg = time.Duration(min(soa.Hdr.Ttl, soa.Minttl)) * time.Second
				break
			}
		}
		if ttl >= 0 {
			neg = min(neg, ttl) // the CNAMEs that led here
		}
		return answer{server: server}, capTTL(neg, r.maxNegTTL), nil
	}
	return answer{}, 0, &net.DNSError{Err: "too many CNAMEs", Name: q.name}
}

// chase follows the CNAME chain from name through rrs and returns the
// records of qtype at its end, or none and the last name of the chain.
// take sees the TTL of every record used.
func chase(rrs []dns.RR, name string, qtype uint16, take func(uint32)) ([]dns.RR, string) {
	for range maxCNAMEs + 1 {
		var found []dns.RR
		var cname *dns.CNAME
		for _, rr := range rrs {
			h := rr.Header()
			if h.Class != dns.ClassINET || !strings.EqualFold(h.Name, name) {
				continue
			}
			switch {
			case h.Rrtype == qtype:
				found = append(found, rr)
			case h.Rrtype == dns.TypeCNAME && cname == nil:
				cname = rr.(*dns.CNAME)
			}
		}
		if len(found) > 0 {
			for _, rr := range found {
				take(rr.Header().Ttl)
			}
			return found, name
		}
		if cname == nil {
			return nil, name
		}
		take(cname.Hdr.Ttl)
		name = dns.CanonicalName(cname.Target)
	}
	return nil, name
}

// hasNegativeSOA reports whether resp carries the SOA of a negative
// answer in its authority section.
func hasNegativeSOA(resp *dns.Msg) bool {
	for _, rr := range resp.Ns {
		if _, ok := rr.(*dns.SOA); ok {
			return true
		}
	}
	return false
}

func capTTL(ttl, limit time.Duration) time.Duration {
	if limit < 0 || ttl < 0 {
		return 0
	}
	return min(ttl, limit)
}

// exchange asks for name and qtype, recursion desired; see
// Client.Exchange.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, string, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = true
	m.SetEdns0(EDNSSize, false)
	return r.client.Exchange(ctx, m)
}

// unescapeTXT undoes miekg/dns's presentation escapes of a TXT
// character-string: "\X" is X, "\DDD" the octet of that decimal value.
func unescapeTXT(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			b.WriteByte((s[i+1]-'0')*100 + (s[i+2]-'0')*10 + (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
