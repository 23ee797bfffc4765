package smtpgw_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/auththrottle"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/smtpgw"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// harness is a gateway on loopback in front of the real submit service and
// store: everything an SMTP submission touches except the workflow that
// later delivers it.
type harness struct {
	t        *testing.T
	st       *store.Store
	gw       *smtpgw.Gateway
	starttls string // address of the STARTTLS listener
	implicit string // address of the implicit TLS listener
	roots    *x509.CertPool
	key      string
	team     uuid.UUID
	member   string // the team owner's address
	logs     *reqlog.Writer
	sleeps   *sleepRecorder
}

type options struct {
	maxConns int
	// readTimeout, sessionTimeout and maxIdleCommands are the gateway's
	// (its defaults when 0).
	readTimeout, sessionTimeout time.Duration
	maxIdleCommands             int
	limiter                     smtpgw.Limiter
	submit                      func(smtpgw.Submitter) smtpgw.Submitter
}

type sleepRecorder struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleepRecorder) sleep(_ context.Context, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
}

func (s *sleepRecorder) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	made, err := smtpgw.EnsureSelfSigned(certFile, keyFile, []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	require.True(t, made)
	certs, err := smtpgw.NewCertReloader(certFile, keyFile, nil)
	require.NoError(t, err)
	pemBytes, err := os.ReadFile(certFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pemBytes))

	creds, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "A", "owner@example.com")
	require.NoError(t, err)
	team := uuid.MustParse(creds.TeamID)
	require.NoError(t, st.Domains.CreateDomain(ctx, store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Name: "example.test", Region: "us-east-1", Status: store.DomainVerified, ReturnPath: "send",
		TLS: store.TLSOpportunistic, DKIMSelector: "posthaste", DKIMPublicKey: "x", DKIMPrivateKey: []byte("x")}))

	logs := reqlog.New(reqlog.Config{Interval: 20 * time.Millisecond}, st.Insights)
	t.Cleanup(func() { _ = logs.Close(context.Background()) })
	var sub smtpgw.Submitter = submit.New(submit.Config{Store: submit.StoreOf(st)})
	if o.submit != nil {
		sub = o.submit(sub)
	}
	limiter := o.limiter
	if limiter == nil {
		limiter = ratelimit.NewLocal(ratelimit.LocalConfig{})
	}
	rec := &sleepRecorder{}
	gw, err := smtpgw.New(smtpgw.Config{
		Listeners:       []smtpgw.Listener{{Addr: "127.0.0.1:0"}, {Addr: "127.0.0.1:0", ImplicitTLS: true}},
		TLS:             certs.TLSConfig(),
		Hostname:        "smtp.posthaste.test",
		Auth:            auth.NewAuthenticator(st.Accounts, 0),
		Submit:          sub,
		Limiter:         limiter,
		DefaultRate:     10_000,
		RequestLog:      logs,
		Metrics:         telemetry.NewMetrics(prometheus.NewRegistry()),
		MaxConnsPerIP:   o.maxConns,
		ReadTimeout:     o.readTimeout,
		SessionTimeout:  o.sessionTimeout,
		MaxIdleCommands: o.maxIdleCommands,
		Throttle:        auththrottle.NewDelays(auththrottle.DelaysConfig{Sleep: rec.sleep}),
	})
	require.NoError(t, err)
	require.Error(t, gw.Ready(ctx), "not ready before Start")
	require.NoError(t, gw.Start())
	require.NoError(t, gw.Ready(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(sctx)
	})
	addrs := gw.Addrs()
	return &harness{t: t, st: st, gw: gw, starttls: addrs[0].String(), implicit: addrs[1].String(), roots: roots,
		key: creds.APIKey, team: team, member: "owner@example.com", logs: logs, sleeps: rec}
}

// dialog is a raw SMTP client that checks every reply.
type dialog struct {
	t    *testing.T
	conn net.Conn
	tp   *textproto.Conn
}

func (h *harness) dial(addr string) *dialog {
	h.t.Helper()
	return h.dialFrom(addr, nil)
}

func (h *harness) dialFrom(addr string, local net.Addr) *dialog {
	h.t.Helper()
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	var c net.Conn
	var err error
	if addr == h.implicit {
		c, err = tls.DialWithDialer(&d, "tcp", addr, &tls.Config{RootCAs: h.roots, ServerName: "localhost"})
	} else {
		c, err = d.Dial("tcp", addr)
	}
	require.NoError(h.t, err)
	h.t.Cleanup(func() { c.Close() })
	dl := &dialog{t: h.t, conn: c, tp: textproto.NewConn(c)}
	dl.expect(220)
	return dl
}

