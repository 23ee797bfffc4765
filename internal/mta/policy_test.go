package mta

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dane"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/mtasts"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/ststest"
)

const (
	enforcePolicy = "version: STSv1\r\nmode: enforce\r\nmx: mx.example.test\r\nmax_age: 86400\r\n"
	testingPolicy = "version: STSv1\r\nmode: testing\r\nmx: mx.example.test\r\nmax_age: 86400\r\n"
)

// withSTS publishes policy for example.test (its _mta-sts record on d, the
// policy on a loopback HTTPS server) and gives the client an MTA-STS cache
// that fetches it through the egress guard.
func withSTS(t *testing.T, d *dnstest.Server, policy string) func(*Config) {
	t.Helper()
	srv := ststest.NewServer(t, "example.test")
	srv.SetPolicy("example.test", policy)
	d.AddA("mta-sts.example.test", "127.0.0.1")
	d.AddTXT("_mta-sts.example.test", "v=STSv1; id=1")
	eg := egress.New(egress.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: d.Resolver(), RootCAs: srv.CertPool(), Timeout: 5 * time.Second})
	sts, err := mtasts.New(mtasts.Config{Resolver: cachingResolver(t, d, nil), HTTP: eg.HTTPClient(), Port: srv.Port(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	return func(cfg *Config) { cfg.STS = sts }
}

// trusting makes the client trust mx's certificate.
func trusting(mx *smtptest.Server) func(*Config) {
	return func(cfg *Config) { cfg.RootCAs = mx.CertPool() }
}

func withDANE(t *testing.T, d *dnstest.Server) func(*Config) {
	r, err := dane.New(dane.Config{Servers: []string{d.Addr()}})
	require.NoError(t, err)
	return func(cfg *Config) { cfg.DANE = r }
}

func all(edits ...func(*Config)) func(*Config) {
	return func(cfg *Config) {
		for _, e := range edits {
			e(cfg)
		}
	}
}

func deliverOne(t *testing.T, c *Client) Result {
	t.Helper()
	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)})
	require.Len(t, got, 1)
	return got[0]
}

func requireResult(t *testing.T, r Result, w want, msg string) {
	t.Helper()
	require.Equal(t, w, want{r.Status, r.Code, r.EnhancedCode}, r.Message)
	require.Contains(t, r.Message, msg)
}

func TestMTASTSEnforce(t *testing.T) {
	t.Run("valid certificate delivers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		c := newClient(t, d, mx.Port(), all(withSTS(t, d, enforcePolicy), trusting(mx)))
		requireResult(t, deliverOne(t, c), delivered, "queued")
		require.True(t, mx.Messages()[0].TLS)
	})
	t.Run("certificate not valid defers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		c := newClient(t, d, mx.Port(), withSTS(t, d, enforcePolicy)) // the MX's certificate is not trusted
		r := deliverOne(t, c)
		requireResult(t, r, want{Deferred, 451, "4.7.5"},
			"MTA-STS policy of example.test: certificate of mx.example.test not valid: x509: certificate signed by unknown authority")
		require.Equal(t, "mx.example.test", r.RemoteServer)
		require.Empty(t, mx.Messages())
	})
	t.Run("certificate for another name defers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true, CertHosts: []string{"other.test"}})
		c := newClient(t, d, mx.Port(), all(withSTS(t, d, enforcePolicy), trusting(mx)))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.5"}, "not valid: x509: certificate is valid for localhost, mx.smtptest, other.test, not mx.example.test")
		require.Empty(t, mx.Messages())
	})
	t.Run("no STARTTLS defers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{})
		c := newClient(t, d, mx.Port(), withSTS(t, d, enforcePolicy))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.4"},
			"MTA-STS policy of example.test requires TLS but mx.example.test does not offer STARTTLS")
		require.Empty(t, mx.Messages())
	})
	t.Run("broken STARTTLS defers without plaintext fallback", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{BrokenSTARTTLS: true})
		c := newClient(t, d, mx.Port(), withSTS(t, d, enforcePolicy))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.5"}, "MTA-STS policy of example.test requires TLS but it failed")
		require.Empty(t, mx.Messages())
		require.Equal(t, 1, mx.Connections())
	})
	t.Run("MX not listed is not tried", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		c := newClient(t, d, mx.Port(), all(withSTS(t, d, "version: STSv1\nmode: enforce\nmx: *.elsewhere.test\nmax_age: 600\n"), trusting(mx)))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.0"},
			"MTA-STS policy of example.test does not list MX host mx.example.test")
		require.Zero(t, mx.Connections())
	})
	t.Run("only listed MX hosts are tried", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		// The preferred MX is not listed: it is never connected to.
		rogue := smtptest.NewServer(t, smtptest.Options{Addr: "127.0.0.2:" + strconv.Itoa(mx.Port()), STARTTLS: true,
			CertHosts: []string{"rogue.example.test"}})
		d.AddMX("example.test", "rogue.example.test", 5)
		d.AddA("rogue.example.test", "127.0.0.2")
		c := newClient(t, d, mx.Port(), all(withSTS(t, d, enforcePolicy), trusting(mx)))
		requireResult(t, deliverOne(t, c), delivered, "queued")
		require.Zero(t, rogue.Connections())
		require.Len(t, mx.Messages(), 1)
	})
}

