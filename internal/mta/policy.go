package mta

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/posthaste/posthaste/internal/dane"
	"github.com/posthaste/posthaste/internal/mtasts"
)

// domainPolicy is what secures delivery to one domain: the envelope's TLS
// mode, the domain's MTA-STS policy (RFC 8461) and, when its MX answer is
// DNSSEC-validated, its hosts' DANE TLSA records (RFC 7672), looked up as
// hosts are tried.
type domainPolicy struct {
	domain   string
	enforced bool           // Envelope TLSEnforced
	sts      *mtasts.Policy // in mode enforce or testing; nil when none applies
	secureMX bool           // DANE applies to hosts with TLSA records
	port     int
	hosts    map[string]*tlsPolicy
}

// tlsPolicy is what a session with one host must meet.
type tlsPolicy struct {
	domain   string
	enforced bool           // a certificate valid for the host under Config.RootCAs
	sts      *mtasts.Policy // nil, or a policy in mode enforce or testing
	listed   bool           // sts lists the host (RFC 8461 §4.1)
	// tlsa are the host's usable DANE TLSA records: the certificate must
	// match one, and DANE alone decides (RFC 8461 §2: DANE takes
	// precedence over MTA-STS; it also satisfies enforced).
	tlsa []dane.TLSA
	// daneTLS: the host has validated TLSA records, none usable; TLS is
	// required, without authentication (RFC 7672 §2.2).
	daneTLS bool
}

// requiresTLS reports whether a plaintext session is refused.
func (p *tlsPolicy) requiresTLS() bool {
	return p.enforced || len(p.tlsa) > 0 || p.daneTLS || p.sts != nil && p.sts.Mode == mtasts.Enforce
}

// strict reports whether the session must be authenticated, over TLS 1.2
// or later.
func (p *tlsPolicy) strict() bool {
	return p.enforced || len(p.tlsa) > 0 || p.sts != nil && p.sts.Mode == mtasts.Enforce
}

// checksCertificate reports whether the server's certificate is checked:
// under a strict policy, or to report under an MTA-STS policy in mode
// testing.
func (p *tlsPolicy) checksCertificate() bool {
	return p.strict() || p.sts != nil
}

// who names the policy that requires TLS, for messages.
func (p *tlsPolicy) who() string {
	switch {
	case len(p.tlsa) > 0 || p.daneTLS:
		return "DANE"
	case p.enforced:
		return "the sender domain's TLS setting (enforced)"
	}
	return "MTA-STS policy of " + p.domain
}

// resolvePolicy looks up what secures delivery to domain: nothing beyond
// the envelope's mode for a relay or an address literal.
func (c *Client) resolvePolicy(ctx context.Context, log *slog.Logger, domain string, mode TLSMode, port string) (*domainPolicy, *outcome) {
	dp := &domainPolicy{domain: domain, enforced: mode == TLSEnforced, hosts: make(map[string]*tlsPolicy)}
	dp.port, _ = strconv.Atoi(port)
	ascii, err := asciiDomain(domain)
	if c.relayHost != "" || err != nil || strings.HasPrefix(ascii, "[") {
		return dp, nil
	}
	dp.domain = ascii
	if c.sts != nil {
		if p := c.sts.Lookup(ctx, ascii); p != nil && p.Mode != mtasts.None {
			dp.sts = p
		}
		if err := ctx.Err(); err != nil {
			// Lookup gave up without a policy: send nothing.
			return nil, &outcome{Deferred, 451, "4.4.7", fmt.Sprintf("delivery interrupted: %v", context.Cause(ctx)), ""}
		}
	}
	if c.dane != nil {
		secure, err := c.dane.SecureMX(ctx, ascii)
		if err != nil {
			// A validating resolver that cannot answer may be refusing
			// bogus data: no host is known to be safe to use plainly.
			log.Info("DANE lookup failed", "err", err)
			return nil, &outcome{Deferred, 451, "4.4.3", fmt.Sprintf("DANE: %v", err), ""}
		}
		dp.secureMX = secure
	}
	return dp, nil
}

