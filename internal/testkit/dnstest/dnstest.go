// Package dnstest runs an authoritative DNS server on loopback for tests and
// benchmarks.
//
// The server answers UDP and TCP queries on one random 127.0.0.1 port from
// records the test adds (MX, A, AAAA, TXT, CNAME, TLSA), with one TTL for
// every record and negative answer (SetTTL), and counts the queries it
// gets (Queries), so that caching resolvers can be tested. It tells a name that does not
// exist (NXDOMAIN) from a name that exists without records of the asked type
// (NODATA), which is what mail routing needs to fall back from MX to A.
// Unicode names are stored in their ASCII (punycode) form. Zones marked
// secure get the AD bit on their answers, as from a validating resolver, so
// that DNSSEC-dependent code (DANE) can be tested without signing anything.
package dnstest

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"
)

// defaultTTL is the time to live of every answer until SetTTL; tests change
// records at will, so it only matters to callers that cache.
const defaultTTL = 60

// Server is an authoritative DNS server on loopback. It is safe for
// concurrent use; records may change while queries are answered.
type Server struct {
	addr string
	udp  *dns.Server
	tcp  *dns.Server

	mu       sync.RWMutex
	records  map[string]map[uint16][]dns.RR // canonical owner name → type → records
	servfail map[string]bool
	secure   map[string]bool // canonical zone names whose answers carry AD
	ttl      uint32          // of answers: their records, and SOA TTL and MINIMUM
	queries  map[queryKey]int
}

// queryKey counts queries by name, type and transport.
type queryKey struct {
	name  string
	qtype uint16
	tcp   bool
}

// NewServer starts a server on 127.0.0.1 (UDP and TCP on the same random
// port). It is shut down by t.Cleanup.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a server on 127.0.0.1 (UDP and TCP on the same random port)
// for programs that are not tests, such as the chaos benchmark. The caller
// shuts it down with Close.
func Start() (*Server, error) {
	s := &Server{
		records:  make(map[string]map[uint16][]dns.RR),
		servfail: make(map[string]bool),
		secure:   make(map[string]bool),
		ttl:      defaultTTL,
		queries:  make(map[queryKey]int),
	}

	pc, ln, err := listen()
	if err != nil {
		return nil, err
	}
	s.addr = pc.LocalAddr().String()
	s.udp = &dns.Server{PacketConn: pc, Handler: s}
	s.tcp = &dns.Server{Listener: ln, Handler: s}

	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		go func() { errc <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-errc:
			_ = pc.Close() // ends the UDP server if it was running
			_ = ln.Close()
			return nil, fmt.Errorf("serving: %w", err)
		}
	}
	return s, nil
}

// Close shuts the server down.
func (s *Server) Close() {
	_ = s.udp.Shutdown()
	_ = s.tcp.Shutdown()
}

// listen opens a UDP socket on a random loopback port and a TCP listener on
// the same port, retrying when another process holds the TCP side.
func listen() (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("listening on udp: %w", err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		lastErr = err
		_ = pc.Close()
	}
	return nil, nil, fmt.Errorf("listening on tcp: %w", lastErr)
}

// Addr returns the server's address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// Resolver returns a resolver that sends every query to this server (UDP,
// and TCP when an answer is truncated), whatever /etc/resolv.conf says.
func (s *Server) Resolver() *net.Resolver {
	addr := s.addr
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// SetTTL sets the TTL, in whole seconds, of every answer from now on: its
// records, and the TTL and MINIMUM of the SOA of negative answers (RFC
// 2308). It is 60 seconds until set.
func (s *Server) SetTTL(ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl = uint32(ttl / time.Second)
}

// Queries returns how many queries for name and qtype (dns.TypeMX, ...)
// the server has answered, over UDP and TCP.
func (s *Server) Queries(name string, qtype uint16) int {
	return s.count(name, qtype, false) + s.count(name, qtype, true)
}

// TCPQueries returns how many queries for name and qtype came over TCP,
// as a resolver retries a truncated UDP answer.
func (s *Server) TCPQueries(name string, qtype uint16) int { return s.count(name, qtype, true) }

func (s *Server) count(name string, qtype uint16, tcp bool) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.queries[queryKey{canonical(name), qtype, tcp}]
}