// RFC 8461 §5: under mode testing failures are reported, mail delivered.
func TestMTASTSTesting(t *testing.T) {
	t.Run("certificate not valid", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		c := newClient(t, d, mx.Port(), withSTS(t, d, testingPolicy))
		r := deliverOne(t, c)
		requireResult(t, r, delivered, "MTA-STS policy of example.test in mode testing: certificate of mx.example.test not valid")
		require.Contains(t, r.Message, "delivered since the policy is in mode testing")
		require.Len(t, mx.Messages(), 1)
	})
	t.Run("no TLS", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{})
		c := newClient(t, d, mx.Port(), withSTS(t, d, testingPolicy))
		requireResult(t, deliverOne(t, c), delivered, "mx.example.test offers no TLS")
		require.Len(t, mx.Messages(), 1)
	})
	t.Run("MX not listed", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		c := newClient(t, d, mx.Port(), all(withSTS(t, d, "version: STSv1\nmode: testing\nmx: other.test\nmax_age: 600\n"), trusting(mx)))
		requireResult(t, deliverOne(t, c), delivered, "MX host mx.example.test is not listed")
		require.Len(t, mx.Messages(), 1)
	})
	t.Run("policy met", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		c := newClient(t, d, mx.Port(), all(withSTS(t, d, testingPolicy), trusting(mx)))
		r := deliverOne(t, c)
		requireResult(t, r, delivered, "queued")
		require.NotContains(t, r.Message, "MTA-STS")
	})
}

