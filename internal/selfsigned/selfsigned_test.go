package selfsigned

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewVerifiesForItsHostsAndRoundTripsAsPEM(t *testing.T) {
	for _, ca := range []bool{false, true} {
		c, err := New(Options{Hosts: []string{"mx.example.test", "127.0.0.1", ""}, Organization: "t",
			Validity: time.Hour, CA: ca})
		require.NoError(t, err)
		require.Equal(t, "mx.example.test", c.Leaf.Subject.CommonName)
		require.Equal(t, []string{"mx.example.test"}, c.Leaf.DNSNames)
		require.Len(t, c.Leaf.IPAddresses, 1)
		require.Equal(t, ca, c.Leaf.IsCA)
		require.WithinDuration(t, time.Now().Add(time.Hour), c.Leaf.NotAfter, time.Minute)

		pool := x509.NewCertPool()
		pool.AddCert(c.Leaf)
		for _, host := range []string{"mx.example.test", "127.0.0.1"} {
			_, err = c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
			require.NoError(t, err, "ca %v, host %s", ca, host)
		}
		_, err = c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example.test"})
		require.Error(t, err)

		certPEM, keyPEM, err := PEM(c)
		require.NoError(t, err)
		back, err := tls.X509KeyPair(certPEM, keyPEM)
		require.NoError(t, err)
		require.Equal(t, c.Certificate, back.Certificate)
	}
	_, err := New(Options{})
	require.Error(t, err)
}
