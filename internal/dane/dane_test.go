package dane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// issue makes a certificate for names signed by parent (self-signed when
// parent is nil), valid from notBefore for a day.
func issue(t *testing.T, names []string, ca bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, notBefore time.Time) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: ca,
	}
	if ca {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.DNSNames = nil
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c, key
}

func sum256(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
func sum512(b []byte) []byte { s := sha512.Sum512(b); return s[:] }

func TestVerify(t *testing.T) {
	now := time.Now().Add(-time.Hour)
	ca, caKey := issue(t, []string{"Test CA"}, true, nil, nil, now)
	leaf, _ := issue(t, []string{"mx.example.test"}, false, ca, caKey, now)
	otherCA, otherKey := issue(t, []string{"Other CA"}, true, nil, nil, now)
	wrongName, _ := issue(t, []string{"other.test"}, false, ca, caKey, now)
	expired, _ := issue(t, []string{"elsewhere.test"}, false, otherCA, otherKey, now.Add(-72*time.Hour))

	chain := []*x509.Certificate{leaf, ca}
	for _, tc := range []struct {
		name    string
		records []TLSA
		chain   []*x509.Certificate
		err     string // "" means it verifies
	}{
		{"DANE-EE SPKI SHA-256", []TLSA{{3, 1, 1, sum256(leaf.RawSubjectPublicKeyInfo)}}, chain, ""},
		{"DANE-EE full certificate", []TLSA{{3, 0, 0, leaf.Raw}}, chain, ""},
		{"DANE-EE certificate SHA-512", []TLSA{{3, 0, 2, sum512(leaf.Raw)}}, chain, ""},
		// RFC 7672 §3.1.1: neither names nor dates matter for DANE-EE.
		{"DANE-EE ignores name and expiry", []TLSA{{3, 1, 1, sum256(expired.RawSubjectPublicKeyInfo)}}, []*x509.Certificate{expired}, ""},
		{"DANE-EE mismatch", []TLSA{{3, 1, 1, sum256(ca.RawSubjectPublicKeyInfo)}}, chain, "matches no TLSA record"},
		{"one match among several", []TLSA{{3, 1, 1, []byte("nope")}, {3, 1, 1, sum256(leaf.RawSubjectPublicKeyInfo)}}, chain, ""},
		{"DANE-TA issuer in the chain", []TLSA{{2, 0, 1, sum256(ca.Raw)}}, chain, ""},
		{"DANE-TA by key", []TLSA{{2, 1, 2, sum512(ca.RawSubjectPublicKeyInfo)}}, chain, ""},
		{"DANE-TA leaf name must match", []TLSA{{2, 0, 1, sum256(ca.Raw)}}, []*x509.Certificate{wrongName, ca}, "trust anchor matches"},
		{"DANE-TA absent from the chain", []TLSA{{2, 0, 1, sum256(ca.Raw)}}, []*x509.Certificate{leaf}, "matches no TLSA record"},
		{"DANE-TA of another CA", []TLSA{{2, 0, 1, sum256(otherCA.Raw)}}, chain, "matches no TLSA record"},
		// RFC 7672 §3.1.3: PKIX-TA(0) and PKIX-EE(1) are unusable.
		{"PKIX-EE unusable", []TLSA{{1, 1, 1, sum256(leaf.RawSubjectPublicKeyInfo)}}, chain, "matches no TLSA record"},
		{"PKIX-TA unusable", []TLSA{{0, 0, 1, sum256(ca.Raw)}}, chain, "matches no TLSA record"},
		{"unknown matching type", []TLSA{{3, 1, 3, sum256(leaf.RawSubjectPublicKeyInfo)}}, chain, "matches no TLSA record"},
		{"no certificate", []TLSA{{3, 1, 1, sum256(leaf.RawSubjectPublicKeyInfo)}}, nil, "no certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.records, tc.chain, "mx.example.test")
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
			if tc.chain != nil {
				require.True(t, errors.Is(err, ErrNoMatch))
			}
		})
	}
}