// A session pooled for a domain without a policy is not handed to a
// domain whose policy it does not meet.
func TestPooledSessionMustMeetPolicy(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{STARTTLS: true})
	d.AddMX("plain.test", "mx.example.test", 10)
	c := newClient(t, d, mx.Port(), withSTS(t, d, enforcePolicy)) // the MX's certificate is not trusted
	got := c.Deliver(testContext(t), "plain.test", Envelope{From: sender, To: []string{"a@plain.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"a@plain.test"}, delivered)
	require.Equal(t, 1, mx.OpenConnections(), "the session is pooled")

	requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.5"}, "MTA-STS policy of example.test")
	require.Equal(t, 2, mx.Connections(), "the pooled session was not used")
	require.Len(t, mx.Messages(), 1)
}

// tlsaFor returns the DANE-EE SPKI SHA-256 association data of mx's
// certificate.
func tlsaFor(t *testing.T, mx *smtptest.Server) []byte {
	block, _ := pem.Decode(mx.CertPEM())
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return sum[:]
}

// tlsaName is where the TLSA records of the test MX live: its port, 25 in
// production (RFC 7672 §2.2.3).
func tlsaName(mx *smtptest.Server) string {
	return "_" + strconv.Itoa(mx.Port()) + "._tcp.mx.example.test"
}

func TestDANE(t *testing.T) {
	t.Run("DANE-EE match delivers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.AddTLSA(tlsaName(mx), 3, 1, 1, tlsaFor(t, mx))
		d.SetSecure("example.test", true)
		// The certificate is not PKIX-trusted: DANE-EE alone authenticates.
		c := newClient(t, d, mx.Port(), withDANE(t, d))
		requireResult(t, deliverOne(t, c), delivered, "queued")
		require.True(t, mx.Messages()[0].TLS)
	})
	t.Run("DANE takes precedence over MTA-STS", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.AddTLSA(tlsaName(mx), 3, 1, 1, tlsaFor(t, mx))
		d.SetSecure("example.test", true)
		c := newClient(t, d, mx.Port(), all(withDANE(t, d), withSTS(t, d, enforcePolicy)))
		requireResult(t, deliverOne(t, c), delivered, "queued")
	})
	t.Run("mismatch defers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.AddTLSA(tlsaName(mx), 3, 1, 1, make([]byte, 32))
		d.SetSecure("example.test", true)
		c := newClient(t, d, mx.Port(), all(withDANE(t, d), trusting(mx)))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.5"},
			"DANE: certificate of mx.example.test not valid: certificate matches no TLSA record")
		require.Empty(t, mx.Messages())
	})
	t.Run("no STARTTLS defers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{})
		d.AddTLSA(tlsaName(mx), 3, 1, 1, make([]byte, 32))
		d.SetSecure("example.test", true)
		c := newClient(t, d, mx.Port(), withDANE(t, d))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.4"}, "DANE requires TLS but mx.example.test does not offer STARTTLS")
		require.Empty(t, mx.Messages())
	})
	t.Run("TLSA without AD is ignored", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.AddTLSA(tlsaName(mx), 3, 1, 1, make([]byte, 32))
		c := newClient(t, d, mx.Port(), withDANE(t, d))
		requireResult(t, deliverOne(t, c), delivered, "queued")
	})
	t.Run("TLSA of a host under an insecure MX is ignored", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.AddTLSA(tlsaName(mx), 3, 1, 1, make([]byte, 32))
		d.SetSecure("mx.example.test", true) // the host's zone, not the domain's MX answer
		c := newClient(t, d, mx.Port(), withDANE(t, d))
		requireResult(t, deliverOne(t, c), delivered, "queued")
	})
	t.Run("failed TLSA lookup defers", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.SetSecure("example.test", true)
		d.ServFail(tlsaName(mx), true)
		c := newClient(t, d, mx.Port(), withDANE(t, d))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.4.3"}, "DANE: TLSA records of mx.example.test")
		require.Zero(t, mx.Connections())
	})
	t.Run("unusable records require TLS only", func(t *testing.T) {
		d, mx := newMX(t, smtptest.Options{STARTTLS: true})
		d.AddTLSA(tlsaName(mx), 1, 1, 1, make([]byte, 32)) // PKIX-EE: unusable for SMTP
		d.SetSecure("example.test", true)
		c := newClient(t, d, mx.Port(), withDANE(t, d))
		requireResult(t, deliverOne(t, c), delivered, "queued")

		d2, plain := newMX(t, smtptest.Options{})
		d2.AddTLSA(tlsaName(plain), 1, 1, 1, make([]byte, 32))
		d2.SetSecure("example.test", true)
		c = newClient(t, d2, plain.Port(), withDANE(t, d2))
		requireResult(t, deliverOne(t, c), want{Deferred, 451, "4.7.4"}, "DANE requires TLS")
	})
}