// AddMX adds an MX record for domain pointing at host with preference pref.
func (s *Server) AddMX(domain, host string, pref uint16) {
	name := canonical(domain)
	s.add(&dns.MX{Hdr: header(name, dns.TypeMX), Preference: pref, Mx: canonical(host)})
}

// AddNullMX publishes the RFC 7505 "null MX" (preference 0, host ".") for
// domain: the domain accepts no mail.
func (s *Server) AddNullMX(domain string) {
	s.add(&dns.MX{Hdr: header(canonical(domain), dns.TypeMX), Preference: 0, Mx: "."})
}

// AddA adds an A record, or an AAAA record when ip is an IPv6 address. It
// panics on a malformed ip, which is a bug in the test.
func (s *Server) AddA(name string, ip string) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		panic(fmt.Sprintf("dnstest: AddA %s: %v", name, err))
	}
	owner := canonical(name)
	if addr.Is4() || addr.Is4In6() {
		s.add(&dns.A{Hdr: header(owner, dns.TypeA), A: net.IP(addr.Unmap().AsSlice())})
		return
	}
	s.add(&dns.AAAA{Hdr: header(owner, dns.TypeAAAA), AAAA: net.IP(addr.AsSlice())})
}

// AddTXT adds a TXT record. A value longer than 255 bytes is split into
// several character-strings of at most 255 bytes (RFC 1035 §3.3.14), as DNS
// providers publish long DKIM keys; readers must join them.
func (s *Server) AddTXT(name string, value string) {
	var parts []string
	for len(value) > 255 {
		parts = append(parts, escapeTXT(value[:255]))
		value = value[255:]
	}
	parts = append(parts, escapeTXT(value))
	s.add(&dns.TXT{Hdr: header(canonical(name), dns.TypeTXT), Txt: parts})
}

// AddCNAME makes name an alias of target. Queries for other types at name
// answer the CNAME, followed by target's records of the type when this
// server has them, as a recursive resolver does.
func (s *Server) AddCNAME(name, target string) {
	s.add(&dns.CNAME{Hdr: header(canonical(name), dns.TypeCNAME), Target: canonical(target)})
}

// AddTLSA adds a TLSA record (RFC 6698) at name, such as
// "_25._tcp.mx.example.test"; data is the certificate association data.
func (s *Server) AddTLSA(name string, usage, selector, matchingType uint8, data []byte) {
	s.add(&dns.TLSA{Hdr: header(canonical(name), dns.TypeTLSA), Usage: usage, Selector: selector,
		MatchingType: matchingType, Certificate: hex.EncodeToString(data)})
}

// SetSecure makes answers for zone and every name below it carry the AD
// (authenticated data) bit when secure is true, as a validating resolver
// answers for a DNSSEC-signed zone, and drops it again when false. As RFC
// 6840 §5.7 and §5.8 have it, AD is only set for queries that ask with AD
// or the EDNS0 DO bit, and never on SERVFAIL.
func (s *Server) SetSecure(zone string, secure bool) {
	z := canonical(zone)
	s.mu.Lock()
	defer s.mu.Unlock()
	if secure {
		s.secure[z] = true
	} else {
		delete(s.secure, z)
	}
}

// isSecure reports whether name is at or below a secure zone; s.mu is
// held.
func (s *Server) isSecure(name string) bool {
	for z := range s.secure {
		if dns.IsSubDomain(z, name) {
			return true
		}
	}
	return false
}

// Remove deletes every record of type qtype (dns.TypeMX, dns.TypeA, ...) at
// name. A name left without records answers NXDOMAIN again, unless it has
// records below it.
func (s *Server) Remove(name string, qtype uint16) {
	owner := canonical(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records[owner], qtype)
	if len(s.records[owner]) == 0 {
		delete(s.records, owner)
	}
}