// expect reads one reply and checks its code; it returns the text.
func (d *dialog) expect(code int) string {
	d.t.Helper()
	_ = d.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, msg, err := d.tp.ReadResponse(0)
	require.NoError(d.t, err)
	require.Equal(d.t, code, got, "reply: %d %s", got, msg)
	return msg
}

func (d *dialog) cmd(code int, format string, args ...any) string {
	d.t.Helper()
	require.NoError(d.t, d.tp.PrintfLine(format, args...))
	return d.expect(code)
}

func (d *dialog) startTLS(h *harness) {
	d.t.Helper()
	d.cmd(220, "STARTTLS")
	tc := tls.Client(d.conn, &tls.Config{RootCAs: h.roots, ServerName: "localhost"})
	require.NoError(d.t, tc.Handshake())
	d.conn, d.tp = tc, textproto.NewConn(tc)
}

func plain(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
}

// login opens an authenticated session on addr.
func (h *harness) login(addr string) *dialog {
	h.t.Helper()
	d := h.dial(addr)
	d.cmd(250, "EHLO client.test")
	if addr == h.starttls {
		d.startTLS(h)
		d.cmd(250, "EHLO client.test")
	}
	d.cmd(235, "AUTH PLAIN %s", plain("posthaste", h.key))
	return d
}

// data sends a message body after a 354 and returns the final reply.
func (d *dialog) data(code int, msg string) string {
	d.t.Helper()
	d.cmd(354, "DATA")
	w := d.tp.DotWriter()
	_, err := w.Write([]byte(msg))
	require.NoError(d.t, err)
	require.NoError(d.t, w.Close())
	return d.expect(code)
}

var queuedAs = regexp.MustCompile(`^2\.0\.0 Ok: queued as ([0-9a-f-]{36})$`)

func emailID(t *testing.T, reply string) uuid.UUID {
	t.Helper()
	m := queuedAs.FindStringSubmatch(reply)
	require.NotNil(t, m, "reply %q", reply)
	return uuid.MustParse(m[1])
}

const sandboxMsg = "From: Posthaste <onboarding@posthaste.test>\r\nTo: delivered@posthaste.test\r\n" +
	"Bcc: owner@example.com\r\nSubject: Hello over SMTP\r\nX-Custom: yes\r\n\r\nHi there.\r\n"

func TestSubmitOverBothListeners(t *testing.T) {
	h := newHarness(t, options{})
	ctx := context.Background()
	for _, addr := range []string{h.starttls, h.implicit} {
		d := h.login(addr)
		d.cmd(250, "MAIL FROM:<onboarding@posthaste.test>")
		d.cmd(250, "RCPT TO:<delivered@posthaste.test>")
		d.cmd(250, "RCPT TO:<owner@example.com>")
		id := emailID(t, d.data(250, sandboxMsg))
		d.cmd(221, "QUIT")

		e, err := h.st.Emails.GetEmail(ctx, h.team, id)
		require.NoError(t, err)
		require.Equal(t, "Posthaste <onboarding@posthaste.test>", e.From)
		require.Equal(t, []string{"delivered@posthaste.test"}, e.To)
		require.Equal(t, []string{"owner@example.com"}, e.Bcc)
		require.Equal(t, "Hello over SMTP", e.Subject)
		require.Equal(t, store.EventQueued, e.LastEvent)
		require.Len(t, e.Recipients, 2)
		require.Equal(t, "bcc", e.Recipients[1].Kind)
		require.NotNil(t, e.Text)
		require.Equal(t, "Hi there.\r\n", *e.Text)

		built, err := storetest.EmailForBuild(ctx, h.st, id)
		require.NoError(t, err)
		src := string(built.Source)
		require.NotContains(t, src, "Bcc", "Bcc is removed")
		require.Contains(t, src, "X-Custom: yes\r\n", "custom headers are kept")
		require.Contains(t, src, "Message-ID: <"+id.String()+"@posthaste.test>\r\n")
		require.Contains(t, src, "\r\nDate: ")
		require.True(t, strings.HasSuffix(src, "\r\n\r\nHi there.\r\n"))
		require.Equal(t, id.String()+"@posthaste.test", built.MessageID)
	}
}

