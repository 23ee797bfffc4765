// Package rcptcode makes and reads the compact signed codes that name one
// recipient of one email in the local part of an address we receive mail
// at: the mailto unsubscribe addresses (unsubscribe+<code>@…, package
// mailto) and the per-recipient return paths (bounces+<code>@…, package
// reports).
//
// A code is the email id (16 bytes), the recipient's index in the email
// (2 bytes, big endian) and an HMAC-SHA256 of both under a purpose label,
// truncated to 80 bits (10 bytes): 28 bytes, 45 characters of lower-case
// base32 without padding. Letters and digits only, so it is a valid
// dot-atom and survives MTAs that change the case of local parts; with a
// prefix of up to 19 octets the local part stays within RFC 5321
// §4.5.3.1.1's 64. Nobody without the key can make a code for another
// email or recipient; each purpose signs under its own label (and key).
package rcptcode

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
)

// Layout before encoding: email id | recipient index | truncated HMAC.
const (
	idLen    = 16
	indexLen = 2
	macLen   = 10
	rawLen   = idLen + indexLen + macLen
	// Len is the length of an encoded code: 28 bytes in base32.
	Len = (rawLen*8 + 4) / 5
	// MaxIndex is the largest recipient index a code holds.
	MaxIndex = 1<<16 - 1
)

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Code is a parsed code, not yet verified (Verify).
type Code struct {
	EmailID uuid.UUID
	// Index is the recipient's index in the email's recipients
	// (store.Email.Recipients).
	Index int
	mac   []byte
}

func sum(key []byte, label string, emailID uuid.UUID, index int) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write(emailID[:])
	m.Write(binary.BigEndian.AppendUint16(nil, uint16(index)))
	return m.Sum(nil)[:macLen]
}

// Make returns the code of the recipient at index in the email emailID,
// signed under key (at least 32 random bytes) for the purpose label.
func Make(key []byte, label string, emailID uuid.UUID, index int) (string, error) {
	if index < 0 || index > MaxIndex {
		return "", fmt.Errorf("recipient index %d out of range", index)
	}
	raw := make([]byte, 0, rawLen)
	raw = append(raw, emailID[:]...)
	raw = binary.BigEndian.AppendUint16(raw, uint16(index))
	raw = append(raw, sum(key, label, emailID, index)...)
	return encoding.EncodeToString(raw), nil
}

// Parse reads a code, lower-case (the caller lower-cases the local part).
// ok is false for anything that is not exactly one code. It does not
// verify the code: see Verify.
func Parse(s string) (c Code, ok bool) {
	if len(s) != Len {
		return Code{}, false
	}
	raw, err := encoding.DecodeString(s)
	if err != nil || len(raw) != rawLen || encoding.EncodeToString(raw) != s {
		return Code{}, false // the last character's unused bits must be zero
	}
	copy(c.EmailID[:], raw[:idLen])
	c.Index = int(binary.BigEndian.Uint16(raw[idLen:]))
	c.mac = raw[idLen+indexLen:]
	return c, true
}

// Verify reports whether c was made under key for the purpose label. The
// comparison takes constant time.
func (c Code) Verify(key []byte, label string) bool {
	if len(key) == 0 || len(c.mac) != macLen {
		return false
	}
	return hmac.Equal(c.mac, sum(key, label, c.EmailID, c.Index))
}
