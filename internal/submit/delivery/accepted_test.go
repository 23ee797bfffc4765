package delivery_test

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// What the API accepts, Prepare must be able to build and sign: an email
// that fails there has already been answered 200, charged to the quota and
// announced as sent.

var acceptedAt = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// eml is an everyday forward: a message saved by a mail program, LF line
// ends and all.
const eml = "From: Carol <carol@example.org>\n" +
	"To: bob@example.com\n" +
	"Subject: Minutes of Friday\n" +
	"Date: Sat, 21 Nov 2026 09:00:00 +0000\n" +
	"Message-ID: <minutes@example.org>\n" +
	"MIME-Version: 1.0\n" +
	"Content-Type: text/plain; charset=utf-8\n" +
	"Content-Transfer-Encoding: 8bit\n" +
	"\n" +
	"Voilà the minutes.\n"

// sendJSON is a send request from shop.test with extra members.
func sendJSON(extra string) string {
	return `{"from":"Shop <hello@shop.test>","to":"bob@dest.test","subject":"Hi","html":"<p>Hi</p>"` + extra + `}`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// signer is a DKIM key for shop.test with the lookup that verifies it.
type signer struct {
	key    crypto.Signer
	lookup func(string) ([]string, error)
}

func newSigner(t testing.TB) signer {
	t.Helper()
	k, err := dkim.GenerateKey()
	require.NoError(t, err)
	key, err := dkim.ParsePrivateKey(k.PrivatePKCS8)
	require.NoError(t, err)
	return signer{key: key, lookup: func(name string) ([]string, error) {
		if name != "sel._domainkey.shop.test" {
			return nil, fmt.Errorf("unexpected lookup of %s", name)
		}
		return []string{dkim.RecordValue(k.PublicBase64)}, nil
	}}
}

// buildAccepted takes a validated email the way Prepare does: the row it
// is stored as, BuildMessage, then the DKIM signature, which must verify.
func (s signer) buildAccepted(e submit.Email) ([]byte, error) {
	row := e.Row(uuid.MustParse("0192f1e4-7a3b-7c1d-9e2f-3a4b5c6d7e8f"), uuid.Nil, acceptedAt)
	msg, err := delivery.BuildMessage(row, acceptedAt)
	if err != nil {
		return nil, fmt.Errorf("building: %w", err)
	}
	if err := readable(msg, e); err != nil {
		return nil, err
	}
	return s.sign(msg)
}

// readable checks that a mail reader (go-message) finds in msg the
// addresses of e and can walk its MIME structure.
func readable(msg []byte, e submit.Email) error {
	r, err := mail.CreateReader(bytes.NewReader(msg))
	if err != nil && !message.IsUnknownCharset(err) {
		return fmt.Errorf("reading: %w", err)
	}
	for _, f := range []struct {
		key  string
		want []address.Address
	}{{"From", []address.Address{e.From}}, {"To", e.To}, {"Cc", e.Cc}, {"Reply-To", e.ReplyTo}} {
		got, err := r.Header.AddressList(f.key)
		if err != nil {
			return fmt.Errorf("reading %s %q: %w", f.key, r.Header.Get(f.key), err)
		}
		if len(got) != len(f.want) {
			return fmt.Errorf("reading %s %q: %d addresses, want %d", f.key, r.Header.Get(f.key), len(got), len(f.want))
		}
		for i, a := range got {
			if a.Name != f.want[i].Name || a.Address != f.want[i].Addr() {
				return fmt.Errorf("reading %s: got %q <%s>, want %q <%s>", f.key, a.Name, a.Address, f.want[i].Name, f.want[i].Addr())
			}
		}
	}
	m, err := message.Read(bytes.NewReader(msg))
	if err != nil && !message.IsUnknownCharset(err) {
		return fmt.Errorf("reading: %w", err)
	}
	return m.Walk(func(_ []int, p *message.Entity, err error) error {
		if err != nil && !message.IsUnknownCharset(err) {
			return fmt.Errorf("walking: %w", err)
		}
		return nil
	})
}

func (s signer) sign(msg []byte) ([]byte, error) {
	signed, err := dkim.Sign(msg, "shop.test", "sel", s.key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(signed), &msgdkim.VerifyOptions{LookupTXT: s.lookup})
	if err != nil {
		return nil, fmt.Errorf("verifying: %w", err)
	}
	if len(verifs) != 1 || verifs[0].Err != nil {
		return nil, fmt.Errorf("verifying: %d signatures, %v", len(verifs), verifs[0].Err)
	}
	return signed, nil
}

func validate(body string) (submit.Email, error) {
	r, err := submit.DecodeSendRequest([]byte(body))
	if err != nil {
		return submit.Email{}, err
	}
	return r.Validate(context.Background(), submit.ValidateOptions{Now: acceptedAt})
}

// entity is a part of a built message.
type entity struct {
	mediaType string
	header    message.Header
	body      []byte
}

func entities(t *testing.T, msg []byte) []entity {
	t.Helper()
	m, err := message.Read(bytes.NewReader(msg))
	require.NoError(t, err)
	var out []entity
	require.NoError(t, m.Walk(func(_ []int, e *message.Entity, err error) error {
		if err != nil {
			return err
		}
		mt, _, err := e.Header.ContentType()
		if err != nil {
			return err
		}
		ent := entity{mediaType: mt, header: e.Header}
		if !strings.HasPrefix(mt, "multipart/") { // Walk reads those
			ent.body, err = io.ReadAll(e.Body)
		}
		out = append(out, ent)
		return err
	}))
	return out
}

func TestAcceptedEmailsBuildAndSign(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	tests := []struct {
		name  string
		extra string
		check func(t *testing.T, msg []byte)
	}{{
		name:  "Content-Language header",
		extra: `,"headers":{"Content-Language":"en","Content-Description":"Greeting","X-Tag[1]":"a"}`,
		check: func(t *testing.T, msg []byte) {
			h, err := message.Read(bytes.NewReader(msg))
			require.NoError(t, err)
			require.Equal(t, "en", h.Header.Get("Content-Language"))
			require.Equal(t, "Greeting", h.Header.Get("Content-Description"))
			require.Equal(t, "a", h.Header.Get("X-Tag[1]"))
		},
	}, {
		name:  ".eml attachment",
		extra: `,"attachments":[{"filename":"minutes.eml","content_type":"message/rfc822","content":"` + b64(eml) + `"}]`,
		check: func(t *testing.T, msg []byte) {
			parts := entities(t, msg)
			last := parts[len(parts)-1]
			require.Equal(t, "message/rfc822", last.mediaType)
			// RFC 2046 §5.2.1: 7bit, 8bit or binary, never base64.
			require.Equal(t, "8bit", last.header.Get("Content-Transfer-Encoding"))
			inner, err := mail.CreateReader(bytes.NewReader(last.body))
			require.NoError(t, err)
			subject, err := inner.Header.Subject()
			require.NoError(t, err)
			require.Equal(t, "Minutes of Friday", subject)
			p, err := inner.NextPart()
			require.NoError(t, err)
			text, err := io.ReadAll(p.Body)
			require.NoError(t, err)
			require.Equal(t, "Voilà the minutes.\r\n", string(text))
		},
	}, {
		name:  "attached message that is not one",
		extra: `,"attachments":[{"filename":"broken.eml","content_type":"message/rfc822","content":"` + b64("no header here") + `"}]`,
		check: func(t *testing.T, msg []byte) {
			parts := entities(t, msg)
			last := parts[len(parts)-1]
			require.Equal(t, "application/octet-stream", last.mediaType)
			require.Equal(t, "no header here", string(last.body))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := validate(sendJSON(tt.extra))
			require.NoError(t, err)
			msg, err := s.buildAccepted(e)
			require.NoError(t, err)
			tt.check(t, msg)
		})
	}
}

// What cannot be built is refused at accept time (422), naming the field.
func TestUnbuildableEmailsAreRefused(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		extra string
		kind  submit.Kind
		msg   string
	}{
		"multipart attachment": {`,"attachments":[{"filename":"a","content_type":"multipart/mixed; boundary=x","content":"eA=="}]`,
			submit.KindInvalidAttachment, "multipart/mixed; boundary=x is MIME structure"},
		"control character in a header": {`,"headers":{"X-A":"a\u0001b"}`,
			submit.KindValidation, "without line breaks or control characters"},
		"header the builder writes": {`,"headers":{"Content-Transfer-Encoding":"8bit"}`,
			submit.KindValidation, "Posthaste sets the `Content-Transfer-Encoding` header itself."},
	} {
		_, err := validate(sendJSON(tt.extra))
		var se *submit.Error
		require.True(t, errors.As(err, &se), "%s: %v", name, err)
		require.Equal(t, tt.kind, se.Kind, name)
		require.Contains(t, se.Message, tt.msg, name)
	}
}