// forHost returns host's policy, looking up its TLSA records when DANE may
// apply. An error means the host must not be used.
func (c *Client) forHost(ctx context.Context, dp *domainPolicy, host string) (*tlsPolicy, error) {
	if p, ok := dp.hosts[host]; ok {
		return p, nil
	}
	p := &tlsPolicy{domain: dp.domain, enforced: dp.enforced, sts: dp.sts}
	if p.sts != nil {
		p.listed = p.sts.Matches(host)
	}
	if dp.secureMX {
		recs, err := c.dane.Lookup(ctx, host, dp.port)
		if err != nil {
			return nil, &hostError{code: 451, enhanced: "4.4.3", policy: true,
				err: fmt.Errorf("DANE: TLSA records of %s: %w", host, err)}
		}
		for _, r := range recs {
			if r.Usable() {
				p.tlsa = append(p.tlsa, r)
			}
		}
		p.daneTLS = len(recs) > 0 && len(p.tlsa) == 0
	}
	if p.sts != nil && p.sts.Mode == mtasts.Enforce && !p.listed && len(p.tlsa) == 0 {
		// RFC 8461 §4.1: only hosts the policy lists are tried.
		return nil, &hostError{code: 451, enhanced: "4.7.0", policy: true,
			err: fmt.Errorf("MTA-STS policy of %s does not list MX host %s", dp.domain, host)}
	}
	dp.hosts[host] = p
	return p, nil
}

// judge checks a session with host against p: state is nil for a plaintext
// session. It returns a *hostError when the session must not carry mail,
// and otherwise a note of what an MTA-STS policy in mode testing would
// have refused (RFC 8461 §5: report, deliver anyway).
func (c *Client) judge(cn *conn, p *tlsPolicy) (note string, err error) {
	host := cn.host
	if cn.state == nil {
		if p.requiresTLS() {
			return "", &hostError{code: 451, enhanced: "4.7.4", policy: true,
				err: fmt.Errorf("%s requires TLS but the session with %s is not encrypted", p.who(), host)}
		}
		if p.sts != nil {
			return fmt.Sprintf("MTA-STS policy of %s in mode testing: %s%s offers no TLS", p.domain, unlisted(p, host), host), nil
		}
		return "", nil
	}
	var old string
	if cn.state.Version < tls.VersionTLS12 {
		if p.strict() {
			// A pooled session opened opportunistically may be older.
			return "", &hostError{code: 451, enhanced: "4.7.5", policy: true,
				err: fmt.Errorf("%s requires TLS 1.2 or later, which the session with %s does not use", p.who(), host)}
		}
		if p.sts != nil {
			old = fmt.Sprintf("MTA-STS policy of %s in mode testing: %s%s uses TLS older than 1.2", p.domain, unlisted(p, host), host)
		}
	}
	if len(p.tlsa) > 0 {
		if err := dane.Verify(p.tlsa, cn.state.PeerCertificates, host); err != nil {
			return "", &hostError{code: 451, enhanced: "4.7.5", policy: true,
				err: fmt.Errorf("DANE: certificate of %s not valid: %w", host, err)}
		}
		return "", nil
	}
	if !p.enforced && p.sts == nil {
		return "", nil
	}
	if old != "" {
		return old, nil
	}
	err = cn.verifyPKIX(c.rootCAs)
	switch {
	case err != nil && p.strict():
		return "", &hostError{code: 451, enhanced: "4.7.5", policy: true,
			err: fmt.Errorf("%s: certificate of %s not valid: %w", p.who(), host, err)}
	case err != nil:
		return fmt.Sprintf("MTA-STS policy of %s in mode testing: %scertificate of %s not valid: %v", p.domain, unlisted(p, host), host, err), nil
	case p.sts != nil && !p.listed:
		return fmt.Sprintf("MTA-STS policy of %s in mode testing: %s", p.domain, strings.TrimSuffix(unlisted(p, host), "; ")), nil
	}
	return "", nil
}

// unlisted says that the policy does not list host, or nothing.
func unlisted(p *tlsPolicy, host string) string {
	if p.listed {
		return ""
	}
	return "MX host " + host + " is not listed; "
}

// verifyPKIX checks, once per session, that the server's certificate
// chains to roots (nil: the system's) and is valid for its host name (RFC
// 8461 §4.2, and TLSEnforced). crypto/tls checks an IP host against the
// certificate's IP addresses.
func (cn *conn) verifyPKIX(roots *x509.CertPool) error {
	if cn.pkixDone {
		return cn.pkixErr
	}
	cn.pkixDone = true
	cn.pkixErr = verifyChain(cn.state, cn.host, roots)
	return cn.pkixErr
}

func verifyChain(st *tls.ConnectionState, host string, roots *x509.CertPool) error {
	if len(st.PeerCertificates) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range st.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := st.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter})
	return err
}
