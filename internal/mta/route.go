package mta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// message is an Envelope checked and converted for the wire.
type message struct {
	from        string   // reverse path with an ASCII domain; "" is the null path
	rcpts       []string // per Envelope.To index, with ASCII domains
	utf8Rcpts   []bool   // per index: the local part is not ASCII
	data        []byte
	size        int  // octets on the wire, CRLF line ends, before dot-stuffing
	eightBit    bool // data has octets above 127 (RFC 6152 8BITMIME)
	utf8From    bool // the reverse path's local part is not ASCII
	utf8Headers bool // a header field has raw UTF-8 (RFC 6532)
}

// needsUTF8 reports whether the transaction as a whole needs SMTPUTF8.
func (m *message) needsUTF8() bool { return m.utf8From || m.utf8Headers }

// prepare checks the addresses of env and converts their domains to ASCII.
// Recipients with unusable addresses are bounced in results; the indexes of
// the others are returned.
func prepare(env Envelope, results []Result) (*message, []int) {
	m := &message{
		rcpts:     make([]string, len(env.To)),
		utf8Rcpts: make([]bool, len(env.To)),
		data:      env.Data,
	}
	var pending []int
	if env.From != "" {
		from, utf8Local, err := normalizeAddress(env.From)
		if err != nil {
			for i := range env.To {
				outcome{Bounced, 553, "5.1.7", fmt.Sprintf("sender address: %v", err), ""}.apply(&results[i])
			}
			return m, nil
		}
		m.from, m.utf8From = from, utf8Local
	}
	for i, to := range env.To {
		addr, utf8Local, err := normalizeAddress(to)
		if err != nil {
			outcome{Bounced, 553, "5.1.3", fmt.Sprintf("recipient address: %v", err), ""}.apply(&results[i])
			continue
		}
		m.rcpts[i], m.utf8Rcpts[i] = addr, utf8Local
		pending = append(pending, i)
	}
	m.size = len(env.Data)
	prev := byte(0)
	for _, b := range env.Data {
		if b == '\n' && prev != '\r' {
			m.size++
		}
		if b >= 0x80 {
			m.eightBit = true
		}
		prev = b
	}
	m.utf8Headers = headerHasUTF8(env.Data)
	return m, pending
}

// headerHasUTF8 reports whether the header section of data (up to the first
// empty line) has octets above 127, which only SMTPUTF8 may carry (RFC 6532).
func headerHasUTF8(data []byte) bool {
	if bytes.HasPrefix(data, []byte("\r\n")) || bytes.HasPrefix(data, []byte("\n")) {
		return false
	}
	end := len(data)
	if i := bytes.Index(data, []byte("\n\r\n")); i >= 0 {
		end = i
	}
	if i := bytes.Index(data[:end], []byte("\n\n")); i >= 0 {
		end = i
	}
	for _, b := range data[:end] {
		if b >= 0x80 {
			return true
		}
	}
	return false
}

// normalizeAddress checks that addr can go into MAIL FROM or RCPT TO and
// converts its domain to ASCII (IDNA2008 A-labels), so that only a non-ASCII
// local part needs SMTPUTF8.
func normalizeAddress(addr string) (ascii string, utf8Local bool, err error) {
	// RFC 5321 §4.5.3.1.3: a path is at most 256 octets with its brackets.
	if len(addr) > 254 {
		return "", false, errors.New("longer than 254 octets")
	}
	for _, r := range addr {
		if r < ' ' || r == 0x7f || r == '<' || r == '>' {
			return "", false, fmt.Errorf("%q: invalid character %q", addr, r)
		}
	}
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 {
		return "", false, fmt.Errorf("%q: want local@domain", addr)
	}
	local := addr[:at]
	if err := checkLocalPart(local); err != nil {
		return "", false, fmt.Errorf("%q: %w", addr, err)
	}
	domain, err := asciiDomain(addr[at+1:])
	if err != nil {
		return "", false, fmt.Errorf("%q: %w", addr, err)
	}
	return local + "@" + domain, !isASCII(local), nil
}

// checkLocalPart checks the RFC 5321 §4.1.2 syntax of a local part: a
// Dot-string of atoms or a Quoted-string, where RFC 6531 §3.3 also allows
// UTF-8 beyond ASCII.
func checkLocalPart(local string) error {
	if !utf8.ValidString(local) {
		return errors.New("local part is not valid UTF-8")
	}
	if strings.HasPrefix(local, `"`) {
		if len(local) < 2 || !strings.HasSuffix(local, `"`) {
			return errors.New("unterminated quoted local part")
		}
		inner := local[1 : len(local)-1]
		for i := 0; i < len(inner); i++ {
			switch b := inner[i]; {
			case b == '\\':
				// quoted-pairSMTP: a backslash and one printable ASCII.
				if i+1 == len(inner) || inner[i+1] < 32 || inner[i+1] > 126 {
					return errors.New("bad escape in quoted local part")
				}
				i++
			case b == '"':
				return errors.New("unescaped quote in quoted local part")
			case b < 32 || b == 127:
				return fmt.Errorf("invalid character %q in local part", b)
			}
		}
		return nil
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" {
			return errors.New("empty atom in local part")
		}
		for _, r := range atom {
			if r >= 0x80 {
				continue // RFC 6531 §3.3 UTF8-non-ascii
			}
			if !isAtext(byte(r)) {
				return fmt.Errorf("invalid character %q in local part", r)
			}
		}
	}
	return nil
}

