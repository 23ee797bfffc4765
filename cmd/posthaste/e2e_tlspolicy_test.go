package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/ststest"
)

// TestDevRecipientTLSPolicies delivers through `posthaste dev` to
// recipient domains that demand authenticated TLS, each with an MX of its
// own on a loopback address (all on one port, POSTHASTE_MX_PORT):
// MTA-STS (RFC 8461) policies served by a loopback HTTPS server, DANE
// (RFC 7672) TLSA records in a zone the test DNS server marks secure.
// A policy the MX meets delivers over TLS; one it does not meet sends
// nothing to it, defers the recipient with the policy's reason and, after
// POSTHASTE_DELIVERY_EXPIRE, bounces it (Transient) with that reason; a
// policy in mode testing reports and delivers.
func TestDevRecipientTLSPolicies(t *testing.T) {
	ctx := context.Background()
	dns := dnstest.NewServer(t)
	trusted := smtptest.NewServer(t, smtptest.Options{STARTTLS: true, CertHosts: []string{"mx.sts.test"}})
	port := trusted.Port()
	mxAt := func(ip, host string) *smtptest.Server {
		return smtptest.NewServer(t, smtptest.Options{Addr: ip + ":" + strconv.Itoa(port), STARTTLS: true,
			CertHosts: []string{host}})
	}
	untrusted := mxAt("127.0.0.2", "mx.badsts.test")
	testingMX := mxAt("127.0.0.3", "mx.teststs.test")
	daneMX := mxAt("127.0.0.4", "mx.dane.test")
	// Its certificate is trusted for its name: only DANE refuses it.
	daneBadMX := mxAt("127.0.0.5", "mx.badane.test")
	for domain, ip := range map[string]string{"sts.test": "127.0.0.1", "badsts.test": "127.0.0.2",
		"teststs.test": "127.0.0.3", "dane.test": "127.0.0.4", "badane.test": "127.0.0.5"} {
		dns.AddMX(domain, "mx."+domain, 10)
		dns.AddA("mx."+domain, ip)
	}

	// MTA-STS: the _mta-sts record and the policy, listing the domain's MX.
	policies := ststest.NewServer(t, "sts.test", "badsts.test", "teststs.test")
	for domain, mode := range map[string]string{"sts.test": "enforce", "badsts.test": "enforce", "teststs.test": "testing"} {
		dns.AddTXT("_mta-sts."+domain, "v=STSv1; id=20261125")
		dns.AddA("mta-sts."+domain, "127.0.0.1")
		policies.SetPolicy(domain, fmt.Sprintf("version: STSv1\r\nmode: %s\r\nmx: mx.%s\r\nmax_age: 86400\r\n", mode, domain))
	}
	// DANE: DANE-EE(3) SPKI(1) SHA-256(1) records at the MX port in
	// DNSSEC-secure zones; badane.test's matches no certificate.
	dns.AddTLSA(tlsaOwner(port, "mx.dane.test"), 3, 1, 1, spkiSHA256(t, daneMX.CertPEM()))
	dns.SetSecure("dane.test", true)
	dns.AddTLSA(tlsaOwner(port, "mx.badane.test"), 3, 1, 1, make([]byte, sha256.Size))
	dns.SetSecure("badane.test", true)

	caFile := filepath.Join(t.TempDir(), "roots.pem")
	require.NoError(t, os.WriteFile(caFile, bytes.Join([][]byte{trusted.CertPEM(), daneBadMX.CertPEM(),
		policies.CertPEM()}, nil), 0o600))
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, port)
	for k, v := range map[string]string{
		"POSTHASTE_TLS_CA_FILE":            caFile,
		"POSTHASTE_MTA_STS":                "true",
		"POSTHASTE_MTA_STS_PORT":           strconv.Itoa(policies.Port()),
		"POSTHASTE_DANE":                   "true",
		"POSTHASTE_DELIVERY_RETRY_INITIAL": "300ms",
		"POSTHASTE_DELIVERY_RETRY_MAX":     "1s",
		"POSTHASTE_DELIVERY_EXPIRE":        "3s",
	} {
		env[k] = v
	}
	dev := startDev(t, env)
	defer dev.stop(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	defer st.Close()
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}
	c.verifiedDomain(dns, "shop.test")

	cases := []struct {
		name   string
		domain string
		mx     *smtptest.Server
		reason string // "" when delivered; else why it is refused
		id     string
	}{
		{name: "MTA-STS enforce, trusted certificate", domain: "sts.test", mx: trusted},
		{name: "MTA-STS enforce, untrusted certificate", domain: "badsts.test", mx: untrusted,
			reason: "451 4.7.5 MTA-STS policy of badsts.test: certificate of mx.badsts.test not valid: x509: certificate signed by unknown authority"},
		{name: "MTA-STS testing, untrusted certificate", domain: "teststs.test", mx: testingMX},
		{name: "DANE, matching TLSA", domain: "dane.test", mx: daneMX},
		{name: "DANE, mismatching TLSA", domain: "badane.test", mx: daneBadMX,
			reason: "451 4.7.5 DANE: certificate of mx.badane.test not valid: certificate matches no TLSA record"},
	}
	// Sent at once: the two that are refused run out their delivery
	// windows side by side.
	for i := range cases {
		cases[i].id = c.send(map[string]any{"from": "hello@shop.test", "to": "ann@" + cases[i].domain,
			"subject": cases[i].name, "text": "x"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := apiClient{t: t, base: c.base, key: c.key}
			rcpt := "ann@" + tc.domain
			if tc.reason == "" {
				c.waitFor(tc.id, map[string]string{rcpt: "delivered"})
				msgs := tc.mx.Messages()
				require.Len(t, msgs, 1)
				require.Equal(t, []string{rcpt}, msgs[0].To)
				require.True(t, msgs[0].TLS, "delivered over STARTTLS")
				return
			}
			e := c.waitFor(tc.id, map[string]string{rcpt: "bounced"})
			require.Zero(t, tc.mx.MailCommands(), "nothing is sent to an MX that does not meet the policy")
			bounce := e["recipients"].([]any)[0].(map[string]any)["bounce"].(map[string]any)
			require.Equal(t, "Transient", bounce["type"], "deferred until the delivery window ended")
			require.Contains(t, bounce["message"], "Delivery did not succeed before the retry period ended: ")
			require.Contains(t, bounce["message"], tc.reason)

			evs, err := st.Emails.Events(ctx, uuid.MustParse(tc.id))
			require.NoError(t, err)
			var delayed []string
			for _, ev := range evs {
				if ev.Type == store.EventDeliveryDelayed {
					delayed = append(delayed, fmt.Sprint(ev.Detail["message"]))
				}
			}
			require.Len(t, delayed, 1, "deferred first, once")
			require.Contains(t, delayed[0], tc.reason)
			require.Equal(t, store.EventBounced, evs[len(evs)-1].Type)
		})
	}
	for _, domain := range []string{"sts.test", "badsts.test", "teststs.test"} {
		require.Positive(t, policies.Requests(domain), "the policy of %s was fetched", domain)
	}
}

// tlsaOwner is where the TLSA records of host's SMTP service on port
// live (RFC 7672 §2.2.3: _25._tcp.<host> in production).
func tlsaOwner(port int, host string) string {
	return "_" + strconv.Itoa(port) + "._tcp." + host
}

// spkiSHA256 is the SHA-256 of the public key of the PEM certificate:
// the association data of a TLSA 3 1 1 record.
func spkiSHA256(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return sum[:]
}
