package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// pythonReceive sends a message with a PDF attachment to argv[2] at the
// inbound MX 127.0.0.1:argv[1] with Python's smtplib and email package
// (an independent MIME writer and SMTP client), and prints the refusals.
const pythonReceive = `
import smtplib, sys
from email.message import EmailMessage
m = EmailMessage()
m["From"] = "Ann Customer <ann@customer.test>"
m["To"] = sys.argv[2]
m["Cc"] = "bob@customer.test"
m["Subject"] = "Where is my order?"
m["Message-ID"] = "<order-42@customer.test>"
m.set_content("Hello, order 42 has not arrived.")
m.add_alternative("<p>Hello, order <b>42</b> has not arrived.</p>", subtype="html")
m.add_attachment(b"%PDF-1.4\n% receipt\n", maintype="application", subtype="pdf", filename="receipt.pdf")
with smtplib.SMTP("127.0.0.1", int(sys.argv[1])) as s:
    s.ehlo("mail.customer.test")
    s.starttls()
    s.ehlo("mail.customer.test")
    s.sendmail("ann@customer.test", [sys.argv[2]], m.as_bytes())
print("sent")
`

// TestDevReceiving receives mail for a domain through ` + "`posthaste dev`" + `:
// a verified domain enables receiving (PATCH capabilities), publishes the
// Receiving MX it is then shown and verifies it; a message with an
// attachment sent by Python's smtplib to support@ the domain at the dev
// inbound MX fires email.received and is listed, read and its attachment
// and raw message downloaded through the API. An address at a domain
// without receiving is refused at RCPT with 550.
func TestDevReceiving(t *testing.T) {
	dns := dnstest.NewServer(t)
	dns.AddTXT("_spf.posthaste.example", "v=spf1 ip4:127.0.0.0/8 -all")
	dbURL := pgtest.NewDatabase(t)
	dataDir := t.TempDir()
	inboundPort := freePort(t)
	inboundAddr := fmt.Sprintf("127.0.0.1:%d", inboundPort)
	env := map[string]string{
		"DATABASE_URL":                  dbURL,
		"POSTHASTE_DATA_DIR":            dataDir,
		"POSTHASTE_HTTP_ADDR":           fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":       fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT":    "0",
		"POSTHASTE_DNS_SERVER":          dns.Addr(),
		"POSTHASTE_HOSTNAME":            "posthaste.example",
		"POSTHASTE_BOUNCE_HOST":         "bounces.posthaste.example",
		"POSTHASTE_SPF_INCLUDE":         "_spf.posthaste.example",
		"POSTHASTE_VERIFY_INTERVAL":     "200ms",
		"POSTHASTE_VERIFY_FAST_PERIOD":  "2s",
		"POSTHASTE_VERIFY_MAX_INTERVAL": "1s",
		"POSTHASTE_INBOUND_LISTEN":      inboundAddr,
		"POSTHASTE_LOG_LEVEL":           "warn",
	}
	dev := startDev(t, env)
	defer dev.stop(t)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, dataDir).APIKey}

	id := c.verifiedDomain(dns, "example.test")
	c.verifiedDomain(dns, "quiet.test") // receiving stays disabled

	recv := newHookReceiver(t)
	status, hook := c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL,
		"events": []string{"email.received"}})
	require.Equal(t, 201, status, hook)
	recv.mu.Lock()
	recv.secret = hook["signing_secret"].(string)
	recv.mu.Unlock()

	// Before receiving is enabled, the domain's addresses are not ours.
	send := func(rcpt string) (string, error) {
		out, err := exec.Command("/usr/bin/python3", "-c", pythonReceive, fmt.Sprint(inboundPort), rcpt).CombinedOutput()
		return string(out), err
	}
	out, err := send("support@example.test")
	require.Error(t, err)
	require.Contains(t, out, "550", out)

	// Enabled: the Receiving MX is shown, published, and verified with the
	// other records.
	status, body := c.do("PATCH", "/domains/"+id, map[string]any{"capabilities": map[string]any{"receiving": "enabled"}})
	require.Equal(t, 200, status, body)
	status, d := c.do("GET", "/domains/"+id, nil)
	require.Equal(t, 200, status, d)
	require.Equal(t, map[string]any{"sending": "enabled", "receiving": "enabled"}, d["capabilities"])
	var mx map[string]any
	for _, r := range d["records"].([]any) {
		if rm := r.(map[string]any); rm["record"] == "Receiving" {
			mx = rm
		}
	}
	require.NotNil(t, mx, d)
	require.Equal(t, "MX", mx["type"])
	require.Equal(t, "bounces.posthaste.example", mx["value"])
	dns.AddMX("example.test", "bounces.posthaste.example", 10)
	status, _ = c.do("POST", "/domains/"+id+"/verify", nil)
	require.Equal(t, 200, status)
	eventually(t, 30*time.Second, func() error {
		_, d = c.do("GET", "/domains/"+id, nil)
		for _, r := range d["records"].([]any) {
			if rm := r.(map[string]any); rm["record"] == "Receiving" {
				mx = rm
			}
		}
		if mx["status"] != "verified" {
			return fmt.Errorf("receiving MX not verified: %v", mx)
		}
		return nil
	})
	c.waitDomain(id, "verified")

	// An address at a domain without receiving, and a foreign one: 550.
	for _, rcpt := range []string{"support@quiet.test", "someone@elsewhere.test"} {
		out, err := send(rcpt)
		require.Error(t, err, rcpt)
		require.Contains(t, out, "550", rcpt+": "+out)
	}

	out, err = send("Support@example.test")
	require.NoError(t, err, out)
	require.Contains(t, out, "sent")

	got := recv.waitFor(1)
	require.Equal(t, "email.received", got[0].Type)
	emailID := got[0].EmailID
	require.NotEmpty(t, emailID)

	status, list := c.do("GET", "/emails/receiving", nil)
	require.Equal(t, 200, status, list)
	data := list["data"].([]any)
	require.Len(t, data, 1)
	require.Equal(t, emailID, data[0].(map[string]any)["id"])

	status, e := c.do("GET", "/emails/receiving/"+emailID, nil)
	require.Equal(t, 200, status, e)
	require.Equal(t, "Ann Customer <ann@customer.test>", e["from"])
	require.Equal(t, []any{"Support@example.test"}, e["to"])
	require.Equal(t, []any{"bob@customer.test"}, e["cc"])
	require.Equal(t, []any{"support@example.test"}, e["received_for"], "the envelope recipient, as the MX normalized it")
	require.Equal(t, "Where is my order?", e["subject"])
	require.Equal(t, "<order-42@customer.test>", e["message_id"])
	require.Contains(t, e["text"], "order 42 has not arrived")
	require.Contains(t, e["html"], "<b>42</b>")
	require.Equal(t, "Where is my order?", e["headers"].(map[string]any)["subject"])
	atts := e["attachments"].([]any)
	require.Len(t, atts, 1)
	att := atts[0].(map[string]any)
	require.Equal(t, "receipt.pdf", att["filename"])
	require.Equal(t, "application/pdf", att["content_type"])

	download := func(u string) (int, string) {
		res, err := http.Get(u)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	status, a := c.do("GET", "/emails/receiving/"+emailID+"/attachments/"+att["id"].(string), nil)
	require.Equal(t, 200, status, a)
	code, content := download(a["download_url"].(string))
	require.Equal(t, 200, code)
	require.Equal(t, "%PDF-1.4\n% receipt\n", content)
	status, al := c.do("GET", "/emails/receiving/"+emailID+"/attachments", nil)
	require.Equal(t, 200, status, al)
	require.Len(t, al["data"], 1)
	code, raw := download(e["raw"].(map[string]any)["download_url"].(string))
	require.Equal(t, 200, code)
	require.Contains(t, raw, "Subject: Where is my order?")
	require.True(t, strings.HasPrefix(raw, "Received: from mail.customer.test"), raw[:min(len(raw), 200)])
	// A download URL with its signature changed does not work.
	code, _ = download(strings.Replace(a["download_url"].(string), "signature=", "signature=x", 1))
	require.Equal(t, 404, code)
	require.Len(t, recv.events(), 1)

	// What was received is sealed at rest: the raw message (small, so in
	// one sealed value of its inbound_message row, not in chunks), the
	// bodies and the attachment are nowhere in plaintext.
	counts := requireNoPlaintext(t, dbURL, []string{"inbound_message", "inbound_message_chunk", "received_email",
		"received_attachment"}, "order 42 has not arrived", "% receipt")
	require.Equal(t, map[string]int{"inbound_message": 1, "inbound_message_chunk": 0, "received_email": 1,
		"received_attachment": 1}, counts)
}

