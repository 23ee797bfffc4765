// Package records computes the DNS records a sender domain publishes so
// that its mail authenticates (DKIM, SPF for the return path, DMARC), and
// checks whether they are published.
package records

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/posthaste/posthaste/internal/dkim"
)

// Keys of the records of a domain, as stored with their statuses.
const (
	KeyDKIM   = "dkim"
	KeySPFMX  = "spf_mx"
	KeySPFTXT = "spf_txt"
	KeyDMARC  = "dmarc"
	// KeyReceivingMX is the MX of a domain with receiving enabled: its
	// mail goes to the operator's inbound MX (issue 16 point 4).
	KeyReceivingMX = "receiving_mx"
	// KeyTracking is the CNAME of a domain's tracking subdomain, whose
	// tracked links and open pixels lead to the operator's tracking host
	// (issue 19).
	KeyTracking = "tracking"
)

// Keys lists every record key in the order records are shown.
var Keys = []string{KeyDKIM, KeySPFMX, KeySPFTXT, KeyDMARC, KeyReceivingMX, KeyTracking}

// Required reports whether a record must be found for the domain to be
// verified: DKIM and SPF are enforced, DMARC is only recommended. The
// receiving MX is not required either: it has its own status, and a
// domain's sending does not depend on it. Nor is the tracking CNAME:
// tracking is applied only while it is found.
func Required(key string) bool { return key != KeyDMARC && key != KeyReceivingMX && key != KeyTracking }

// Config is the operator's side of the records.
type Config struct {
	// BounceHost receives bounces for every domain's return path: the MX of
	// <return path>.<domain> (POSTHASTE_BOUNCE_HOST).
	BounceHost string
	// SPFInclude is the domain whose SPF record lists the operator's
	// sending addresses; return paths include it (POSTHASTE_SPF_INCLUDE).
	SPFInclude string
	// TrackingHost serves the tracked links and open pixels of every
	// domain: the target of the tracking CNAME (POSTHASTE_TRACKING_HOST).
	// "" publishes no tracking record.
	TrackingHost string
	// LocalTracking is `posthaste dev`'s own address when it tracks under
	// it (config.Domains.LocalTracking): tracking then needs no record.
	LocalTracking string
}

// Domain is what records depend on.
type Domain struct {
	Name          string // ASCII
	ReturnPath    string // label, e.g. "send"
	DKIMSelector  string
	DKIMPublicKey string // base64, the p= value
	// Receiving adds the MX record that sends the domain's mail to the
	// inbound MX (BounceHost).
	Receiving bool
	// Tracking (open or click tracking on) adds the CNAME of
	// TrackingSubdomain (a label, e.g. "links") to the tracking host.
	Tracking          bool
	TrackingSubdomain string
}

// Record is one DNS record the domain owner publishes.
type Record struct {
	Key      string
	Record   string // DKIM, SPF, DMARC or Receiving
	Type     string // TXT, MX or CNAME
	Name     string // relative to the domain, as DNS providers want it
	FQDN     string
	Value    string // whole and unquoted
	Priority int    // MX only
}

// For returns the records of d in display order.
func For(cfg Config, d Domain) []Record {
	rp := d.ReturnPath + "." + d.Name
	dkimName := d.DKIMSelector + "._domainkey"
	rs := []Record{
		{Key: KeyDKIM, Record: "DKIM", Type: "TXT", Name: dkimName, FQDN: dkimName + "." + d.Name,
			Value: dkim.RecordValue(d.DKIMPublicKey)},
		{Key: KeySPFMX, Record: "SPF", Type: "MX", Name: d.ReturnPath, FQDN: rp, Value: cfg.BounceHost, Priority: 10},
		{Key: KeySPFTXT, Record: "SPF", Type: "TXT", Name: d.ReturnPath, FQDN: rp, Value: SPFValue(cfg)},
		{Key: KeyDMARC, Record: "DMARC", Type: "TXT", Name: "_dmarc", FQDN: "_dmarc." + d.Name,
			Value: "v=DMARC1; p=none;"},
	}
	if d.Receiving {
		// Resend's "Receiving" record: an MX at the domain itself.
		rs = append(rs, Record{Key: KeyReceivingMX, Record: "Receiving", Type: "MX", Name: "@", FQDN: d.Name,
			Value: cfg.BounceHost, Priority: 10})
	}
	if d.Tracking && d.TrackingSubdomain != "" && cfg.TrackingHost != "" {
		// Resend's "Tracking" record.
		rs = append(rs, Record{Key: KeyTracking, Record: "Tracking", Type: "CNAME", Name: d.TrackingSubdomain,
			FQDN: d.TrackingSubdomain + "." + d.Name, Value: cfg.TrackingHost})
	}
	return rs
}

// SPFValue is the SPF policy of every return path: the operator's
// addresses, softfail for others.
func SPFValue(cfg Config) string { return "v=spf1 include:" + cfg.SPFInclude + " ~all" }

// Result is the outcome of looking one record up.
type Result struct {
	Key   string
	Found bool
	// Temporary is set when the lookup failed (timeout, SERVFAIL) rather
	// than answering that the record is absent.
	Temporary bool
	Error     string // what was wrong, for logs; "" when found
	// Policy is the p= value (lower case) of the DMARC record found; ""
	// for other records, and when the record has no p= tag.
	Policy string
}

