package dkim

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/stretchr/testify/require"
)

const message = "From: A <a@example.test>\r\n" +
	"To: b@rcpt.test\r\n" +
	"Subject: Hi\r\n" +
	"Date: Sun, 22 Nov 2026 10:00:00 +0000\r\n" +
	"Message-ID: <1@example.test>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"List-Unsubscribe: <mailto:u@example.test>\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"\r\n" +
	"Hello  there \r\n\r\n\r\n"

func TestHeaderKeys(t *testing.T) {
	keys, err := HeaderKeys([]byte(message))
	require.NoError(t, err)
	require.Equal(t, []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version",
		"Content-Type", "List-Unsubscribe", "From"}, keys)
}

func TestSignVerifies(t *testing.T) {
	k, err := GenerateKey()
	require.NoError(t, err)
	signer, err := ParsePrivateKey(k.PrivatePKCS8)
	require.NoError(t, err)
	signed, err := Sign([]byte(message), "example.test", "posthaste", signer)
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(signed, []byte(message)), "the message itself is unchanged")
	sig := string(signed[:len(signed)-len(message)])
	for _, want := range []string{"a=rsa-sha256", "c=relaxed/relaxed", "d=example.test", "s=posthaste"} {
		require.Contains(t, sig, want)
	}

	lookup := func(domain string) ([]string, error) {
		if domain != "posthaste._domainkey.example.test" {
			return nil, fmt.Errorf("no record at %s", domain)
		}
		return []string{RecordValue(k.PublicBase64)}, nil
	}
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(signed), &msgdkim.VerifyOptions{LookupTXT: lookup})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	require.NoError(t, verifs[0].Err)
	require.Equal(t, "example.test", verifs[0].Domain)

	// Relaxed canonicalization survives whitespace changes in transit, but
	// a second From header (over-signing) and a changed body break it.
	refolded := strings.Replace(string(signed), "Subject: Hi", "Subject:   Hi", 1)
	verifs, err = msgdkim.VerifyWithOptions(strings.NewReader(refolded), &msgdkim.VerifyOptions{LookupTXT: lookup})
	require.NoError(t, err)
	require.NoError(t, verifs[0].Err)
	for name, bad := range map[string]string{
		"added From":   strings.Replace(string(signed), "To: b@rcpt.test", "From: evil@evil.test\r\nTo: b@rcpt.test", 1),
		"changed body": strings.Replace(string(signed), "Hello", "Hullo", 1),
	} {
		verifs, err = msgdkim.VerifyWithOptions(strings.NewReader(bad), &msgdkim.VerifyOptions{LookupTXT: lookup})
		require.NoError(t, err, name)
		require.Error(t, verifs[0].Err, name)
	}
}

// RFC 5322 §3.6.8 allows any printable ASCII but colon in a field name and
// §4.5.3 (obsolete syntax) control characters in values; HTTP's header rules
// (net/textproto) refuse both. Such messages, which the builder and the SMTP
// gateway accept, must still be signed.
func TestSignRFC5322Fields(t *testing.T) {
	k, err := GenerateKey()
	require.NoError(t, err)
	signer, err := ParsePrivateKey(k.PrivatePKCS8)
	require.NoError(t, err)
	msg := strings.Replace(message, "To: b@rcpt.test\r\n",
		"To: b@rcpt.test\r\nX-Tag[1]: (a)\r\nX-Ctl: a\x01b \xe9\r\nSubject : spaced\r\n", 1)
	keys, err := HeaderKeys([]byte(msg))
	require.NoError(t, err)
	require.Equal(t, []string{"From", "To", "Subject", "Subject", "Date", "Message-ID", "MIME-Version",
		"Content-Type", "List-Unsubscribe", "From"}, keys)
	signed, err := Sign([]byte(msg), "example.test", "posthaste", signer)
	require.NoError(t, err)
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(signed), &msgdkim.VerifyOptions{
		LookupTXT: func(string) ([]string, error) { return []string{RecordValue(k.PublicBase64)}, nil },
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	require.NoError(t, verifs[0].Err)
}

func TestTags(t *testing.T) {
	tags := Tags("v=DKIM1; k=rsa;\t p=MIIB IjAN\r\n Bgkq ;")
	require.Equal(t, map[string]string{"v": "DKIM1", "k": "rsa", "p": "MIIBIjANBgkq"}, tags)
}

func BenchmarkSign(b *testing.B) {
	k, err := GenerateKey()
	require.NoError(b, err)
	signer, err := ParsePrivateKey(k.PrivatePKCS8)
	require.NoError(b, err)
	msg := []byte(message + strings.Repeat("A line of a longer body.\r\n", 2000))
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := Sign(msg, "example.test", "posthaste", signer); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGenerateKey(b *testing.B) {
	for b.Loop() {
		if _, err := GenerateKey(); err != nil {
			b.Fatal(err)
		}
	}
}
