// Package mailto makes and reads the mailto unsubscribe addresses of mail
// sent with a topic from a domain: the second entry of its
// List-Unsubscribe field (RFC 2369 §3.2), unsubscribe+<code>@<return path
// host>, which the inbound MX receives. Sending any message to it
// unsubscribes the recipient it was made for, as the one-click POST does.
//
// The code (package rcptcode) names the email and the recipient's index
// in it, and carries an HMAC-SHA256 of both, truncated to 80 bits, under a
// key derived from the master key for this purpose only
// (seal.Box.DeriveKey with KeyPurpose): nobody without the key can make a
// code for another email or recipient. The local part is 57 octets, within
// RFC 5321 §4.5.3.1.1's 64.
//
// It is its own package because the store routes these addresses, and
// package unsubscribe depends on the store.
package mailto

import (
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/rcptcode"
)

// KeyPurpose is the purpose the mailto key is derived from the master key
// for (seal.Box.DeriveKey).
const KeyPurpose = "posthaste unsubscribe mailto v1"

// label is the purpose the codes are signed for (rcptcode).
const label = "posthaste unsubscribe mailto v1"

// Prefix starts the local part of every mailto unsubscribe address.
const Prefix = "unsubscribe+"

// MaxIndex is the largest recipient index a code holds.
const MaxIndex = rcptcode.MaxIndex

// Address is a parsed mailto unsubscribe address.
type Address struct {
	EmailID uuid.UUID
	// Index is the recipient's index in the email's recipients
	// (store.Email.Recipients).
	Index int
	// Host is the domain of the address, lower-cased.
	Host string
	code rcptcode.Code
}

// Code returns the code of the recipient at index in the email emailID,
// under key (at least 32 random bytes, used for nothing else).
func Code(key []byte, emailID uuid.UUID, index int) (string, error) {
	return rcptcode.Make(key, label, emailID, index)
}

// Make returns the mailto unsubscribe address of the recipient at index in
// the email emailID: unsubscribe+<code>@host, host being the return path
// host of the email's domain.
func Make(key []byte, emailID uuid.UUID, index int, host string) (string, error) {
	c, err := Code(key, emailID, index)
	if err != nil {
		return "", err
	}
	return Prefix + c + "@" + strings.ToLower(host), nil
}

// Parse reads a mailto unsubscribe address, in any letter case, with or
// without angle brackets. ok is false for any other address. It does not
// verify the code: see Verify.
func Parse(addr string) (a Address, ok bool) {
	s := strings.ToLower(strings.Trim(strings.TrimSpace(addr), "<>"))
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return Address{}, false
	}
	local, host := s[:at], s[at+1:]
	if host == "" || strings.ContainsAny(host, " \t<>@") {
		return Address{}, false
	}
	code, found := strings.CutPrefix(local, Prefix)
	if !found {
		return Address{}, false
	}
	c, ok := rcptcode.Parse(code)
	if !ok {
		return Address{}, false
	}
	return Address{EmailID: c.EmailID, Index: c.Index, Host: host, code: c}, true
}

// Verify reports whether a's code was made under key. The comparison
// takes constant time.
func (a Address) Verify(key []byte) bool {
	return a.code.Verify(key, label)
}
