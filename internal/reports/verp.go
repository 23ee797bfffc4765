package reports

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/google/uuid"
)

// VERPPrefix starts the local part of every VERP return path:
// bounces+<email id>[-<signature>]@<host>.
const VERPPrefix = "bounces+"

// VERP is a parsed VERP return path (variable envelope return path: the
// envelope sender names the email, so a bounce to it names the email too).
type VERP struct {
	EmailID uuid.UUID
	// Signature is the signature part, lower-cased; "" for an unsigned
	// return path (the form before signatures, bounces+<email id>@host).
	Signature string
	// Host is the domain of the address, lower-cased.
	Host string
}

// sigLen is the length of a signature: 10 bytes of HMAC-SHA256 in base32,
// 16 characters, 80 bits. The local part is then 8+36+1+16 = 61 octets,
// within RFC 5321 §4.5.3.1.1's 64.
const (
	sigBytes = 10
	sigLen   = 16
)

// sigEncoding is lower-case base32 without padding: letters and digits
// only, valid in a dot-atom local part, and safe from MTAs that change the
// case of local parts (signatures are compared lower-cased).
var sigEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Sign returns the signature of an email id under key: HMAC-SHA256 over a
// fixed label and the id's 16 bytes, truncated to 80 bits and
// base32-encoded. key is the operator's secret (at least 32 random bytes);
// without it nobody can make a return path that Verify accepts for an id.
func Sign(key []byte, emailID uuid.UUID) string {
	return sigEncoding.EncodeToString(mac(key, emailID))
}

func mac(key []byte, emailID uuid.UUID) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("posthaste verp v1\x00"))
	m.Write(emailID[:])
	return m.Sum(nil)[:sigBytes]
}

// SignedReturnPath is the signed VERP return path of an email:
// bounces+<email id>-<signature>@<host>, host being the domain's return
// path host (send.example.com).
func SignedReturnPath(key []byte, emailID uuid.UUID, host string) string {
	return VERPPrefix + emailID.String() + "-" + Sign(key, emailID) + "@" + host
}

// ParseVERP reads a VERP return path, signed (bounces+<uuid>-<sig>@host)
// or not (bounces+<uuid>@host), in any letter case, with or without angle
// brackets. ok is false for any other address.
func ParseVERP(addr string) (v VERP, ok bool) {
	a := strings.ToLower(strings.Trim(strings.TrimSpace(addr), "<>"))
	at := strings.LastIndexByte(a, '@')
	if at < 0 {
		return VERP{}, false
	}
	local, host := a[:at], a[at+1:]
	if !strings.HasPrefix(local, VERPPrefix) || host == "" || strings.ContainsAny(host, " \t<>@") {
		return VERP{}, false
	}
	local = local[len(VERPPrefix):]
	const idLen = 36 // the hyphenated form
	if len(local) < idLen {
		return VERP{}, false
	}
	id, err := uuid.Parse(local[:idLen])
	if err != nil {
		return VERP{}, false
	}
	rest := local[idLen:]
	switch {
	case rest == "":
	case len(rest) == 1+sigLen && rest[0] == '-':
		rest = rest[1:]
		if _, err := sigEncoding.DecodeString(rest); err != nil {
			return VERP{}, false
		}
	default:
		return VERP{}, false
	}
	return VERP{EmailID: id, Signature: rest, Host: host}, true
}

// Verify reports whether v carries a valid signature of its email id under
// key; an unsigned VERP never verifies. The comparison takes constant
// time. During a key rotation, call it with each key in use.
func (v VERP) Verify(key []byte) bool {
	got, err := sigEncoding.DecodeString(v.Signature)
	if err != nil || len(got) != sigBytes {
		return false
	}
	return hmac.Equal(got, mac(key, v.EmailID))
}
