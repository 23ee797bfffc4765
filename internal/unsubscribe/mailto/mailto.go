// Package mailto makes and reads the mailto unsubscribe addresses of mail
// sent with a topic from a domain: the second entry of its
// List-Unsubscribe field (RFC 2369 §3.2), unsubscribe+<code>@<return path
// host>, which the inbound MX receives. Sending any message to it
// unsubscribes the recipient it was made for, as the one-click POST does.
//
// The code names the email and the recipient's index in it, and carries
// an HMAC-SHA256 of both, truncated to 80 bits, under a key derived from
// the master key for this purpose only (seal.Box.DeriveKey with
// KeyPurpose): nobody without the key can make a code for another email or
// recipient. It is lower-case base32 without padding, so it survives MTAs
// that change the case of local parts, and the local part is 57 octets,
// within RFC 5321 §4.5.3.1.1's 64.
//
// It is its own package because the store routes these addresses, and
// package unsubscribe depends on the store.
package mailto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// KeyPurpose is the purpose the mailto key is derived from the master key
// for (seal.Box.DeriveKey).
const KeyPurpose = "posthaste unsubscribe mailto v1"

// Prefix starts the local part of every mailto unsubscribe address.
const Prefix = "unsubscribe+"

// Code layout before encoding: email id (16) | recipient index (2, big
// endian) | HMAC-SHA256 truncated (10).
const (
	idLen    = 16
	indexLen = 2
	macLen   = 10
	rawLen   = idLen + indexLen + macLen
	// CodeLen is the length of an encoded code: 28 bytes in base32.
	CodeLen = (rawLen*8 + 4) / 5
	// MaxIndex is the largest recipient index a code holds.
	MaxIndex = 1<<16 - 1
)

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Address is a parsed mailto unsubscribe address.
type Address struct {
	EmailID uuid.UUID
	// Index is the recipient's index in the email's recipients
	// (store.Email.Recipients).
	Index int
	// Host is the domain of the address, lower-cased.
	Host string
	mac  []byte
}

func sum(key []byte, emailID uuid.UUID, index int) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("posthaste unsubscribe mailto v1\x00"))
	m.Write(emailID[:])
	m.Write(binary.BigEndian.AppendUint16(nil, uint16(index)))
	return m.Sum(nil)[:macLen]
}

// Code returns the code of the recipient at index in the email emailID,
// under key (at least 32 random bytes, used for nothing else).
func Code(key []byte, emailID uuid.UUID, index int) (string, error) {
	if index < 0 || index > MaxIndex {
		return "", fmt.Errorf("recipient index %d out of range", index)
	}
	raw := make([]byte, 0, rawLen)
	raw = append(raw, emailID[:]...)
	raw = binary.BigEndian.AppendUint16(raw, uint16(index))
	raw = append(raw, sum(key, emailID, index)...)
	return encoding.EncodeToString(raw), nil
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
	if !found || len(code) != CodeLen {
		return Address{}, false
	}
	raw, err := encoding.DecodeString(code)
	if err != nil || len(raw) != rawLen || encoding.EncodeToString(raw) != code {
		return Address{}, false // the last character's unused bits must be zero
	}
	copy(a.EmailID[:], raw[:idLen])
	a.Index = int(binary.BigEndian.Uint16(raw[idLen:]))
	a.mac = raw[idLen+indexLen:]
	a.Host = host
	return a, true
}

// Verify reports whether a's code was made under key. The comparison
// takes constant time.
func (a Address) Verify(key []byte) bool {
	if len(key) == 0 || len(a.mac) != macLen {
		return false
	}
	return hmac.Equal(a.mac, sum(key, a.EmailID, a.Index))
}
