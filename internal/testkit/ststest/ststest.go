// Package ststest runs an MTA-STS policy server (RFC 8461 §3.3) on loopback
// for tests: HTTPS with a self-signed certificate for the policy hosts
// (mta-sts.<domain>) of the domains it serves, answering
// /.well-known/mta-sts.txt with the policy a test sets, or a failure it
// chooses.
package ststest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/posthaste/posthaste/internal/selfsigned"
)

// Response is what the server answers for one domain.
type Response struct {
	Status      int    // 0 means 200
	ContentType string // "" means text/plain; charset=utf-8
	Location    string // for a redirect status
	Body        string
}

// Server is a policy server. It is safe for concurrent use.
type Server struct {
	srv     *httptest.Server
	pool    *x509.CertPool
	certPEM []byte

	mu        sync.Mutex
	responses map[string]Response // domain → answer
	requests  map[string]int      // domain → requests served
}

// NewServer starts a server on 127.0.0.1 whose certificate is valid for
// mta-sts.<domain> of each of domains; t.Cleanup closes it.
func NewServer(t testing.TB, domains ...string) *Server {
	t.Helper()
	hosts := make([]string, 0, len(domains))
	for _, d := range domains {
		hosts = append(hosts, "mta-sts."+d)
	}
	cert, err := selfsigned.New(selfsigned.Options{Hosts: hosts, Organization: "ststest", Validity: time.Hour})
	if err != nil {
		t.Fatalf("ststest: %v", err)
	}
	s := &Server{pool: x509.NewCertPool(), responses: make(map[string]Response), requests: make(map[string]int)}
	s.pool.AddCert(cert.Leaf)
	s.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Leaf.Raw})
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// Port returns the port the server listens on, on 127.0.0.1.
func (s *Server) Port() int { return s.srv.Listener.Addr().(*net.TCPAddr).Port }

// CertPool returns a pool that trusts the server's certificate.
func (s *Server) CertPool() *x509.CertPool { return s.pool }

// CertPEM returns the server's certificate in PEM, for processes that
// read trusted roots from a file (POSTHASTE_TLS_CA_FILE).
func (s *Server) CertPEM() []byte { return s.certPEM }

// SetPolicy serves body as domain's policy.
func (s *Server) SetPolicy(domain, body string) { s.SetResponse(domain, Response{Body: body}) }

// SetResponse sets the answer for domain.
func (s *Server) SetResponse(domain string, r Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responses[domain] = r
}

// Requests returns how many policy requests for domain the server answered.
func (s *Server) Requests(domain string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[domain]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	domain, ok := strings.CutPrefix(strings.ToLower(host), "mta-sts.")
	s.mu.Lock()
	resp, known := s.responses[domain]
	if ok {
		s.requests[domain]++
	}
	s.mu.Unlock()
	if !ok || !known || r.URL.Path != "/.well-known/mta-sts.txt" {
		http.NotFound(w, r)
		return
	}
	if resp.ContentType == "" {
		resp.ContentType = "text/plain; charset=utf-8"
	}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	w.Header().Set("Content-Type", resp.ContentType)
	if resp.Location != "" {
		w.Header().Set("Location", resp.Location)
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write([]byte(resp.Body))
}
