package reports

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/rcptcode"
)

// VERPPrefix starts the local part of every VERP return path:
// bounces+<code>@<host> (per recipient), and the per-email forms of
// before, bounces+<email id>[-<signature>]@<host>.
const VERPPrefix = "bounces+"

// VERPKeyPurpose derives the key of return-path signatures from the
// master key (seal.Box.DeriveKey): sending signs its return paths with
// it, the inbound MX and the processing of received reports verify them.
const VERPKeyPurpose = "posthaste verp return path"

// recipientLabel is the purpose per-recipient return path codes are
// signed for (rcptcode).
const recipientLabel = "posthaste verp v2"

// VERP is a parsed VERP return path (variable envelope return path: the
// envelope sender names the email and the recipient, so a bounce to it
// names them too).
type VERP struct {
	EmailID uuid.UUID
	// PerRecipient is set for the per-recipient form,
	// bounces+<code>@host (RecipientReturnPath), whose code names the
	// recipient at Index of the email. It is false for the per-email
	// forms every recipient of an email shared before:
	// bounces+<email id>-<signature>@host (SignedReturnPath) and the
	// unsigned bounces+<email id>@host.
	PerRecipient bool
	// Index is the recipient's index in the email's recipients
	// (store.Email.Recipients); 0 for the per-email forms.
	Index int
	// Signature is the signature part of the per-email signed form,
	// lower-cased; "" for the unsigned form and the per-recipient one.
	Signature string
	// Host is the domain of the address, lower-cased.
	Host string
	code rcptcode.Code
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

// SignedReturnPath is the signed per-email VERP return path of an email:
// bounces+<email id>-<signature>@<host>, host being the domain's return
// path host (send.example.com). Emails are no longer sent with it (see
// RecipientReturnPath); it is routed for emails sent before.
func SignedReturnPath(key []byte, emailID uuid.UUID, host string) string {
	return VERPPrefix + emailID.String() + "-" + Sign(key, emailID) + "@" + host
}

// RecipientReturnPath is the signed VERP return path of the recipient at
// index in an email: bounces+<code>@<host>, the code (rcptcode) naming
// the email and the recipient under an HMAC of key, so that a report to
// it can be about that recipient only. The local part is 8+45 = 53
// octets, within RFC 5321 §4.5.3.1.1's 64, for any index.
func RecipientReturnPath(key []byte, emailID uuid.UUID, index int, host string) (string, error) {
	c, err := rcptcode.Make(key, recipientLabel, emailID, index)
	if err != nil {
		return "", err
	}
	return VERPPrefix + c + "@" + strings.ToLower(host), nil
}

// ParseVERP reads a VERP return path, per recipient (bounces+<code>@host)
// or per email, signed (bounces+<uuid>-<sig>@host) or not
// (bounces+<uuid>@host), in any letter case, with or without angle
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
	if c, ok := rcptcode.Parse(local); ok {
		return VERP{EmailID: c.EmailID, PerRecipient: true, Index: c.Index, Host: host, code: c}, true
	}
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

// Verify reports whether v carries a valid signature under key: of its
// email id and recipient index for the per-recipient form, of its email
// id for the per-email one; an unsigned VERP never verifies. The
// comparison takes constant time. During a key rotation, call it with
// each key in use.
func (v VERP) Verify(key []byte) bool {
	if v.PerRecipient {
		c := v.code // its MAC, over v's own email id and index
		c.EmailID, c.Index = v.EmailID, v.Index
		return c.Verify(key, recipientLabel)
	}
	got, err := sigEncoding.DecodeString(v.Signature)
	if err != nil || len(got) != sigBytes {
		return false
	}
	return hmac.Equal(got, mac(key, v.EmailID))
}
