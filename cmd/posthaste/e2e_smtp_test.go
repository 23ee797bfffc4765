package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/smtpgw"
)

// smtpListen gives a dev process of the tests SMTP listeners on free
// loopback ports (STARTTLS first, then implicit TLS) unless the test chose,
// and an inbound MX on one (inboundListenEnv).
func smtpListen(t *testing.T, env map[string]string) {
	t.Helper()
	if _, ok := env["POSTHASTE_SMTP_LISTEN"]; !ok {
		env["POSTHASTE_SMTP_LISTEN"] = fmt.Sprintf("starttls://127.0.0.1:%d,tls://127.0.0.1:%d", freePort(t), freePort(t))
	}
	inboundListenEnv(t, env)
}

// smtpPorts returns the STARTTLS and implicit TLS addresses of a dev
// process started with smtpListen's default.
func smtpPorts(t *testing.T, env map[string]string) (starttls, implicit string) {
	t.Helper()
	ls, err := config.ParseSMTPListen(env["POSTHASTE_SMTP_LISTEN"])
	require.NoError(t, err)
	require.Len(t, ls, 2)
	return ls[0].Addr, ls[1].Addr
}

var queuedAs = regexp.MustCompile(`250 2\.0\.0 Ok: queued as ([0-9a-f-]{36})`)

// rateLimited is the gateway's transient refusal of a MAIL FROM over the
// team's rate limit.
const rateLimited = "451 4.7.0 Rate limit exceeded"

// swaks runs Debian's swaks and returns its transcript and the id of each
// accepted message. Like a mail program, it tries again later (up to ten
// times, a second apart, as the reply asks) when the gateway defers the
// transaction for the team's rate limit, which the test's own API polling
// shares.
func swaks(t *testing.T, args ...string) (string, []string) {
	t.Helper()
	for try := 1; ; try++ {
		out, err := exec.Command("swaks", append([]string{"--timeout", "30"}, args...)...).CombinedOutput()
		var ids []string
		for _, m := range queuedAs.FindAllStringSubmatch(string(out), -1) {
			ids = append(ids, m[1])
		}
		if err != nil && len(ids) > 0 {
			t.Fatalf("swaks failed after an acceptance: %v\n%s", err, out)
		}
		if len(ids) > 0 || !strings.Contains(string(out), rateLimited) || try == 10 {
			return string(out), ids
		}
		time.Sleep(time.Second)
	}
}

// checkSMTPClients submits through the dev process's SMTP gateway with
// real clients: swaks over STARTTLS (AUTH PLAIN) and implicit TLS (AUTH
// LOGIN), Python's smtplib with an idempotency key, and an attempt without
// AUTH. Sandbox mail reaches its outcome; mail to the team member reaches
// the loopback MX, as submitted.
func checkSMTPClients(t *testing.T, c apiClient, env map[string]string, dataDir string, mx *smtptest.Server) {
	t.Helper()
	starttls, implicit := smtpPorts(t, env)
	ca := smtpCA(t, dataDir)

	// swaks, STARTTLS and AUTH PLAIN, to a sandbox address.
	out, ids := swaks(t, "--server", starttls, "--tls", "--tls-verify", "--tls-ca-path", ca, "--tls-sni", "localhost",
		"--auth", "PLAIN", "--auth-user", "posthaste", "--auth-password", c.key,
		"--from", "onboarding@posthaste.test", "--to", "delivered@posthaste.test",
		"--header", "Subject: Sent with swaks", "--header", "X-Posthaste-Tags: client=swaks", "--body", "Plain body")
	require.Len(t, ids, 1, out)
	e := c.waitFor(ids[0], map[string]string{"delivered@posthaste.test": "delivered"})
	require.Equal(t, "Sent with swaks", e["subject"])
	require.Equal(t, []any{map[string]any{"name": "client", "value": "swaks"}}, e["tags"])

	// swaks, implicit TLS and AUTH LOGIN, to the team member: the message
	// reaches the member's MX as submitted, without its Bcc.
	before := len(mx.Messages())
	data := filepath.Join(t.TempDir(), "msg.eml")
	require.NoError(t, os.WriteFile(data, []byte("From: Acme <onboarding@posthaste.test>\r\n"+
		"To: owner@member.test\r\nBcc: owner@member.test\r\nSubject: Raw over SMTP\r\n"+
		"X-Mailer: swaks\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Transfer-Encoding: 8bit\r\n\r\nCafé au lait.\r\n"), 0o600))
	out, ids = swaks(t, "--server", implicit, "--tls-on-connect", "--auth", "LOGIN",
		"--auth-user", "posthaste", "--auth-password", c.key,
		"--from", "onboarding@posthaste.test", "--to", "owner@member.test", "--data", data)
	require.Len(t, ids, 1, out)
	c.waitFor(ids[0], map[string]string{"owner@member.test": "delivered"})
	msgs := mx.WaitMessages(t, before+1, 10*time.Second)
	got := string(msgs[len(msgs)-1].Data)
	require.Contains(t, got, "\r\nSubject: Raw over SMTP\r\nX-Mailer: swaks\r\n")
	require.Contains(t, got, "\r\n\r\nCafé au lait.\r\n", "the body as submitted")
	require.NotContains(t, got, "Bcc")
	require.Contains(t, got, "Message-ID: <"+ids[0]+"@posthaste.test>")

	// Python's smtplib: a wrong password is refused; the same message with
	// the same Idempotency-Key gets the same id.
	pyOut := runPythonSubmit(t, implicit, ca, c.key, "From: onboarding@posthaste.test\r\n"+
		"To: delivered@posthaste.test\r\nSubject: smtplib\r\nIdempotency-Key: py-1\r\n\r\nHello\r\n")
	require.Contains(t, pyOut, "auth refused 535")
	pyIDs := queuedAs.FindAllStringSubmatch(pyOut, -1)
	require.Len(t, pyIDs, 2, pyOut)
	require.Equal(t, pyIDs[0][1], pyIDs[1][1], "one email for one idempotency key")
	c.waitFor(pyIDs[0][1], map[string]string{"delivered@posthaste.test": "delivered"})

	// No relaying without AUTH.
	out, ids = swaks(t, "--server", starttls, "--tls", "--from", "someone@gmail.com", "--to", "victim@example.org")
	require.Empty(t, ids)
	require.Contains(t, out, "530 5.7.0 Authentication required")
}