func TestUsable(t *testing.T) {
	for _, tc := range []struct {
		u, s, m uint8
		want    bool
	}{
		{3, 1, 1, true}, {2, 0, 2, true}, {2, 1, 0, true},
		{1, 1, 1, false}, {0, 0, 1, false}, {4, 1, 1, false}, {3, 2, 1, false}, {3, 1, 3, false},
	} {
		require.Equal(t, tc.want, TLSA{Usage: tc.u, Selector: tc.s, MatchingType: tc.m}.Usable(), "%d %d %d", tc.u, tc.s, tc.m)
	}
}

// The AD bit of the (validating) resolver's answer decides: without it,
// TLSA records and MX answers are not trusted.
func TestLookup(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddMX("example.test", "mx.example.test", 10)
	d.AddA("mx.example.test", "127.0.0.1")
	d.AddTLSA("_25._tcp.mx.example.test", 3, 1, 1, []byte{1, 2, 3})
	d.AddTLSA("_25._tcp.mx.example.test", 1, 1, 1, []byte{4, 5, 6})
	// The records change below: nothing is kept (TestAnswersAreKept).
	r, err := New(Config{Servers: []string{d.Addr()}, MaxCache: -1})
	require.NoError(t, err)
	ctx := t.Context()

	secure, err := r.SecureMX(ctx, "example.test")
	require.NoError(t, err)
	require.False(t, secure)
	recs, err := r.Lookup(ctx, "mx.example.test", 25)
	require.NoError(t, err)
	require.Nil(t, recs, "TLSA records without AD are ignored")

	d.SetSecure("example.test", true)
	secure, err = r.SecureMX(ctx, "example.test")
	require.NoError(t, err)
	require.True(t, secure)
	recs, err = r.Lookup(ctx, "mx.example.test.", 25)
	require.NoError(t, err)
	require.ElementsMatch(t, []TLSA{{3, 1, 1, []byte{1, 2, 3}}, {1, 1, 1, []byte{4, 5, 6}}}, recs)

	recs, err = r.Lookup(ctx, "mx.example.test", 2525)
	require.NoError(t, err)
	require.Empty(t, recs, "securely none on another port")

	// A validating resolver answers SERVFAIL for bogus data: the host
	// cannot be used.
	d.ServFail("_25._tcp.mx.example.test", true)
	_, err = r.Lookup(ctx, "mx.example.test", 25)
	require.ErrorContains(t, err, "SERVFAIL")
}

func TestNew(t *testing.T) {
	_, err := New(Config{})
	require.Error(t, err)
	_, err = New(Config{Servers: []string{"127.0.0.1"}})
	require.ErrorContains(t, err, "want host:port")
}

// TestAnswersAreKept: an answer is kept for its TTL (the test server's is
// 60 s), capped by MaxCache; a failure is not kept.
func TestAnswersAreKept(t *testing.T) {
	d := dnstest.NewServer(t)
	d.AddMX("example.test", "mx.example.test", 10)
	for _, tc := range []struct {
		name     string
		maxCache time.Duration
		kept     time.Duration
	}{
		{"the records' TTL", 0, 60 * time.Second},
		{"capped", 20 * time.Second, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.SetSecure("example.test", false)
			clock := clocktest.New(time.Now())
			r, err := New(Config{Servers: []string{d.Addr()}, MaxCache: tc.maxCache, Now: clock.Now})
			require.NoError(t, err)
			ctx := t.Context()
			secure, err := r.SecureMX(ctx, "example.test")
			require.NoError(t, err)
			require.False(t, secure)

			d.SetSecure("example.test", true)
			clock.Advance(tc.kept - time.Second)
			secure, err = r.SecureMX(ctx, "EXAMPLE.test.")
			require.NoError(t, err)
			require.False(t, secure, "the kept answer, whatever the name's case")
			clock.Advance(time.Second)
			secure, err = r.SecureMX(ctx, "example.test")
			require.NoError(t, err)
			require.True(t, secure, "asked again after %v", tc.kept)
		})
	}
	t.Run("failures", func(t *testing.T) {
		r, err := New(Config{Servers: []string{d.Addr()}})
		require.NoError(t, err)
		d.ServFail("example.test", true)
		_, err = r.SecureMX(t.Context(), "example.test")
		require.ErrorContains(t, err, "SERVFAIL")
		d.ServFail("example.test", false)
		_, err = r.SecureMX(t.Context(), "example.test")
		require.NoError(t, err, "a failure is not kept")
	})
}
