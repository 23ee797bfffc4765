package mxlisten

import (
	"errors"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrBadAddress is returned by NormalizeRecipient for an address the
// listener refuses before asking the Router.
var ErrBadAddress = errors.New("address not accepted")

// NormalizeRecipient returns the canonical form of a recipient as go-smtp
// hands it to Rcpt (a source route already dropped, a quoted local part
// already unquoted): the local part lower-cased, the domain in lower-case
// ASCII (IDNA A-labels). It refuses, with ErrBadAddress, everything that
// is not a plain mailbox at a domain name, which is where relaying tricks
// live:
//
//   - more than one "@" (a quoted local part such as "a@b"@ours, or the
//     remains of a source route; RFC 5321 §4.1.1.3 makes us ignore source
//     routes, which go-smtp does, so <@a,@b:user@x> is user@x);
//   - "%" and "!" in the local part (the "percent hack" and UUCP bang
//     paths, RFC 5321 §3.6.1 and §7.2);
//   - quoting, spaces, control characters, a local part longer than 64
//     octets or an address longer than 254 (RFC 5321 §4.5.3.1);
//   - address literals ([192.0.2.1], RFC 5321 §4.1.3) and bare IP
//     addresses (an all-numeric last label), a trailing dot, empty labels,
//     anything but letters, digits and hyphens in a label.
//
// The listener receives only for addresses it made (lower-case return
// paths) and domains' receiving addresses, so local parts are compared
// case-insensitively.
func NormalizeRecipient(addr string) (string, error) {
	if addr == "" || len(addr) > 254 || !utf8.ValidString(addr) {
		return "", ErrBadAddress
	}
	if strings.Count(addr, "@") != 1 {
		return "", ErrBadAddress
	}
	local, domain, _ := strings.Cut(addr, "@")
	local = strings.ToLower(local)
	if !validLocal(local) {
		return "", ErrBadAddress
	}
	d, ok := normalizeDomain(domain)
	if !ok || len(local)+1+len(d) > 254 {
		return "", ErrBadAddress
	}
	return local + "@" + d, nil
}

// validLocal accepts an RFC 5321 Dot-string of atext (RFC 5322 §3.2.3)
// without "%" and "!", plus the UTF-8 of RFC 6531 §3.3.
func validLocal(local string) bool {
	if local == "" || len(local) > 64 || local[0] == '.' || local[len(local)-1] == '.' ||
		strings.Contains(local, "..") {
		return false
	}
	for _, r := range local {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("#$&'*+-/=?^_`{|}~.", r):
		case r >= 0x80 && r != utf8.RuneError && !isUnicodeSpaceOrControl(r):
		default:
			return false
		}
	}
	return true
}

func isUnicodeSpaceOrControl(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || r == 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff ||
		(r >= 0x2000 && r <= 0x200f)
}

// normalizeDomain returns a domain name in lower-case ASCII, or false.
func normalizeDomain(domain string) (string, bool) {
	if domain == "" || strings.HasPrefix(domain, "[") || strings.HasSuffix(domain, ".") {
		return "", false
	}
	a, err := idna.Lookup.ToASCII(domain)
	if err != nil || a == "" || len(a) > 253 {
		return "", false
	}
	a = strings.ToLower(a)
	labels := strings.Split(a, ".")
	if len(labels) < 2 {
		return "", false // no dotless domains (RFC 7085 discourages them)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	if allDigits(labels[len(labels)-1]) {
		return "", false // 192.0.2.1 written without brackets
	}
	return a, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// domainOf returns the domain of an address (after the last "@"),
// lower-cased and without a trailing dot; "" when there is none.
func domainOf(addr string) string {
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(addr[i+1:]), ".")
}