// The reported cases through the store and Prepare, signed with the
// domain's sealed key.
func TestPrepareSendsAcceptedForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, key := insertDomain(t, st, box, "shop.test")
	e, err := validate(sendJSON(`,"headers":{"Content-Language":"en"},` +
		`"attachments":[{"filename":"minutes.eml","content_type":"message/rfc822","content":"` + b64(eml) + `"}]`))
	require.NoError(t, err)
	row := e.Row(uuid.Must(uuid.NewV7()), d.TeamID, time.Now())
	row.DomainID = &d.ID
	_, err = storetest.InsertEmail(ctx, st, row)
	require.NoError(t, err)

	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box}, st, nil, nil, nil)
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: row.ID.String()})
	require.NoError(t, err)
	require.Len(t, res.Groups, 1)

	msg, err := st.Emails.Message(ctx, row.ID)
	require.NoError(t, err)
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(msg), &msgdkim.VerifyOptions{
		LookupTXT: func(string) ([]string, error) { return []string{dkim.RecordValue(key.PublicBase64)}, nil },
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	require.NoError(t, verifs[0].Err)
	parts := entities(t, msg)
	require.Equal(t, "en", parts[0].header.Get("Content-Language"))
	last := parts[len(parts)-1]
	require.Equal(t, "message/rfc822", last.mediaType)
	require.Equal(t, strings.ReplaceAll(eml, "\n", "\r\n"), string(last.body))
}