// receivedSample is a message with a text and an HTML part and a PDF
// attachment, as seedReceived sends it.
const receivedSample = "From: Ann Customer <ann@customer.test>\r\nTo: support@%s\r\nSubject: Where is my order?\r\n" +
	"Message-ID: <order-7@customer.test>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
	"--b\r\nContent-Type: multipart/alternative; boundary=a\r\n\r\n" +
	"--a\r\nContent-Type: text/plain\r\n\r\nOrder 7 has not arrived.\r\n" +
	"--a\r\nContent-Type: text/html\r\n\r\n<p>Order <b>7</b> has not arrived.</p>\r\n--a--\r\n" +
	"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=receipt.pdf\r\n" +
	"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"

// seedReceived gives the team of domainID, besides the domains of env, a
// verified domain with receiving enabled (see receiveAt) and has it
// receive a sample message; it returns the received email's id.
func seedReceived(t *testing.T, env map[string]string, c apiClient, domainID string) string {
	t.Helper()
	return receiveAt(t, env, c, domainID, "inbox.tour.test", func(domain string) []byte {
		return []byte(fmt.Sprintf(receivedSample, domain))
	})
}

// receiveAt inserts for the team of domainID a verified domain named name
// with receiving enabled (in the database: the dashboard tour has no DNS
// to verify one through, and no verification workflow runs for it), sends
// msg(name) to support@name at the dev inbound MX and returns the id of
// the received email once the API lists it.
func receiveAt(t *testing.T, env map[string]string, c apiClient, domainID, name string, msg func(domain string) []byte) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: env["DATABASE_URL"]})
	require.NoError(t, err)
	defer st.Close()
	team, err := st.Domains.DomainByID(ctx, uuid.MustParse(domainID))
	require.NoError(t, err)
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team.TeamID, Name: name, Region: "us-east-1",
		Status: store.DomainVerified, ReturnPath: "send", TLS: store.TLSOpportunistic, DKIMSelector: "posthaste",
		DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("sealed"), Receiving: store.ReceivingEnabled}
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	require.NoError(t, sendInbound(t, env["POSTHASTE_INBOUND_LISTEN"], "support@"+d.Name, msg(d.Name)))
	var id string
	eventually(t, 30*time.Second, func() error {
		status, list := c.do("GET", "/emails/receiving", nil)
		require.Equal(t, 200, status, list)
		data := list["data"].([]any)
		if len(data) == 0 {
			return errors.New("the received email never appeared")
		}
		id = data[0].(map[string]any)["id"].(string)
		return nil
	})
	return id
}

// dashboardID is the id in a dashboard URL such as
// http://host/dashboard/domains/<id>?done=added.
func dashboardID(u string) string {
	u, _, _ = strings.Cut(u, "?")
	return u[strings.LastIndexByte(u, '/')+1:]
}