// smtpCA is the dev process's self-signed SMTP certificate, for clients
// that verify it.
func smtpCA(t *testing.T, dataDir string) string {
	t.Helper()
	path := filepath.Join(dataDir, "tls", "smtp.crt")
	_, err := os.Stat(path)
	require.NoError(t, err, "dev made a self-signed certificate on first run")
	return path
}

// pythonSubmit sends msg twice with smtplib over implicit TLS, verifying
// the certificate, and prints each DATA reply; a wrong password is
// refused with 535.
const pythonSubmit = `
import smtplib, ssl, sys, time
port, ca, key, msg = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.stdin.read()
host = "localhost"  # the name the certificate is for; the gateway listens on 127.0.0.1
ctx = ssl.create_default_context(cafile=ca)
try:
    with smtplib.SMTP_SSL(host, port, context=ctx) as s:
        s.login("posthaste", "re_wrong_wrong_wrong_wrong_wrong_wrong_wrong")
    print("wrong password accepted")
except smtplib.SMTPAuthenticationError as e:
    print("auth refused", e.smtp_code)
with smtplib.SMTP_SSL(host, port, context=ctx) as s:
    s.login("posthaste", key)
    for _ in range(2):
        # smtplib returns refused MAIL and RCPT replies instead of raising:
        # check them, or a refusal surfaces later as "503 Missing RCPT TO".
        # A 451 for the team's rate limit is retried a second later, as a
        # mail program would (the test's API polling shares the limit).
        for attempt in range(10):
            code, reply = s.mail("onboarding@posthaste.test")
            if code != 451 or attempt == 9:
                break
            s.rset()
            time.sleep(1)
        if code != 250:
            sys.exit("MAIL FROM refused: %d %s" % (code, reply.decode()))
        code, reply = s.rcpt("delivered@posthaste.test")
        if code not in (250, 251):
            sys.exit("RCPT TO refused: %d %s" % (code, reply.decode()))
        code, reply = s.data(msg.encode())
        print(code, reply.decode())
`