// FuzzAcceptedEmailBuilds feeds send requests through the API's validator
// and every one it accepts through the row it is stored as, BuildMessage
// and the DKIM signer, whose signature must verify: what the API answers
// 200 to must never fail when it is sent.
func FuzzAcceptedEmailBuilds(f *testing.F) {
	type seed struct {
		from, to, cc, subject, html, text string
		textSet                           bool
		header, value                     string
		filename, contentType, cid        string
		content                           []byte
		contentType2                      string
		content2                          []byte
	}
	for _, s := range []seed{
		{"Shop <hello@shop.test>", "bob@dest.test", "", "Hi", "<p>Hi</p>", "", false, "Content-Language", "en", "", "", "", nil, "", nil},
		{"hello@shop.test", "bob@dest.test", "Carol <carol@dest.test>", "Fwd: minutes", "", "See attached", true, "X-Tag[1]", "a\tb",
			"minutes.eml", "message/rfc822", "", []byte(eml), "message/rfc822", []byte("Subject: x\n\n--=_\n")},
		{"hello@shop.test", "bob@dest.test", "", "Hi", "<img src=cid:logo>", "", false, "", "", "", "message/rfc822", "logo",
			[]byte("no header\n"), "", nil},
		{"hello@shop.test", "bob@dest.test", "", "Hi", "h", "", true, "X-A", "a\x01b", "a.bin", "multipart/mixed; boundary=x", "",
			[]byte("x"), "", nil},
		{"Zoë <zoe@shop.test>", "jörg@bücher.de", "", "Été ✓", "<p>é</p>", "é", true, "Content-Description", "Reçu", "reçu.eml",
			"message/global", "", []byte("Subject: é\n\n" + strings.Repeat("é", 600)), "message/delivery-status", []byte("Status: 5.0.0\n")},
		{`"Zoë \\ Co" <hello@shop.test>`, `"=?utf-8?q?x?=" <bob@dest.test>`, `"a\"b" <c@dest.test>`, "Hi", "h", "", false, "", "", "", "", "",
			nil, "", nil},
		{"hello@shop.test", "bob@dest.test", "", "Hi", "h", "", false, "X-Long", strings.Repeat("token", 400), "voice.vpm", "", "",
			[]byte{0}, "", nil},
	} {
		f.Add(s.from, s.to, s.cc, s.subject, s.html, s.text, s.textSet, s.header, s.value, s.filename, s.contentType, s.cid,
			s.content, s.contentType2, s.content2)
	}
	s := newSigner(f)
	f.Fuzz(func(t *testing.T, from, to, cc, subject, html, text string, textSet bool,
		header, value, filename, contentType, cid string, content []byte, contentType2 string, content2 []byte) {
		r := submit.SendRequest{From: from, To: submit.AddressList{to}, Subject: &subject}
		if cc != "" {
			r.Cc, r.ReplyTo = submit.AddressList{cc}, submit.AddressList{cc}
		}
		if html != "" {
			r.HTML = &html
		}
		if text != "" || textSet {
			r.Text = &text
		}
		if header != "" {
			r.Headers = map[string]string{header: value}
		}
		if content != nil {
			r.Attachments = append(r.Attachments,
				submit.AttachmentRequest{Content: content, Filename: filename, ContentType: contentType, ContentID: cid})
		}
		if content2 != nil {
			r.Attachments = append(r.Attachments,
				submit.AttachmentRequest{Content: content2, Filename: "2" + filename, ContentType: contentType2})
		}
		e, err := r.Validate(context.Background(), submit.ValidateOptions{Now: acceptedAt})
		if err != nil {
			var se *submit.Error
			if !errors.As(err, &se) {
				t.Fatalf("refused without a 4xx error: %v", err)
			}
			return
		}
		if _, err := s.buildAccepted(e); err != nil {
			t.Fatalf("accepted but not sendable: %v", err)
		}
	})
}
