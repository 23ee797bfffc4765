// Package dkim makes the DKIM keys of sender domains and signs outgoing
// messages with them (RFC 6376, through github.com/emersion/go-msgauth).
package dkim

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/emersion/go-message/textproto"
	msgdkim "github.com/emersion/go-msgauth/dkim"
)

// KeyBits is the size of the RSA keys made for domains. RFC 8301 §3.2
// requires at least 1024 bits; 2048 is what mailbox providers expect and
// still fits a TXT record.
const KeyBits = 2048

// Key is a domain's key pair in storable form.
type Key struct {
	PrivatePKCS8 []byte // DER PKCS #8; seal it before storing
	PublicBase64 string // base64 DER SubjectPublicKeyInfo, the p= tag
}

// GenerateKey makes an RSA-2048 key pair.
func GenerateKey() (Key, error) {
	k, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return Key{}, fmt.Errorf("generating DKIM key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return Key{}, fmt.Errorf("encoding DKIM key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return Key{}, fmt.Errorf("encoding DKIM public key: %w", err)
	}
	return Key{PrivatePKCS8: priv, PublicBase64: base64.StdEncoding.EncodeToString(pub)}, nil
}

// RecordValue is the whole TXT value to publish at
// <selector>._domainkey.<domain> for a public key (RFC 6376 §3.6.1).
func RecordValue(publicBase64 string) string {
	return "v=DKIM1; k=rsa; p=" + publicBase64
}

// ParsePrivateKey reads a DER PKCS #8 RSA key.
func ParsePrivateKey(der []byte) (crypto.Signer, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing DKIM key: %w", err)
	}
	s, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("DKIM key is a %T, not RSA", k)
	}
	return s, nil
}

// signedHeaders are signed when present (RFC 6376 §5.4.1). From is signed
// once more than it occurs (over-signed, §8.15), so that a second From
// added on the way breaks the signature.
var signedHeaders = []string{"From", "To", "Cc", "Subject", "Date", "Message-ID", "MIME-Version",
	"Content-Type", "Reply-To", "List-Unsubscribe", "List-Unsubscribe-Post"}

// HeaderKeys returns the h= list for a message: every header of
// signedHeaders that the message has, as many times as it has it, and From
// once more. The header is read by RFC 5322 rules (go-message), not HTTP's
// (net/textproto), which would refuse field names such as "X-Tag[1]" and
// values with octets the message builder and the SMTP gateway accept.
func HeaderKeys(msg []byte) ([]string, error) {
	h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(msg)))
	if err != nil {
		return nil, fmt.Errorf("reading message header: %w", err)
	}
	var keys []string
	for _, k := range signedHeaders {
		for range h.Values(k) {
			keys = append(keys, k)
		}
	}
	return append(keys, "From"), nil
}

// Sign returns msg with a DKIM-Signature for domain and selector prepended:
// rsa-sha256, relaxed/relaxed canonicalization, the headers of HeaderKeys.
func Sign(msg []byte, domain, selector string, key crypto.Signer) ([]byte, error) {
	keys, err := HeaderKeys(msg)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(len(msg) + 1024)
	err = msgdkim.Sign(&out, bytes.NewReader(msg), &msgdkim.SignOptions{
		Domain:                 domain,
		Selector:               selector,
		Signer:                 key,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: msgdkim.CanonicalizationRelaxed,
		BodyCanonicalization:   msgdkim.CanonicalizationRelaxed,
		HeaderKeys:             keys,
	})
	if err != nil {
		return nil, fmt.Errorf("signing for %s: %w", domain, err)
	}
	return out.Bytes(), nil
}

// Tags reads the tag list of a DKIM record (RFC 6376 §3.2): whitespace
// around tags is ignored, and inside values too, since base64 values may be
// folded.
func Tags(record string) map[string]string {
	tags := map[string]string{}
	for _, part := range strings.Split(record, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		v = strings.Join(strings.Fields(v), "") // FWS may fold base64 values
		tags[strings.TrimSpace(k)] = v
	}
	return tags
}