// ServFail makes every query for name answer SERVFAIL (a temporary failure
// to resolvers) when fail is true, and restores normal answers when false.
func (s *Server) ServFail(name string, fail bool) {
	owner := canonical(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if fail {
		s.servfail[owner] = true
	} else {
		delete(s.servfail, owner)
	}
}

func (s *Server) add(rr dns.RR) {
	owner := rr.Header().Name
	s.mu.Lock()
	defer s.mu.Unlock()
	byType := s.records[owner]
	if byType == nil {
		byType = make(map[uint16][]dns.RR)
		s.records[owner] = byType
	}
	qtype := rr.Header().Rrtype
	byType[qtype] = append(byType[qtype], rr)
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	// Go's resolver takes a non-authoritative empty answer without
	// recursion for a lame referral; say both so NODATA reads as NODATA.
	m.RecursionAvailable = true

	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	s.mu.Lock()
	s.queries[queryKey{canonical(q.Name), q.Qtype, !udp}]++
	s.mu.Unlock()
	s.answer(m, q)
	opt := req.IsEdns0()
	if req.AuthenticatedData || opt != nil && opt.Do() {
		s.mu.RLock()
		m.AuthenticatedData = m.Rcode != dns.RcodeServerFailure && s.isSecure(canonical(q.Name))
		s.mu.RUnlock()
	}

	size := dns.MaxMsgSize
	if udp {
		size = dns.MinMsgSize
	}
	if opt != nil {
		if udp {
			size = int(opt.UDPSize())
		}
		m.SetEdns0(opt.UDPSize(), opt.Do())
	}
	// Sets TC when the answer does not fit, so the resolver retries on TCP.
	m.Truncate(size)
	_ = w.WriteMsg(m)
}

func (s *Server) answer(m *dns.Msg, q dns.Question) {
	name := canonical(q.Name)
	s.mu.RLock()
	defer s.mu.RUnlock()

	if s.servfail[name] {
		m.Rcode = dns.RcodeServerFailure
		return
	}
	if !s.exists(name) {
		// RFC 2308 §2.1: NXDOMAIN with the zone's SOA for negative caching.
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, soa(name, s.ttl))
		return
	}
	for qtype, rrs := range s.records[name] {
		if qtype != q.Qtype && q.Qtype != dns.TypeANY {
			continue
		}
		for _, rr := range rrs {
			c := dns.Copy(rr)
			c.Header().Name = q.Name // echo the question's spelling
			c.Header().Ttl = s.ttl
			m.Answer = append(m.Answer, c)
		}
	}
	if cnames := s.records[name][dns.TypeCNAME]; len(m.Answer) == 0 && len(cnames) > 0 {
		c := dns.Copy(cnames[0])
		c.Header().Name = q.Name
		c.Header().Ttl = s.ttl
		m.Answer = append(m.Answer, c)
		target := cnames[0].(*dns.CNAME).Target
		for _, rr := range s.records[target][q.Qtype] {
			c := dns.Copy(rr)
			c.Header().Ttl = s.ttl
			m.Answer = append(m.Answer, c)
		}
	}
	if len(m.Answer) == 0 {
		// RFC 2308 §2.2: NODATA is NOERROR, no answer, SOA in authority.
		m.Ns = append(m.Ns, soa(name, s.ttl))
	}
}

// exists reports whether name owns records or is an empty non-terminal (a
// name with records below it), which RFC 8020 says is not NXDOMAIN.
func (s *Server) exists(name string) bool {
	if _, ok := s.records[name]; ok {
		return true
	}
	suffix := "." + name
	for owner := range s.records {
		if strings.HasSuffix(owner, suffix) {
			return true
		}
	}
	return false
}

// soa returns a SOA record for the top-level zone of name, which this
// server pretends to be authoritative for, with ttl as its TTL and
// MINIMUM.
func soa(name string, ttl uint32) dns.RR {
	labels := dns.SplitDomainName(name)
	zone := "."
	if len(labels) > 0 {
		zone = labels[len(labels)-1] + "."
	}
	h := header(zone, dns.TypeSOA)
	h.Ttl = ttl
	return &dns.SOA{
		Hdr:     h,
		Ns:      "ns.dnstest.",
		Mbox:    "hostmaster.dnstest.",
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func header(name string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: defaultTTL}
}

// canonical returns name lower-cased and fully qualified, with Unicode
// labels converted to punycode.
func canonical(name string) string {
	name = strings.TrimSuffix(name, ".")
	if a, err := idna.Lookup.ToASCII(name); err == nil {
		name = a
	}
	return dns.CanonicalName(name)
}

// escapeTXT escapes s for miekg/dns, which reads TXT strings in presentation
// format (a backslash starts an escape).
func escapeTXT(s string) string {
	return strings.ReplaceAll(s, `\`, `\\`)
}