// isAtext reports whether b is an RFC 5322 §3.2.3 atext character.
func isAtext(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', isDigit(b):
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~", b) >= 0
}

// asciiDomain returns domain in ASCII: IDNA2008 A-labels for Unicode names
// (RFC 5890), lower case, no trailing dot. Address literals ("[192.0.2.1]",
// "[IPv6:2001:db8::1]") are returned unchanged when valid.
func asciiDomain(domain string) (string, error) {
	if strings.HasPrefix(domain, "[") {
		if _, err := parseAddressLiteral(domain); err != nil {
			return "", err
		}
		return domain, nil
	}
	domain = strings.TrimSuffix(domain, ".")
	if !isASCII(domain) {
		a, err := idna.Lookup.ToASCII(domain)
		if err != nil {
			return "", fmt.Errorf("domain %q: %w", domain, err)
		}
		domain = a
	}
	domain = strings.ToLower(domain)
	if domain == "" || len(domain) > 253 {
		return "", fmt.Errorf("domain %q: invalid length", domain)
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("domain %q: invalid label", domain)
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !isDigit(b) && (b < 'a' || b > 'z') && b != '-' && b != '_' {
				return "", fmt.Errorf("domain %q: invalid character %q", domain, b)
			}
		}
	}
	return domain, nil
}

// parseAddressLiteral parses an RFC 5321 §4.1.3 address literal.
func parseAddressLiteral(s string) (netip.Addr, error) {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' {
		return netip.Addr{}, fmt.Errorf("address literal %q: missing brackets", s)
	}
	inner := s[1 : len(s)-1]
	if v6, ok := strings.CutPrefix(inner, "IPv6:"); ok {
		a, err := netip.ParseAddr(v6)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("address literal %q: invalid IPv6 address", s)
		}
		return a, nil
	}
	a, err := netip.ParseAddr(inner)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("address literal %q: invalid IPv4 address", s)
	}
	return a, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// route returns the hosts to try for domain, most preferred first, or the
// outcome for all recipients when there is no host to try.
func (c *Client) route(ctx context.Context, domain string) ([]string, *outcome) {
	ascii, err := asciiDomain(domain)
	if err != nil {
		return nil, &outcome{Bounced, 550, "5.1.2", err.Error(), ""}
	}
	if strings.HasPrefix(ascii, "[") {
		a, _ := parseAddressLiteral(ascii)
		return []string{a.String()}, nil
	}

	// The trailing dot keeps the resolver's search list out of it.
	fqdn := ascii + "."
	mxs, err := c.resolver.LookupMX(ctx, fqdn)
	// LookupMX drops malformed records and reports them with an error;
	// the well-formed ones are still usable.
	if err != nil && len(mxs) == 0 {
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			return nil, &outcome{Deferred, 451, "4.4.3", fmt.Sprintf("looking up MX of %s: %v", ascii, err), ""}
		}
		// RFC 5321 §5.1: without MX records the domain itself is the
		// host (implicit MX), if it has an address. Go reports NXDOMAIN
		// and "no MX records" alike, so the address lookup tells them
		// apart: a name that does not exist has no address either.
		_, err := c.resolver.LookupNetIP(ctx, "ip", fqdn)
		if err == nil {
			return []string{ascii}, nil
		}
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, &outcome{Bounced, 550, "5.1.2", fmt.Sprintf("domain %s has no MX or address records", ascii), ""}
		}
		return nil, &outcome{Deferred, 451, "4.4.3", fmt.Sprintf("looking up address of %s: %v", ascii, err), ""}
	}

	hosts := orderMX(mxs, c.shuffle)
	if len(hosts) == 0 {
		// RFC 7505 §3: a lone MX of "." (preference 0 by convention)
		// means the domain accepts no mail; RFC 7504 §3 gives 556 and
		// RFC 7505 §4.1 the enhanced code 5.1.10.
		return nil, &outcome{Bounced, 556, "5.1.10", fmt.Sprintf("domain %s accepts no mail (null MX)", ascii), ""}
	}
	return hosts, nil
}

// orderMX returns the MX host names by ascending preference, equal
// preferences in random order (RFC 5321 §5.1), without trailing dots or
// duplicates. Null MX entries ("."), which RFC 7505 §3 forbids next to
// others, are left out; an empty result means the domain accepts no mail.
func orderMX(mxs []*net.MX, shuffle func(n int, swap func(i, j int))) []string {
	sorted := make([]*net.MX, 0, len(mxs))
	for _, mx := range mxs {
		if mx != nil && mx.Host != "." && mx.Host != "" {
			sorted = append(sorted, mx)
		}
	}
	shuffle(len(sorted), func(i, j int) { sorted[i], sorted[j] = sorted[j], sorted[i] })
	slices.SortStableFunc(sorted, func(a, b *net.MX) int { return int(a.Pref) - int(b.Pref) })

	hosts := make([]string, 0, len(sorted))
	for _, mx := range sorted {
		h := strings.ToLower(strings.TrimSuffix(mx.Host, "."))
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
