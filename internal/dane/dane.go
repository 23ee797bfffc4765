// Package dane authenticates SMTP servers with DNSSEC-validated TLSA
// records (DANE for SMTP, RFC 7672; TLSA records, RFC 6698 and RFC 7671).
//
// A Resolver asks a validating resolver (the configured DNS server, see
// dnscache.ServersFromResolvConf) with the EDNS0 DO bit set, and trusts an
// answer only when the resolver marks it authenticated (the AD bit): this
// package validates no signatures itself, so the path to that resolver must
// be trusted (loopback, or a private network). SecureMX tells whether a
// domain's MX answer is validated, which RFC 7672 §2.2 requires before its
// hosts' TLSA records are looked up; Lookup returns the validated TLSA
// records of an MX host; Verify checks a server's certificate chain against
// them.
package dane

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/posthaste/posthaste/internal/dnscache"
	"github.com/posthaste/posthaste/internal/ttlcache"
)

// RFC 6698 §2.1 and RFC 7218 names of TLSA fields.
const (
	UsagePKIXTA uint8 = 0 // unusable for SMTP (RFC 7672 §3.1.3)
	UsagePKIXEE uint8 = 1 // unusable for SMTP (RFC 7672 §3.1.3)
	UsageDANETA uint8 = 2 // a trust anchor of the server's chain
	UsageDANEEE uint8 = 3 // the server's own certificate or key

	SelectorCert uint8 = 0 // the whole certificate
	SelectorSPKI uint8 = 1 // its SubjectPublicKeyInfo

	MatchFull   uint8 = 0 // the selected data itself
	MatchSHA256 uint8 = 1
	MatchSHA512 uint8 = 2
)

// TLSA is one TLSA record.
type TLSA struct {
	Usage, Selector, MatchingType uint8
	Data                          []byte // certificate association data
}

// Usable reports whether an SMTP client can use the record: usage DANE-TA
// or DANE-EE, a known selector and matching type (RFC 7672 §3.1).
func (t TLSA) Usable() bool {
	return (t.Usage == UsageDANETA || t.Usage == UsageDANEEE) &&
		t.Selector <= SelectorSPKI && t.MatchingType <= MatchSHA512
}

func (t TLSA) String() string {
	return fmt.Sprintf("%d %d %d %s", t.Usage, t.Selector, t.MatchingType, hex.EncodeToString(t.Data))
}

// Config configures a Resolver.
type Config struct {
	// Servers are the validating resolvers, "host:port", tried in order
	// (POSTHASTE_DNS_SERVER, else the nameservers of /etc/resolv.conf).
	Servers []string
	// Timeout bounds each query to one server; 0 means 5 seconds.
	Timeout time.Duration
	// MaxCache caps how long an answer is kept: for its records' TTL (a
	// negative answer: its SOA's, RFC 2308) up to MaxCache. 0 means 5
	// minutes; a negative value keeps nothing.
	MaxCache time.Duration
	// Now returns the time; nil means time.Now. A seam for tests.
	Now func() time.Time
}

// maxCachedAnswers bounds the answers a Resolver keeps; a full cache
// drops expired answers, then the oldest.
const maxCachedAnswers = 10_000

// Resolver looks up DNSSEC-validated records. It is safe for concurrent
// use.
type Resolver struct {
	client   *dnscache.Client
	maxCache time.Duration

	// answers keeps answers for their TTL: every delivery asks whether
	// its domain's MX answer is validated, and a resolver on another host
	// would be asked again each time. Concurrent identical questions share
	// one query.
	answers *ttlcache.Cache[dns.Question, *dns.Msg]
}

// New returns a Resolver.
func New(cfg Config) (*Resolver, error) {
	client, err := dnscache.NewClient(cfg.Servers, cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("dane: %w", err)
	}
	maxCache := cfg.MaxCache
	if maxCache == 0 {
		maxCache = 5 * time.Minute
	}
	return &Resolver{
		client:   client,
		maxCache: maxCache,
		answers:  ttlcache.New[dns.Question, *dns.Msg](ttlcache.Config{MaxEntries: maxCachedAnswers, Now: cfg.Now}),
	}, nil
}

// query asks the servers in turn for name and qtype with DO set (and AD,
// RFC 6840 §5.7), over TCP when the UDP answer is truncated. It returns the
// first answer that is not SERVFAIL or a network error.
func (r *Resolver) query(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	q := dns.Question{Name: strings.ToLower(dns.Fqdn(name)), Qtype: qtype, Qclass: dns.ClassINET}
	return r.answers.Load(ctx, q, func(ctx context.Context) (*dns.Msg, time.Duration, error) {
		resp, err := r.exchange(ctx, name, qtype)
		if err != nil {
			return nil, 0, err
		}
		return resp, r.cacheFor(resp), nil
	})
}

// cacheFor is how long resp may be kept: the smallest TTL of its answer
// records or, for an answer without them, of its SOA record and the SOA's
// minimum (RFC 2308 §5), capped at maxCache; 0 when it says nothing.
func (r *Resolver) cacheFor(resp *dns.Msg) time.Duration {
	if r.maxCache < 0 {
		return 0
	}
	ttl := uint32(0)
	found := false
	take := func(t uint32) {
		if !found || t < ttl {
			ttl, found = t, true
		}
	}
	for _, rr := range resp.Answer {
		take(rr.Header().Ttl)
	}
	if len(resp.Answer) == 0 {
		for _, rr := range resp.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				take(soa.Hdr.Ttl)
				take(soa.Minttl)
			}
		}
	}
	return min(time.Duration(ttl)*time.Second, r.maxCache)
}