// Check looks every record of d up through r (nil: the system resolver)
// and reports which are published as expected. TXT values split into
// several strings by a DNS provider are joined before comparing.
func Check(ctx context.Context, r *net.Resolver, cfg Config, d Domain) []Result {
	if r == nil {
		r = net.DefaultResolver
	}
	var out []Result
	for _, rec := range For(cfg, d) {
		res := Result{Key: rec.Key}
		var err error
		switch rec.Key {
		case KeyDKIM:
			err = checkTXT(ctx, r, rec.FQDN, func(v string) bool { return dkimMatches(v, d.DKIMPublicKey) })
		case KeySPFMX:
			err = checkMX(ctx, r, rec.FQDN, cfg.BounceHost)
		case KeySPFTXT:
			err = checkSPF(ctx, r, rec.FQDN, cfg.SPFInclude)
		case KeyDMARC:
			res.Policy, err = checkDMARC(ctx, r, rec.FQDN)
		case KeyReceivingMX:
			err = checkMX(ctx, r, rec.FQDN, cfg.BounceHost)
		case KeyTracking:
			err = checkCNAME(ctx, r, rec.FQDN, cfg.TrackingHost)
		}
		res.Found = err == nil
		if err != nil {
			res.Error = err.Error()
			res.Temporary = temporary(err)
		}
		out = append(out, res)
	}
	return out
}

var errMismatch = errors.New("no record with the expected value")

// checkCNAME finds the CNAME of name, which must lead to target.
func checkCNAME(ctx context.Context, r *net.Resolver, name, target string) error {
	cname, err := r.LookupCNAME(ctx, name+".")
	if err != nil {
		return err
	}
	if !strings.EqualFold(strings.TrimSuffix(cname, "."), strings.TrimSuffix(target, ".")) {
		return errMismatch
	}
	return nil
}

func temporary(err error) bool {
	var de *net.DNSError
	if errors.As(err, &de) {
		return !de.IsNotFound
	}
	return false
}

func checkTXT(ctx context.Context, r *net.Resolver, name string, ok func(string) bool) error {
	// net.Resolver joins the character-strings of one TXT record (RFC 7208
	// §3.3 and RFC 6376 §3.6.2.2 say to concatenate them without spaces).
	txts, err := r.LookupTXT(ctx, name+".")
	if err != nil {
		return err
	}
	for _, t := range txts {
		if ok(t) {
			return nil
		}
	}
	return errMismatch
}

// checkDMARC finds the domain's DMARC record and returns its policy, the
// p= tag (RFC 7489 §6.3), in lower case.
func checkDMARC(ctx context.Context, r *net.Resolver, name string) (string, error) {
	var policy string
	err := checkTXT(ctx, r, name, func(v string) bool {
		if !hasVersion(v, "v=DMARC1") {
			return false
		}
		policy = DMARCPolicy(v)
		return true
	})
	return policy, err
}

// DMARCPolicy returns the p= tag of a DMARC record in lower case; "" when
// it has none.
func DMARCPolicy(record string) string {
	for _, tag := range strings.Split(record, ";") {
		k, v, ok := strings.Cut(tag, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "p") {
			return strings.ToLower(strings.TrimSpace(v))
		}
	}
	return ""
}

func dkimMatches(v, public string) bool {
	tags := dkim.Tags(v)
	if ver, ok := tags["v"]; ok && ver != "DKIM1" {
		return false
	}
	if k, ok := tags["k"]; ok && !strings.EqualFold(k, "rsa") {
		return false
	}
	return tags["p"] == public
}

func hasVersion(v, version string) bool {
	v = strings.TrimSpace(v)
	if len(v) < len(version) || !strings.EqualFold(v[:len(version)], version) {
		return false
	}
	rest := v[len(version):]
	return rest == "" || rest[0] == ' ' || rest[0] == ';' || rest[0] == '\t'
}

func checkMX(ctx context.Context, r *net.Resolver, name, host string) error {
	mxs, err := r.LookupMX(ctx, name+".")
	if err != nil {
		return err
	}
	want := strings.TrimSuffix(strings.ToLower(host), ".")
	for _, mx := range mxs {
		if strings.TrimSuffix(strings.ToLower(mx.Host), ".") == want {
			return nil
		}
	}
	return errMismatch
}

// checkSPF wants exactly one SPF record (RFC 7208 §4.5: several are a
// permanent error) that includes the operator's SPF domain.
func checkSPF(ctx context.Context, r *net.Resolver, name, include string) error {
	txts, err := r.LookupTXT(ctx, name+".")
	if err != nil {
		return err
	}
	var spf []string
	for _, t := range txts {
		if hasVersion(t, "v=spf1") {
			spf = append(spf, t)
		}
	}
	if len(spf) != 1 {
		return errMismatch
	}
	want := "include:" + strings.TrimSuffix(strings.ToLower(include), ".")
	for _, term := range strings.Fields(strings.ToLower(spf[0])) {
		term = strings.TrimPrefix(term, "+")
		if strings.TrimSuffix(term, ".") == want {
			return nil
		}
	}
	return errMismatch
}
