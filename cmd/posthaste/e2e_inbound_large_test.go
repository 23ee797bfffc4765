package main

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/mxlisten"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// largeInboundSize is the size on the wire of the large message: 40 MiB,
// the largest message the inbound MX promises to receive
// (mxlisten.DefaultMaxMessageBytes less its headroom).
const largeInboundSize = 40 << 20

// largeInboundMessage is a message of at most size bytes, nearly all of
// it one attachment, base64 in lines of 76 characters (RFC 2045 §6.8),
// of pseudo-random bytes (seeded, so incompressible and reproducible); it
// returns the message and the attachment's decoded content.
func largeInboundMessage(domain string, size int) (msg, content []byte) {
	header := fmt.Sprintf("From: Ann Customer <ann@customer.test>\r\nTo: support@%s\r\nSubject: The big file\r\n"+
		"Message-ID: <big@customer.test>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"+
		"--b\r\nContent-Type: text/plain\r\n\r\nThe scans are attached.\r\n"+
		"--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=scans.bin\r\n"+
		"Content-Transfer-Encoding: base64\r\n\r\n", domain)
	const trailer = "--b--\r\n"
	// 57 bytes encode to one line of 76 characters and CRLF.
	lines := (size - len(header) - len(trailer)) / 78
	content = make([]byte, lines*57)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(content); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			content[i+j] = byte(v >> (8 * j))
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(header)
	line := make([]byte, 76)
	for i := 0; i < len(content); i += 57 {
		base64.StdEncoding.Encode(line, content[i:i+57])
		b.Write(line)
		b.WriteString("\r\n")
	}
	b.WriteString(trailer)
	return []byte(b.String()), content
}

// TestDevInboundLarge receives a 40 MiB message through `posthaste dev`:
// net/smtp sends it, nearly all of it a base64 attachment, to support@ a
// verified domain with receiving enabled at the dev inbound MX, which
// answers 250; GET /emails/receiving lists it, its attachment has the
// decoded size, and its download is the very content. A message over the
// MX's cap (mxlisten.DefaultMaxMessageBytes) gets 552 and is never listed.
func TestDevInboundLarge(t *testing.T) {
	dev := shared(t, "domain")
	env := dev.env
	c := apiClient{t: t, base: dev.base, key: dev.newTeam(t, "member.test").APIKey}
	domain := uniqueDomain("big")
	c.receivingDomain(dev.dns, domain)

	msg, content := largeInboundMessage(domain, largeInboundSize)
	require.LessOrEqual(t, len(msg), largeInboundSize)
	require.Greater(t, len(msg), largeInboundSize-100, "the message is 40 MiB")
	require.NoError(t, sendInbound(t, env["POSTHASTE_INBOUND_LISTEN"], "support@"+domain, msg), "250 to the 40 MiB message")

	// Over the cap: 552 after DATA (RFC 5321 §4.5.3.1.10), nothing kept.
	over, _ := largeInboundMessage(domain, mxlisten.DefaultMaxMessageBytes+(1<<20))
	require.Greater(t, len(over), mxlisten.DefaultMaxMessageBytes)
	requireCode(t, sendInbound(t, env["POSTHASTE_INBOUND_LISTEN"], "support@"+domain, over), 552)

	var emailID string
	eventually(t, 2*time.Minute, func() error {
		status, list := c.do("GET", "/emails/receiving", nil)
		require.Equal(t, 200, status, list)
		data := list["data"].([]any)
		if len(data) == 0 {
			return errors.New("the 40 MiB message never appeared")
		}
		require.Len(t, data, 1, "only the message within the cap is received")
		emailID = data[0].(map[string]any)["id"].(string)
		return nil
	})
	status, e := c.do("GET", "/emails/receiving/"+emailID, nil)
	require.Equal(t, 200, status, e)
	require.Equal(t, "The big file", e["subject"])
	require.Equal(t, []any{"support@" + domain}, e["received_for"])
	require.Contains(t, e["text"], "The scans are attached.")
	atts := e["attachments"].([]any)
	require.Len(t, atts, 1)
	att := atts[0].(map[string]any)
	require.Equal(t, "scans.bin", att["filename"])
	require.Equal(t, float64(len(content)), att["size"], "the decoded size of the attachment")

	status, a := c.do("GET", "/emails/receiving/"+emailID+"/attachments/"+att["id"].(string), nil)
	require.Equal(t, 200, status, a)
	res, err := http.Get(a["download_url"].(string))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	h := sha256.New()
	n, err := io.Copy(h, res.Body)
	require.NoError(t, err)
	require.Equal(t, int64(len(content)), n)
	require.Equal(t, sha256.Sum256(content), [32]byte(h.Sum(nil)), "the downloaded attachment is the one sent")

	// The list still holds that one message.
	status, list := c.do("GET", "/emails/receiving", nil)
	require.Equal(t, 200, status, list)
	require.Len(t, list["data"], 1)
}

// receivingDomain adds a verified domain with receiving enabled and
// returns its id.
func (c apiClient) receivingDomain(dns *dnstest.Server, name string) string {
	c.t.Helper()
	id := c.verifiedDomain(dns, name)
	status, body := c.do("PATCH", "/domains/"+id, map[string]any{"capabilities": map[string]any{"receiving": "enabled"}})
	require.Equal(c.t, 200, status, body)
	return id
}
