// Package address parses, checks and normalises email addresses: one
// mailbox with an optional display name (RFC 5322), a UTF-8 local part
// (RFC 6531) and a domain converted to ASCII (IDNA2008, RFC 5891). It is
// the one place the API, the dashboard, the SMTP gateway and the
// activities read an address from a user.
package address

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/encoding/htmlindex"
)

// Limits on addresses. RFC 5321 §4.5.3.1.1 limits the local part to 64
// octets, §4.5.3.1.2 a domain to 255 octets (253 in its dotted text form)
// and §4.5.3.1.3 a path to 256 octets including the angle brackets.
const (
	maxLocalLength   = 64
	maxDomainLength  = 253
	maxLabelLength   = 63
	maxAddrLength    = 254
	maxAddressString = 2048 // whole input, display name included
)

// domainProfile converts a domain to its ASCII (punycode) form and checks it
// against the IDNA2008 lookup rules restricted to host names (RFC 5891 §5,
// STD3 letters, digits and hyphens). It is read-only.
var domainProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.VerifyDNSLength(true),
)

// Address is a parsed mailbox. Domain is lower-case ASCII: internationalized
// domains are converted to punycode (RFC 5891). Local is kept exactly as given
// and may contain UTF-8 (RFC 6531). Name is the decoded display name, if any.
type Address struct {
	Name   string
	Local  string
	Domain string
}

// Addr returns the addr-spec local@domain, as used in SMTP envelopes.
func (a Address) Addr() string { return a.Local + "@" + a.Domain }

// String returns the display form `Name <local@domain>`, or `local@domain`
// without a name. The name is quoted (RFC 5322 §3.2.4) when it holds
// characters outside atoms, so Parse(a.String()) returns a again.
// Non-ASCII names are left as UTF-8; the message builder encodes them.
func (a Address) String() string {
	if a.Name == "" {
		return a.Addr()
	}
	return quoteName(a.Name) + " <" + a.Addr() + ">"
}

// Parse parses one mailbox in one of the forms `a@x.com`,
// `Name <a@x.com>`, `"Doe, John" <a@x.com>` or `=?utf-8?q?J=C3=B6rg?= <a@x.com>`.
// The display name is read leniently (unquoted commas and dots are kept);
// the addr-spec strictly: a dot-atom local part (UTF-8 allowed, quoted local
// parts refused) and a host name domain with at least two labels (address
// literals refused). Line breaks and control characters are refused anywhere.
func Parse(s string) (Address, error) {
	if len(s) > maxAddressString {
		return Address{}, errors.New("address is too long")
	}
	if !utf8.ValidString(s) {
		return Address{}, errors.New("address is not valid UTF-8")
	}
	if strings.ContainsAny(s, "\r\n") {
		return Address{}, errors.New("address contains a line break")
	}
	s = strings.Trim(s, " \t")
	if s == "" {
		return Address{}, errors.New("address is empty")
	}

	var a Address
	spec := s
	if strings.HasSuffix(s, ">") {
		i := strings.LastIndexByte(s, '<')
		if i < 0 {
			return Address{}, errors.New("address has unbalanced angle brackets")
		}
		spec = strings.Trim(s[i+1:len(s)-1], " \t")
		name, err := parsePhrase(strings.Trim(s[:i], " \t"))
		if err != nil {
			return Address{}, err
		}
		a.Name = name
	} else if strings.ContainsAny(s, "<>") {
		return Address{}, errors.New("address has unbalanced angle brackets")
	}

	local, domain, err := parseAddrSpec(spec)
	if err != nil {
		return Address{}, err
	}
	a.Local, a.Domain = local, domain
	return a, nil
}

// ErrNotBare is returned by ParseBare for an address that does not parse
// or carries a display name or angle brackets.
var ErrNotBare = errors.New("not a bare address")

// ParseBare parses a bare addr-spec such as someone@example.com: what a
// contact, a suppression, an import row or a data request names. A
// display name or angle brackets make it ErrNotBare, as does anything
// Parse refuses; callers answer with their own message.
func ParseBare(s string) (Address, error) {
	a, err := Parse(s)
	if err != nil || a.Name != "" || strings.Contains(s, "<") {
		return Address{}, ErrNotBare
	}
	return a, nil
}

// Normalize is the form addresses are compared and stored in where case
// does not matter (suppressions, contacts, data requests): lower case.
func Normalize(addr string) string { return strings.ToLower(addr) }