// exchange asks the servers (dnscache.Client: UDP, TCP when truncated;
// a SERVFAIL, which a validating resolver answers for bogus data, moves on
// to the next); see query.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	m.AuthenticatedData = true
	m.SetEdns0(dnscache.EDNSSize, true)
	resp, _, err := r.client.Exchange(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("looking up %s %s: %w", dns.TypeToString[qtype], name, err)
	}
	return resp, nil
}

// SecureMX reports whether the MX answer for domain (records, or their
// denial: an implicit MX) is DNSSEC-validated. Only then do DANE TLSA
// records of its hosts apply (RFC 7672 §2.2.1): an MX host name an
// attacker could have forged says nothing about which TLSA records to
// trust.
func (r *Resolver) SecureMX(ctx context.Context, domain string) (bool, error) {
	resp, err := r.query(ctx, domain, dns.TypeMX)
	if err != nil {
		return false, err
	}
	return resp.AuthenticatedData && (resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError), nil
}

// Lookup returns the TLSA records of host's SMTP service on port, at
// "_<port>._tcp.<host>" (RFC 7672 §2.2.3: port 25 for MX hosts), usable or
// not. It returns none when the answer is not validated (AD clear) or
// securely empty: DANE does not apply. An error (the lookup failed, or the
// resolver found the answer bogus) means the host cannot be used securely
// and must be skipped (RFC 7672 §2.2).
func (r *Resolver) Lookup(ctx context.Context, host string, port int) ([]TLSA, error) {
	name := "_" + strconv.Itoa(port) + "._tcp." + strings.TrimSuffix(host, ".")
	resp, err := r.query(ctx, name, dns.TypeTLSA)
	if err != nil {
		return nil, err
	}
	if !resp.AuthenticatedData {
		return nil, nil
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		return nil, fmt.Errorf("looking up TLSA %s: %s", name, dns.RcodeToString[resp.Rcode])
	}
	var out []TLSA
	for _, rr := range resp.Answer {
		t, ok := rr.(*dns.TLSA)
		if !ok {
			continue // the CNAMEs leading to them
		}
		data, err := hex.DecodeString(t.Certificate)
		if err != nil {
			// Malformed data matches nothing; keep the record so that it
			// counts as published.
			data = nil
		}
		out = append(out, TLSA{Usage: t.Usage, Selector: t.Selector, MatchingType: t.MatchingType, Data: data})
	}
	return out, nil
}

// ErrNoMatch is matched (errors.Is) by Verify's error when no usable
// record matches the chain.
var ErrNoMatch = errors.New("certificate matches no TLSA record")

// Verify checks the certificate chain a server presented (leaf first)
// against records, for the server name host (RFC 7672 §3.1): a DANE-EE(3)
// record must match the leaf, its names and validity period not checked
// (§3.1.1); a DANE-TA(2) record must match a certificate of the chain
// that then issues, through the chain, a leaf valid now for host (§3.1.2,
// §3.2.2). One matching record suffices; unusable records are ignored.
func Verify(records []TLSA, chain []*x509.Certificate, host string) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	leaf := chain[0]
	var taErr error
	for _, t := range records {
		if !t.Usable() {
			continue
		}
		switch t.Usage {
		case UsageDANEEE:
			if matches(t, leaf) {
				return nil
			}
		case UsageDANETA:
			// RFC 7672 §3.1.2: the server sends its trust anchor, so
			// only certificates of the chain need matching.
			for i, ca := range chain {
				if !matches(t, ca) {
					continue
				}
				err := verifyTA(chain[:i], ca, host)
				if err == nil {
					return nil
				}
				taErr = err
			}
		}
	}
	if taErr != nil {
		return fmt.Errorf("%w: trust anchor matches, but %v", ErrNoMatch, taErr)
	}
	return ErrNoMatch
}

// verifyTA verifies that ta issues, through below (leaf first), a leaf
// valid for host. A trust anchor that is the leaf itself is a self-issued
// certificate: only its name and validity are checked.
func verifyTA(below []*x509.Certificate, ta *x509.Certificate, host string) error {
	if len(below) == 0 {
		if err := ta.VerifyHostname(host); err != nil {
			return err
		}
		now := time.Now()
		if now.Before(ta.NotBefore) || now.After(ta.NotAfter) {
			return errors.New("certificate has expired or is not yet valid")
		}
		return nil
	}
	roots := x509.NewCertPool()
	roots.AddCert(ta)
	inter := x509.NewCertPool()
	for _, c := range below[1:] {
		inter.AddCert(c)
	}
	_, err := below[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// matches reports whether the record's data matches cert under its
// selector and matching type (RFC 6698 §2.1.2, §2.1.3).
func matches(t TLSA, cert *x509.Certificate) bool {
	var selected []byte
	switch t.Selector {
	case SelectorCert:
		selected = cert.Raw
	case SelectorSPKI:
		selected = cert.RawSubjectPublicKeyInfo
	default:
		return false
	}
	var digest []byte
	switch t.MatchingType {
	case MatchFull:
		digest = selected
	case MatchSHA256:
		d := sha256.Sum256(selected)
		digest = d[:]
	case MatchSHA512:
		d := sha512.Sum512(selected)
		digest = d[:]
	default:
		return false
	}
	return len(t.Data) > 0 && subtle.ConstantTimeCompare(digest, t.Data) == 1
}