func TestNetSMTPClient(t *testing.T) {
	h := newHarness(t, options{})
	c, err := smtp.Dial(h.starttls)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("client.test"))
	require.NoError(t, c.StartTLS(&tls.Config{RootCAs: h.roots, ServerName: "localhost"}))
	for _, ext := range []string{"PIPELINING", "8BITMIME", "SMTPUTF8", "ENHANCEDSTATUSCODES"} {
		ok, _ := c.Extension(ext)
		require.True(t, ok, ext)
	}
	ok, size := c.Extension("SIZE")
	require.True(t, ok)
	require.Equal(t, "41943040", size)
	ok, mechs := c.Extension("AUTH")
	require.True(t, ok)
	require.ElementsMatch(t, []string{"PLAIN", "LOGIN"}, strings.Fields(mechs))
	require.NoError(t, c.Auth(smtp.PlainAuth("", "posthaste", h.key, "127.0.0.1")))
	require.NoError(t, c.Mail("onboarding@posthaste.test"))
	require.NoError(t, c.Rcpt("delivered@posthaste.test"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte(sandboxMsg))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())
	emails, _, err := h.st.Emails.ListEmails(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, emails, 1)
	require.Equal(t, "Hello over SMTP", emails[0].Subject)
}

func TestLoginMechanism(t *testing.T) {
	h := newHarness(t, options{})
	d := h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	require.Equal(t, "VXNlcm5hbWU6", d.cmd(334, "AUTH LOGIN"))
	require.Equal(t, "UGFzc3dvcmQ6", d.cmd(334, "%s", base64.StdEncoding.EncodeToString([]byte("posthaste"))))
	d.cmd(235, "%s", base64.StdEncoding.EncodeToString([]byte(h.key)))

	// The initial response form, with a wrong key.
	d = h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	d.cmd(334, "AUTH LOGIN %s", base64.StdEncoding.EncodeToString([]byte("posthaste")))
	msg := d.cmd(535, "%s", base64.StdEncoding.EncodeToString([]byte("re_wrong")))
	require.Equal(t, "5.7.8 Authentication credentials invalid", msg)
}

func TestNothingWithoutAuthentication(t *testing.T) {
	h := newHarness(t, options{})
	d := h.dial(h.starttls)
	ehlo := d.cmd(250, "EHLO client.test")
	require.Contains(t, ehlo, "STARTTLS")
	require.NotContains(t, ehlo, "AUTH", "no AUTH before TLS")
	d.cmd(523, "AUTH PLAIN %s", plain("posthaste", h.key))
	// An open relay attempt, in clear text and then over TLS.
	require.Equal(t, "5.7.0 Authentication required", d.cmd(530, "MAIL FROM:<someone@gmail.com>"))
	d.cmd(502, "RCPT TO:<victim@example.org>")
	d.cmd(502, "DATA")
	d.startTLS(h)
	d.cmd(250, "EHLO client.test")
	require.Equal(t, "5.7.0 Authentication required", d.cmd(530, "MAIL FROM:<someone@gmail.com>"))
	require.Equal(t, "5.7.0 Authentication required", d.cmd(530, "MAIL FROM:<onboarding@posthaste.test>"))

	emails, _, err := h.st.Emails.ListEmails(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, emails)
}

func TestWrongCredentialsAndRevokedKey(t *testing.T) {
	h := newHarness(t, options{})
	d := h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	d.cmd(535, "AUTH PLAIN %s", plain("posthaste", "re_"+strings.Repeat("x", 40)))
	d.cmd(535, "AUTH PLAIN %s", plain("someone", h.key))

	// A key revoked after AUTH stops working at the next transaction.
	d = h.login(h.implicit)
	keys, _, err := h.st.Accounts.ListAPIKeys(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, keys, 1)
	_, err = h.st.Accounts.RevokeAPIKey(context.Background(), h.team, keys[0].ID)
	require.NoError(t, err)
	d.cmd(535, "MAIL FROM:<onboarding@posthaste.test>")
	d.cmd(530, "MAIL FROM:<onboarding@posthaste.test>")
	d = h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	d.cmd(535, "AUTH PLAIN %s", plain("posthaste", h.key))
}