// parsePhrase decodes a display name: a sequence of atoms and quoted
// strings (RFC 5322 §3.2.5), where runs of atoms may hold RFC 2047 encoded
// words. Atoms are read leniently: any run of characters other than space,
// tab and '"' is an atom, so `Acme, Inc.` is accepted unquoted.
func parsePhrase(p string) (string, error) {
	var (
		parts []string // decoded segments, joined with single spaces
		atoms []string // pending run of raw atoms
	)
	flush := func() error {
		if len(atoms) == 0 {
			return nil
		}
		run := strings.Join(atoms, " ")
		atoms = atoms[:0]
		if strings.Contains(run, "=?") {
			decoded, err := decodeWords(run)
			if err != nil {
				return err
			}
			run = decoded
		}
		parts = append(parts, run)
		return nil
	}
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case c == ' ' || c == '\t':
			i++
		case c == '"':
			// RFC 5322 §3.2.4: no encoded words inside quoted strings
			// (RFC 2047 §5), so the content is taken literally.
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(p) {
				switch p[j] {
				case '\\':
					if j+1 >= len(p) {
						return "", errors.New("display name ends inside an escape")
					}
					b.WriteByte(p[j+1])
					j += 2
					continue
				case '"':
					closed = true
				default:
					b.WriteByte(p[j])
					j++
					continue
				}
				break
			}
			if !closed {
				return "", errors.New("display name has an unterminated quoted string")
			}
			if err := flush(); err != nil {
				return "", err
			}
			parts = append(parts, b.String())
			i = j + 1
		default:
			j := i
			for j < len(p) && p[j] != ' ' && p[j] != '\t' && p[j] != '"' {
				j++
			}
			atoms = append(atoms, p[i:j])
			i = j
		}
	}
	if err := flush(); err != nil {
		return "", err
	}
	name := strings.Join(parts, " ")
	if !utf8.ValidString(name) {
		return "", errors.New("display name is not valid UTF-8")
	}
	if strings.ContainsAny(name, "\r\n") {
		return "", errors.New("display name contains a line break")
	}
	if strings.ContainsFunc(name, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
		return "", errors.New("display name contains a control character")
	}
	return name, nil
}

// decodeWords decodes the RFC 2047 encoded words in s, in any charset the
// WHATWG encoding index knows.
func decodeWords(s string) (string, error) {
	dec := mime.WordDecoder{CharsetReader: func(charset string, input io.Reader) (io.Reader, error) {
		enc, err := htmlindex.Get(charset)
		if err != nil {
			return nil, err
		}
		return enc.NewDecoder().Reader(input), nil
	}}
	out, err := dec.DecodeHeader(s)
	if err != nil {
		return "", fmt.Errorf("decoding display name: %w", err)
	}
	return out, nil
}

// parseAddrSpec checks local@domain and returns the local part unchanged and
// the domain in lower-case ASCII.
func parseAddrSpec(spec string) (local, domain string, err error) {
	at := strings.LastIndexByte(spec, '@')
	if at < 0 {
		return "", "", errors.New("address has no @")
	}
	local, domain = spec[:at], spec[at+1:]
	if err := checkLocal(local); err != nil {
		return "", "", err
	}
	domain, err = asciiDomain(domain)
	if err != nil {
		return "", "", err
	}
	if len(local)+1+len(domain) > maxAddrLength {
		return "", "", fmt.Errorf("address is longer than %d characters", maxAddrLength)
	}
	return local, domain, nil
}

// checkLocal accepts a dot-atom (RFC 5322 §3.4.1) whose atoms may also hold
// non-ASCII characters (RFC 6532 §3.2), other than spaces and controls.
func checkLocal(local string) error {
	if local == "" {
		return errors.New("address has an empty local part")
	}
	if len(local) > maxLocalLength {
		return fmt.Errorf("local part is longer than %d octets", maxLocalLength)
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" {
			return errors.New("local part has an empty dot-separated part")
		}
		for _, r := range atom {
			if r < utf8.RuneSelf {
				if !isAtext(byte(r)) {
					return fmt.Errorf("local part contains %q", r)
				}
				continue
			}
			if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) {
				return fmt.Errorf("local part contains %q", r)
			}
		}
	}
	return nil
}

// asciiDomain converts a host name to lower-case ASCII and checks it.
func asciiDomain(domain string) (string, error) {
	if domain == "" {
		return "", errors.New("address has an empty domain")
	}
	if strings.HasPrefix(domain, "[") {
		return "", errors.New("address literals are not supported")
	}
	ascii, err := domainProfile.ToASCII(domain)
	if err != nil {
		return "", errors.New("domain is not a valid host name")
	}
	ascii = strings.ToLower(ascii)
	if len(ascii) > maxDomainLength {
		return "", fmt.Errorf("domain is longer than %d characters", maxDomainLength)
	}
	labels := strings.Split(ascii, ".")
	if len(labels) < 2 {
		return "", errors.New("domain has no dot")
	}
	for _, l := range labels {
		if l == "" || len(l) > maxLabelLength {
			return "", errors.New("domain is not a valid host name")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", errors.New("domain is not a valid host name")
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", errors.New("domain has a numeric top-level label")
	}
	return ascii, nil
}

// isAtext reports whether c is an RFC 5322 §3.2.3 atext character.
func isAtext(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

// quoteName returns name as it must appear before an angle address: as is
// when it is a phrase of atoms (dots allowed, as in the common obs-phrase
// `Acme Inc.`) separated by single spaces, otherwise as a quoted string.
func quoteName(name string) string {
	plain := !strings.HasPrefix(name, " ") && !strings.HasSuffix(name, " ") &&
		!strings.HasPrefix(name, ".") && !strings.Contains(name, "  ") &&
		!strings.Contains(name, "=?")
	for i := 0; plain && i < len(name); i++ {
		c := name[i]
		plain = c >= utf8.RuneSelf || c == ' ' || c == '.' || isAtext(c)
	}
	if plain {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 2)
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		if name[i] == '"' || name[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	b.WriteByte('"')
	return b.String()
}
