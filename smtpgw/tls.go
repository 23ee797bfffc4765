package smtpgw

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/selfsigned"
)

// reloadCheck is how often the certificate files are looked at.
const reloadCheck = time.Second

// CertReloader serves the certificate of a certificate and key file pair
// and loads them again when either changes (size or modification time,
// looked at no more than once a second), so a renewed certificate is used
// without a restart. A pair that fails to load keeps the previous one.
type CertReloader struct {
	certFile, keyFile string
	logger            *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// NewCertReloader loads the pair once; an error names the files.
func NewCertReloader(certFile, keyFile string, logger *slog.Logger) (*CertReloader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &CertReloader{certFile: certFile, keyFile: keyFile, logger: logger, now: time.Now}
	stamp, err := r.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	r.cert, r.stamp, r.checked = &cert, stamp, r.now()
	return r, nil
}

func (r *CertReloader) fileStamp() (string, error) {
	var stamp string
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("TLS certificate: %w", err)
		}
		stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= reloadCheck {
		r.checked = now
		if stamp, err := r.fileStamp(); err == nil && stamp != r.stamp {
			cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
			if err != nil {
				r.logger.Warn("TLS certificate changed but does not load; keeping the previous one",
					"cert_file", r.certFile, "err", err)
			} else {
				r.cert, r.stamp = &cert, stamp
				r.logger.Info("TLS certificate reloaded", "cert_file", r.certFile)
			}
		}
	}
	return r.cert, nil
}

// TLSConfig is a server configuration (TLS 1.2 and later) serving the
// reloaded certificate.
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

// EnsureSelfSigned writes a self-signed certificate (ECDSA P-256, valid
// for about ten years) for hosts (names and IP addresses) and its key, unless
// both files exist. It reports whether it wrote them.
func EnsureSelfSigned(certFile, keyFile string, hosts []string) (bool, error) {
	_, errC := os.Stat(certFile)
	_, errK := os.Stat(keyFile)
	if errC == nil && errK == nil {
		return false, nil
	}
	if !errors.Is(errC, os.ErrNotExist) && errC != nil {
		return false, errC
	}
	c, err := selfsigned.New(selfsigned.Options{Hosts: hosts, Organization: "Posthaste (self-signed)",
		Validity: 10 * 365 * 24 * time.Hour})
	if err != nil {
		return false, err
	}
	certPEM, keyPEM, err := selfsigned.PEM(c)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		return false, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return false, err
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return false, err
	}
	return true, nil
}
