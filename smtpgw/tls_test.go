package smtpgw

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

// TestCertificateReload: the files are looked at once a second, by the
// reloader's clock, which the test moves instead of waiting.
func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_, err := EnsureSelfSigned(cert, key, []string{"first.test"})
	require.NoError(t, err)
	made, err := EnsureSelfSigned(cert, key, []string{"ignored.test"})
	require.NoError(t, err)
	require.False(t, made, "existing files are kept")
	r, err := NewCertReloader(cert, key, nil)
	require.NoError(t, err)
	clock := clocktest.New(time.Now())
	r.now = clock.Now
	name := func() string {
		t.Helper()
		c, err := r.GetCertificate(nil)
		require.NoError(t, err)
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		require.NoError(t, err)
		return leaf.DNSNames[0]
	}
	// The reloader notices a change by size and modification time; files
	// written within one tick of the file system's clock may share a
	// time, so each version gets its own.
	version := func(n int) {
		at := time.Date(2026, 1, 1, n, 0, 0, 0, time.UTC)
		require.NoError(t, os.Chtimes(cert, at, at))
		require.NoError(t, os.Chtimes(key, at, at))
	}
	require.Equal(t, "first.test", name())
	require.NoError(t, os.Remove(cert))
	require.NoError(t, os.Remove(key))
	_, err = EnsureSelfSigned(cert, key, []string{"second.test"})
	require.NoError(t, err)
	version(2)
	clock.Advance(reloadCheck - time.Millisecond)
	require.Equal(t, "first.test", name(), "not looked at again within a second")
	clock.Advance(time.Millisecond)
	require.Equal(t, "second.test", name())

	// A broken pair keeps the previous certificate.
	require.NoError(t, os.WriteFile(cert, []byte("garbage"), 0o600))
	version(3)
	clock.Advance(reloadCheck)
	require.Equal(t, "second.test", name())
	// Repaired, it is loaded again.
	require.NoError(t, os.Remove(cert))
	require.NoError(t, os.Remove(key))
	_, err = EnsureSelfSigned(cert, key, []string{"third.test"})
	require.NoError(t, err)
	version(4)
	clock.Advance(reloadCheck)
	require.Equal(t, "third.test", name())
}
