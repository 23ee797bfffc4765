package submit

import (
	"bytes"
	"crypto"
	"fmt"
	"testing"
	"time"

	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/mime"
)

// smtpSigner signs for shop.test and verifies what it signed.
type smtpSigner struct {
	key    crypto.Signer
	record string
}

func newSMTPSigner(t testing.TB) smtpSigner {
	t.Helper()
	k, err := dkim.GenerateKey()
	require.NoError(t, err)
	key, err := dkim.ParsePrivateKey(k.PrivatePKCS8)
	require.NoError(t, err)
	return smtpSigner{key: key, record: dkim.RecordValue(k.PublicBase64)}
}

// acceptAndSign takes a message submitted over SMTP through the checks of
// SendMessage that need no database (size, ParseSubmission, checkMessage)
// and, when they accept it, stores it as SendMessage does (messageRow,
// Submission.Bytes) and signs the stored source as Prepare does. accepted is
// false for a refused message; err is any failure after acceptance.
func (s smtpSigner) acceptAndSign(raw []byte) (signed []byte, accepted bool, err error) {
	m := Message{EnvelopeFrom: "news@shop.test", Recipients: []string{"bob@dest.test"}, Data: raw}
	if len(m.Data) > MaxMessageSize {
		return nil, false, nil
	}
	parsed, err := mime.ParseSubmission(m.Data)
	if err != nil {
		return nil, false, nil
	}
	e, _, err := checkMessage(parsed, m)
	if err != nil {
		return nil, false, nil
	}
	id := uuid.MustParse("0192f1e4-7a3b-7c1d-9e2f-3a4b5c6d7e8f")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	row := messageRow(id, uuid.Nil, e, parsed, now)
	if row.MessageID == "" {
		row.MessageID = id.String() + "@" + e.From.Domain
	}
	row.Source = parsed.Bytes(row.MessageID, now)
	if len(row.Source) > MaxMessageSize {
		return nil, false, nil
	}
	signed, err = dkim.Sign(row.Source, "shop.test", "sel", s.key)
	if err != nil {
		return nil, true, fmt.Errorf("signing: %w", err)
	}
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(signed), &msgdkim.VerifyOptions{
		LookupTXT: func(string) ([]string, error) { return []string{s.record}, nil },
	})
	if err != nil {
		return nil, true, fmt.Errorf("verifying: %w", err)
	}
	if len(verifs) != 1 || verifs[0].Err != nil {
		return nil, true, fmt.Errorf("verifying: %d signatures, %v", len(verifs), verifs[0].Err)
	}
	return signed, true, nil
}

// Over SMTP a header field with a control character was accepted and then
// failed to sign forever; it is refused at once now, and field
// names that RFC 5322 allows but HTTP does not are signed.
func TestSubmittedMessagesSignOrAreRefused(t *testing.T) {
	s := newSMTPSigner(t)
	for _, tt := range []struct {
		raw      string
		accepted bool
	}{
		{"From: news@shop.test\r\nTo: bob@dest.test\r\nX-A: a\x01b\r\n\r\nhi\r\n", false},
		{"From: news@shop.test\r\nTo: bob@dest.test\r\nSubject: a\x7fb\r\n\r\nhi\r\n", false},
		{"From: news@shop.test\r\nTo: bob@dest.test\r\nX-Tag[1]: (x)\r\nContent-Language: en\r\n\r\nhi\r\n", true},
		{"From: news@shop.test\nTo: bob@dest.test\nSubject: caf\xe9 \t8-bit\n\nhi\n", true},
	} {
		_, accepted, err := s.acceptAndSign([]byte(tt.raw))
		require.NoError(t, err, "%q", tt.raw)
		require.Equal(t, tt.accepted, accepted, "%q", tt.raw)
	}
}

// FuzzSubmittedMessageSigns checks that every message the SMTP checks
// accept can be signed as stored, with a signature that verifies.
func FuzzSubmittedMessageSigns(f *testing.F) {
	for _, seed := range []string{
		"From: news@shop.test\r\nTo: bob@dest.test\r\nSubject: Hi\r\n\r\nhi\r\n",
		"From: news@shop.test\r\nX-A: a\x01b\r\n\r\nhi\r\n",
		"From: news@shop.test\r\nX-Tag[1]: x\r\n\r\n",
		"From: News <news@shop.test>\nTo: a@dest.test, b@dest.test\nBcc: c@dest.test\nIdempotency-Key: k\n" +
			"X-Posthaste-Tags: a=b\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n" +
			"--b\nContent-Type: message/rfc822\n\nFrom: x@y.test\nSubject: fwd\n\nforwarded\n--b--\n",
		"From: news@shop.test\r\nSubject : spaced\r\nMessage-ID: <x@y>\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\n\r\n.\r\n",
		"From: news@shop.test\r\n\r\n",
		"From: news@shop.test",
	} {
		f.Add([]byte(seed))
	}
	s := newSMTPSigner(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, _, err := s.acceptAndSign(raw); err != nil {
			t.Fatalf("accepted but not signed: %v", err)
		}
	})
}