func TestFailedAuthIsSlowedDownPerAddress(t *testing.T) {
	h := newHarness(t, options{})
	d := h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	for range 6 {
		d.cmd(535, "AUTH PLAIN %s", plain("posthaste", "re_"+strings.Repeat("y", 40)))
	}
	// Two failures are free, then each attempt waits twice as long.
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, h.sleeps.all())

	// Another client address is not slowed down; a success there does not
	// clear the first address's record.
	other := h.dialFrom(h.implicit, &net.TCPAddr{IP: net.ParseIP("127.0.0.2")})
	other.cmd(250, "EHLO other.test")
	other.cmd(235, "AUTH PLAIN %s", plain("posthaste", h.key))
	require.Len(t, h.sleeps.all(), 3)
	d = h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	d.cmd(235, "AUTH PLAIN %s", plain("posthaste", h.key))
	require.Equal(t, 8*time.Second, h.sleeps.all()[3], "even a right key waits after failures")
}

const domainMsg = "From: Acme <news@example.test>\r\nTo: a@dest.test\r\nSubject: Domain mail\r\n\r\nBody\r\n"

func TestSenderRules(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	msg := d.cmd(550, "MAIL FROM:<news@unverified.test>")
	require.Equal(t, "5.7.1 The unverified.test domain is not verified. Add and verify your domain, or send from onboarding@posthaste.test to test.", msg)
	d.cmd(550, "MAIL FROM:<>")
	d.cmd(550, "MAIL FROM:<other@posthaste.test>")

	// The envelope passes but the From header does not.
	d.cmd(250, "MAIL FROM:<bounces@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	msg = d.data(550, strings.Replace(domainMsg, "news@example.test", "news@evil.test", 1))
	require.Contains(t, msg, "5.7.1 The evil.test domain is not verified")

	// The sandbox writes to members and sandbox addresses only.
	d.cmd(250, "MAIL FROM:<onboarding@posthaste.test>")
	d.cmd(250, "RCPT TO:<stranger@dest.test>")
	msg = d.data(550, strings.Replace(sandboxMsg, "Bcc: owner@example.com\r\n", "", 1))
	require.Contains(t, msg, "5.7.1 You can only send testing emails")

	d.cmd(250, "MAIL FROM:<bounces@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	emailID(t, d.data(250, domainMsg))
	d.cmd(250, "MAIL FROM:<bounces@example.test>")
	d.cmd(501, "RCPT TO:<not an address>")
}

func TestRecipientLimitAndQuota(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.starttls)
	d.cmd(250, "MAIL FROM:<news@example.test>")
	for i := range 50 {
		d.cmd(250, "RCPT TO:<r%d@dest.test>", i)
	}
	require.Contains(t, d.cmd(452, "RCPT TO:<r50@dest.test>"), "4.5.3")
	id := emailID(t, d.data(250, domainMsg))
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, id)
	require.NoError(t, err)
	require.Len(t, e.Recipients, 50)
	used, err := h.st.Accounts.QuotaUsed(context.Background(), h.team, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 50, used, "every recipient counts against the quota")
}

func TestMessageSize(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	require.Contains(t, d.cmd(552, "MAIL FROM:<news@example.test> SIZE=%d", smtpgw.MaxMessageBytes+1), "5.3.4")

	// 41 MB announced as nothing: refused once it passes the limit.
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	d.cmd(354, "DATA")
	w := bufio.NewWriterSize(d.conn, 1<<16)
	_, err := w.WriteString(strings.Replace(domainMsg, "Body\r\n", "", 1))
	require.NoError(t, err)
	line := strings.Repeat("x", 998) + "\r\n"
	for written := 0; written < 41<<20; written += len(line) {
		_, err := w.WriteString(line)
		require.NoError(t, err)
	}
	_, err = w.WriteString(".\r\n")
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	require.Contains(t, d.expect(552), "5.3.4")
	// The session goes on.
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	emailID(t, d.data(250, domainMsg))
	emails, _, err := h.st.Emails.ListEmails(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, emails, 1)
}

func TestPipelinedSubmission(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	// Everything up to DATA in one write (RFC 2920), then the body.
	_, err := fmt.Fprintf(d.conn, "MAIL FROM:<news@example.test>\r\nRCPT TO:<a@dest.test>\r\n"+
		"RCPT TO:<bad address>\r\nRCPT TO:<b@dest.test>\r\nDATA\r\n")
	require.NoError(t, err)
	d.expect(250)
	d.expect(250)
	d.expect(501)
	d.expect(250)
	d.expect(354)
	_, err = fmt.Fprintf(d.conn, "%s.\r\nMAIL FROM:<news@example.test>\r\nRCPT TO:<c@dest.test>\r\nDATA\r\n",
		strings.ReplaceAll(domainMsg, "\r\n", "\r\n"))
	require.NoError(t, err)
	first := emailID(t, d.expect(250))
	d.expect(250)
	d.expect(250)
	d.expect(354)
	second := emailID(t, d.data2(domainMsg))
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, first)
	require.NoError(t, err)
	require.Equal(t, []string{"a@dest.test", "b@dest.test"}, []string{e.Recipients[0].Address, e.Recipients[1].Address})
	e, err = h.st.Emails.GetEmail(context.Background(), h.team, second)
	require.NoError(t, err)
	require.Len(t, e.Recipients, 1)
}