func runPythonSubmit(t *testing.T, addr, ca, key, msg string) string {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("/usr/bin/python3", "-c", pythonSubmit, port, ca, key)
	cmd.Stdin = strings.NewReader(msg)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// smtpDomainMessage is a multipart message with an attachment, a Bcc and
// tags, as a mail program submits it.
const smtpDomainMessage = "From: Shop <hello@example.test>\r\nTo: ok3@rcpt.test\r\nBcc: hidden@rcpt.test\r\n" +
	"Subject: Invoice 1042\r\nX-Posthaste-Tags: kind=invoice\r\nMIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"=_b1\"\r\n\r\n" +
	"--=_b1\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nYour invoice is attached.\r\n" +
	"--=_b1\r\nContent-Type: application/pdf; name=\"invoice.pdf\"\r\nContent-Disposition: attachment; filename=\"invoice.pdf\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK\r\n--=_b1--\r\n"

// checkSMTPDomainMail submits a message from a verified domain over SMTP
// and checks that every envelope recipient gets it, in a transaction of
// its own, DKIM-signed, SPF- and DMARC-aligned, byte for byte as
// submitted below the header, without Bcc.
func checkSMTPDomainMail(t *testing.T, c apiClient, env map[string]string, mx *smtptest.Server, dns *dnstest.Server) {
	t.Helper()
	starttls, _ := smtpPorts(t, env)
	before := len(mx.Messages())
	data := filepath.Join(t.TempDir(), "invoice.eml")
	require.NoError(t, os.WriteFile(data, []byte(smtpDomainMessage), 0o600))
	out, ids := swaks(t, "--server", starttls, "--tls", "--auth", "PLAIN", "--auth-user", "posthaste",
		"--auth-password", c.key, "--from", "billing@example.test", "--to", "ok3@rcpt.test,hidden@rcpt.test", "--data", data)
	require.Len(t, ids, 1, out)
	e := c.waitFor(ids[0], map[string]string{"ok3@rcpt.test": "delivered", "hidden@rcpt.test": "delivered"})
	require.Equal(t, "Invoice 1042", e["subject"])
	require.Equal(t, []any{"hidden@rcpt.test"}, e["bcc"])
	// One transaction per recipient, each from its own return path.
	msgs := mx.WaitMessages(t, before+2, 10*time.Second)
	var to []string
	for _, m := range msgs[len(msgs)-2:] {
		require.Len(t, m.To, 1)
		to = append(to, m.To[0])
		got := string(m.Data)
		require.NotContains(t, got, "Bcc")
		require.NotContains(t, got, "X-Posthaste-Tags")
		body := smtpDomainMessage[strings.Index(smtpDomainMessage, "\r\n\r\n"):]
		require.Contains(t, got, body, "the body as submitted")
		requireAuthenticated(t, dns, m, "example.test")
	}
	require.ElementsMatch(t, []string{"ok3@rcpt.test", "hidden@rcpt.test"}, to)
	require.NotEqual(t, msgs[len(msgs)-1].From, msgs[len(msgs)-2].From)
}

// checkSMTPProcess runs `posthaste smtp` as its own process beside the
// api and worker of base: it refuses to start without a certificate,
// then answers /readyz once its listeners accept, and a message submitted
// to it is delivered by the worker.
func checkSMTPProcess(t *testing.T, base map[string]string, c apiClient) {
	t.Helper()
	env := map[string]string{}
	for k, v := range base {
		env[k] = v
	}
	opsPort := freePort(t)
	env["POSTHASTE_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", opsPort)
	smtpListen(t, env)
	out, code := runProcess(t, env, "smtp")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "POSTHASTE_TLS_CERT_FILE")

	dir := t.TempDir()
	env["POSTHASTE_TLS_CERT_FILE"], env["POSTHASTE_TLS_KEY_FILE"] = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_, err := smtpgw.EnsureSelfSigned(env["POSTHASTE_TLS_CERT_FILE"], env["POSTHASTE_TLS_KEY_FILE"], []string{"localhost"})
	require.NoError(t, err)
	startProcess(t, env, "smtp", `"msg":"ready"`)
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", opsPort))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)

	_, implicit := smtpPorts(t, env)
	out, ids := swaks(t, "--server", implicit, "--tls-on-connect", "--auth", "PLAIN", "--auth-user", "posthaste",
		"--auth-password", c.key, "--from", "onboarding@posthaste.test", "--to", "delivered@posthaste.test",
		"--header", "Subject: split smtp")
	require.Len(t, ids, 1, out)
	e := c.waitFor(ids[0], map[string]string{"delivered@posthaste.test": "delivered"})
	require.Equal(t, "split smtp", e["subject"])

	res, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", opsPort))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `posthaste_smtp_transactions_total{result="accepted"} 1`)
	require.Contains(t, string(body), `posthaste_emails_accepted_total{source="smtp"} 1`)
}
