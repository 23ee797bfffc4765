// Package selfsigned makes self-signed ECDSA P-256 certificates: the SMTP
// gateway's certificate when none is configured (posthaste dev) and the
// test SMTP servers' certificates.
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Options describe a certificate.
type Options struct {
	// Hosts are the names and IP addresses it is valid for; the first is
	// also its common name. Empty entries are skipped.
	Hosts        []string
	Organization string
	Validity     time.Duration // from now; it is also valid from an hour ago
	// CA lets it sign certificates, for clients that want the certificate
	// they trust to be an authority.
	CA bool
}

// New makes a certificate and its key; Leaf is set.
func New(o Options) (tls.Certificate, error) {
	if len(o.Hosts) == 0 || o.Hosts[0] == "" {
		return tls.Certificate{}, errors.New("self-signed certificate: no host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: o.Hosts[0], Organization: []string{o.Organization}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(o.Validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  o.CA,
	}
	if o.CA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("creating certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// PEM encodes a certificate made by New and its key (PKCS #8).
func PEM(c tls.Certificate) (certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