// data2 sends a body after a 354 already read.
func (d *dialog) data2(msg string) string {
	d.t.Helper()
	w := d.tp.DotWriter()
	_, err := w.Write([]byte(msg))
	require.NoError(d.t, err)
	require.NoError(d.t, w.Close())
	return d.expect(250)
}

func TestUTF8AddressesAnd8BitBodies(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	d.cmd(250, "MAIL FROM:<news@example.test> SMTPUTF8 BODY=8BITMIME")
	d.cmd(250, "RCPT TO:<josé@dest.test>")
	msg := "From: Acme <news@example.test>\r\nTo: José <josé@dest.test>\r\nSubject: Ça va ?\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nÉté à Paris.\r\n"
	id := emailID(t, d.data(250, msg))
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, id)
	require.NoError(t, err)
	require.Equal(t, "josé@dest.test", e.Recipients[0].Address)
	require.Equal(t, "Ça va ?", e.Subject)
	require.Equal(t, "Été à Paris.\r\n", *e.Text)
}

func TestIdempotencyKeyHeader(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	msg := "Idempotency-Key: welcome-42\r\n" + domainMsg
	send := func(code int, body string) string {
		d.cmd(250, "MAIL FROM:<news@example.test>")
		d.cmd(250, "RCPT TO:<a@dest.test>")
		return d.data(code, body)
	}
	first := emailID(t, send(250, msg))
	require.Equal(t, first, emailID(t, send(250, msg)), "the same message and key: the first id")
	require.Contains(t, send(550, msg+"changed\r\n"), "5.7.0 This `Idempotency-Key` was already used")
	require.Contains(t, send(554, "Idempotency-Key: \r\n"+domainMsg), "5.6.0 The `Idempotency-Key` header must be")
	emails, _, err := h.st.Emails.ListEmails(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, emails, 1)
	used, err := h.st.Accounts.QuotaUsed(context.Background(), h.team, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 1, used)
	built, err := storetest.EmailForBuild(context.Background(), h.st, first)
	require.NoError(t, err)
	require.NotContains(t, string(built.Source), "Idempotency-Key")
}

func TestTagsHeader(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	id := emailID(t, d.data(250, "X-Posthaste-Tags: category=welcome, plan=pro_1\r\n"+domainMsg))
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, id)
	require.NoError(t, err)
	require.Equal(t, []store.Tag{{Name: "category", Value: "welcome"}, {Name: "plan", Value: "pro_1"}}, e.Tags)

	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	require.Contains(t, d.data(554, "X-Posthaste-Tags: bad tag=x y\r\n"+domainMsg), "5.6.0 Invalid X-Posthaste-Tags field")
}

func TestMalformedMessages(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	for _, msg := range []string{
		"To: a@dest.test\r\nSubject: no From\r\n\r\nBody\r\n",
		"this is not a header\r\n\r\nBody\r\n",
		"From: a@example.test, b@example.test\r\n\r\nBody\r\n",
		// Refused now, not accepted and then never signed.
		"From: news@example.test\r\nX-Note: a\x01b\r\n\r\nBody\r\n",
	} {
		d.cmd(250, "MAIL FROM:<news@example.test>")
		d.cmd(250, "RCPT TO:<a@dest.test>")
		require.Contains(t, d.data(554, msg), "5.6.0")
	}
	// Broken MIME in a valid message is accepted as bytes.
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	broken := "From: news@example.test\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"zz\"\r\n\r\n" +
		"--zz\r\nContent-Transfer-Encoding: base64\r\n\r\n%%% not base64\r\n"
	id := emailID(t, d.data(250, broken))
	built, err := storetest.EmailForBuild(context.Background(), h.st, id)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(built.Source), "--zz\r\nContent-Transfer-Encoding: base64\r\n\r\n%%% not base64\r\n"))
}

// failingSubmit fails acceptances with an internal error.
type failingSubmit struct{ smtpgw.Submitter }

func (failingSubmit) SendMessage(context.Context, submit.Sender, submit.Message) (submit.SendResult, error) {
	return submit.SendResult{}, errors.New(`pq: connection to 10.1.2.3 refused: password for "app" wrong`)
}

func TestInternalErrorsStayInside(t *testing.T) {
	h := newHarness(t, options{submit: func(s smtpgw.Submitter) smtpgw.Submitter { return failingSubmit{s} }})
	d := h.login(h.implicit)
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	require.Equal(t, "4.3.0 Internal error, try again later", d.data(451, domainMsg))
}

// denyAfter allows n requests, then refuses, recording the keys.
type denyAfter struct {
	mu   sync.Mutex
	n    int
	keys []string
}

func (l *denyAfter) Allow(_ context.Context, key string, limit int) (ratelimit.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	l.n--
	return ratelimit.Result{Allowed: l.n >= 0, Limit: limit, RetryAfter: time.Second}, nil
}

func TestRateLimitAndRequestLog(t *testing.T) {
	lim := &denyAfter{n: 1}
	h := newHarness(t, options{limiter: lim})
	d := h.login(h.implicit)
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	id := emailID(t, d.data(250, domainMsg))
	require.Equal(t, "4.7.0 Rate limit exceeded: 10000 requests per second. Try again in 1 s",
		d.cmd(451, "MAIL FROM:<news@example.test>"))
	require.Equal(t, []string{"team:" + h.team.String(), "team:" + h.team.String()}, lim.keys,
		"the API's bucket of the team")

	require.NoError(t, h.logs.Close(context.Background()))
	logs, _, err := h.st.Insights.ListRequestLogs(context.Background(), h.team, store.LogFilter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, logs, 2)
	require.Equal(t, "SMTP", logs[0].Method)
	require.Equal(t, "MAIL FROM", logs[0].Path)
	require.Equal(t, 451, logs[0].Status)
	require.Equal(t, "DATA", logs[1].Path)
	require.Equal(t, 250, logs[1].Status)
	full, err := h.st.Insights.GetRequestLog(context.Background(), h.team, logs[1].ID)
	require.NoError(t, err)
	require.Contains(t, *full.RequestBody, `"subject":"Domain mail"`)
	require.Contains(t, *full.ResponseBody, id.String())
	require.NotContains(t, *full.RequestBody, h.key)
}

func TestConnectionCapPerAddress(t *testing.T) {
	h := newHarness(t, options{maxConns: 2})
	a, b := h.dial(h.starttls), h.dial(h.starttls)
	c, err := net.Dial("tcp", h.starttls)
	require.NoError(t, err)
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "421 4.7.0 Too many connections from your address, try again later\r\n", line)
	// Another address still gets in, and a closed slot is free again.
	h.dialFrom(h.starttls, &net.TCPAddr{IP: net.ParseIP("127.0.0.3")})
	a.cmd(221, "QUIT")
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", h.starttls)
		if err != nil {
			return false
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.HasPrefix(line, "220 ")
	}, 5*time.Second, 20*time.Millisecond)
	b.cmd(250, "NOOP")
}

func TestGracefulShutdownFinishesTransactions(t *testing.T) {
	h := newHarness(t, options{})
	idle := h.login(h.implicit)
	busy := h.login(h.implicit)
	busy.cmd(250, "MAIL FROM:<news@example.test>")
	busy.cmd(250, "RCPT TO:<a@dest.test>")
	busy.cmd(354, "DATA")
	_, err := busy.conn.Write([]byte("From: Acme <news@example.test>\r\nTo: a@dest.test\r\n"))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- h.gw.Shutdown(ctx)
	}()
	// The idle connection is closed, new ones are refused, and the server
	// is no longer ready; the transaction in progress is not cut.
	_ = idle.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = idle.conn.Read(make([]byte, 1))
	require.Error(t, err)
	require.Eventually(t, func() bool { return h.gw.Ready(context.Background()) != nil }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", h.implicit, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}, 5*time.Second, 20*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("shutdown returned before the transaction ended: %v", err)
	default:
	}
	_, err = busy.conn.Write([]byte("Subject: finishing\r\n\r\nBody\r\n.\r\n"))
	require.NoError(t, err)
	id := emailID(t, busy.expect(250))
	require.NoError(t, <-done)
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, id)
	require.NoError(t, err)
	require.Equal(t, "finishing", e.Subject)
}
