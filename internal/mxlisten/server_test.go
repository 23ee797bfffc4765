package mxlisten

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/selfsigned"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// fakeRouter routes the addresses it was given; everything else is not
// ours. Addresses in fail make Route fail temporarily.
type fakeRouter struct {
	mu     sync.Mutex
	routes map[string]inmail.Route
	fail   map[string]bool
	asked  []string
}

func (f *fakeRouter) Route(_ context.Context, rcpt string) (inmail.Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, rcpt)
	if f.fail[rcpt] {
		return inmail.Route{}, errors.New("database is down: password=hunter2")
	}
	if r, ok := f.routes[rcpt]; ok {
		return r, nil
	}
	return inmail.Route{}, fmt.Errorf("routing %s: %w", rcpt, inmail.ErrNotOurs)
}

// fakeAcceptor keeps what it accepts (without the bytes of messages over
// 1 MiB, of which it keeps the size and digest). failNext makes the next
// calls fail; block, when set, holds Accept until it is closed.
type fakeAcceptor struct {
	mu       sync.Mutex
	msgs     []inmail.Message
	sums     [][32]byte // of what follows the Received header
	failNext int
	block    chan struct{}
	entered  chan struct{}
}

func (f *fakeAcceptor) Accept(_ context.Context, m inmail.Message) error {
	f.mu.Lock()
	block, entered := f.block, f.entered
	f.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return errors.New("inserting: connection refused (secret=s3cr3t)")
	}
	// A large message is in Spool, readable only during Accept: it is
	// hashed as it is read, not kept.
	br := bufio.NewReaderSize(m.Reader(), 64<<10)
	head, err := br.Peek(64 << 10)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	start := bytes.Index(head, []byte("From: "))
	if start < 0 || !bytes.HasPrefix(head, []byte("Received: ")) {
		start = 0
	}
	if _, err := br.Discard(start); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, br)
	if err != nil {
		return err
	}
	if int64(start)+n != m.Len() {
		return fmt.Errorf("read %d bytes of a message of %d", int64(start)+n, m.Len())
	}
	f.sums = append(f.sums, [32]byte(h.Sum(nil)))
	m.Spool = nil
	f.msgs = append(f.msgs, m)
	return nil
}

func (f *fakeAcceptor) accepted() []inmail.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]inmail.Message(nil), f.msgs...)
}

var (
	teamID   = uuid.MustParse("0193e5a0-0000-7000-8000-0000000000aa")
	domainID = uuid.MustParse("0193e5a0-0000-7000-8000-0000000000bb")
	emailID  = uuid.MustParse("0193e5a0-0000-7000-8000-0000000000cc")
)

const (
	returnPath = "bounces+0193e5a0-0000-7000-8000-0000000000cc@send.ours.example"
	receiving  = "support@ours.example"
)

type harness struct {
	t       *testing.T
	srv     *Server
	addr    string
	router  *fakeRouter
	acc     *fakeAcceptor
	dns     *dnstest.Server
	roots   *x509.CertPool
	certPEM []byte
	tempDir string
	metrics *Metrics
	served  chan error
}

type options struct {
	maxConns, maxConnsPerIP, maxRcpts int
	maxBytes                          int64
	noTLS                             bool
	limits                            Limits
	budget                            inmail.Budget
	// tune, when set, changes the Config before New.
	tune func(*Config)
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	dns := dnstest.NewServer(t)
	cert, err := selfsigned.New(selfsigned.Options{Hosts: []string{"localhost", "127.0.0.1"}, Validity: time.Hour})
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	certPEM, _, err := selfsigned.PEM(cert)
	require.NoError(t, err)
	router := &fakeRouter{routes: map[string]inmail.Route{
		returnPath: {Kind: inmail.RouteReturnPath, TeamID: teamID, DomainID: domainID, EmailID: emailID},
		receiving:  {Kind: inmail.RouteReceiving, TeamID: teamID, DomainID: domainID},
	}, fail: map[string]bool{"flaky@ours.example": true}}
	acc := &fakeAcceptor{}
	metrics := NewMetrics(prometheus.NewRegistry())
	cfg := Config{Hostname: "mx.posthaste.test", MaxConns: o.maxConns, MaxConnsPerIP: o.maxConnsPerIP,
		MaxRecipients: o.maxRcpts, MaxMessageBytes: o.maxBytes, Resolver: dns.Resolver(), Metrics: metrics,
		TempDir: filepath.Join(t.TempDir(), "spool"), Limits: o.limits, Budget: o.budget}
	require.NoError(t, os.Mkdir(cfg.TempDir, 0o700))
	if o.tune != nil {
		o.tune(&cfg)
	}
	if !o.noTLS {
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	srv, err := New(cfg, router, acc)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &harness{t: t, srv: srv, addr: ln.Addr().String(), router: router, acc: acc, dns: dns, roots: roots,
		certPEM: certPEM, tempDir: cfg.TempDir, metrics: metrics, served: make(chan error, 1)}
	go func() { h.served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return h
}

// dialog is a raw SMTP client that checks every reply.
type dialog struct {
	t    *testing.T
	conn net.Conn
	tp   *textproto.Conn
}

func (h *harness) dial() *dialog {
	h.t.Helper()
	return h.dialFrom(nil, 220)
}

// dialFrom connects from a local address (nil: any) and expects the
// greeting code (220, or 421 over a cap).
func (h *harness) dialFrom(local net.Addr, greeting int) *dialog {
	h.t.Helper()
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", h.addr)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { c.Close() })
	dl := &dialog{t: h.t, conn: c, tp: textproto.NewConn(c)}
	dl.expect(greeting)
	return dl
}

func (d *dialog) expect(code int) string {
	d.t.Helper()
	_ = d.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
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

func (d *dialog) startTLS(roots *x509.CertPool) {
	d.t.Helper()
	d.cmd(220, "STARTTLS")
	tc := tls.Client(d.conn, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	require.NoError(d.t, tc.Handshake())
	d.conn, d.tp = tc, textproto.NewConn(tc)
}

// data sends DATA and the message, and returns the final reply's text.
func (d *dialog) data(code int, msg []byte) string {
	d.t.Helper()
	d.cmd(354, "DATA")
	w := d.tp.DotWriter()
	_, err := w.Write(msg)
	require.NoError(d.t, err)
	require.NoError(d.t, w.Close())
	return d.expect(code)
}

var queuedAs = regexp.MustCompile(`^2\.0\.0 Ok: queued as ([0-9a-f-]{36})$`)

func TestAcceptsAMessageEndToEnd(t *testing.T) {
	h := newHarness(t, options{})
	_, record := signer(t)
	h.dns.AddTXT("sender.example", "v=spf1 ip4:127.0.0.1 -all")
	h.dns.AddTXT("sel._domainkey.sender.example", record)
	h.dns.AddTXT("_dmarc.sender.example", "v=DMARC1; p=reject")
	msg := signed(t, testMessage("alice@sender.example", "Hello over the MX\r\n"), "sender.example")

	// net/smtp, STARTTLS, to a return path and a receiving address.
	c, err := smtp.Dial(h.addr)
	require.NoError(t, err)
	require.NoError(t, c.Hello("mx.sender.example"))
	ok, params := c.Extension("AUTH")
	require.False(t, ok, "AUTH advertised: %s", params)
	ok, _ = c.Extension("STARTTLS")
	require.True(t, ok)
	require.NoError(t, c.StartTLS(&tls.Config{RootCAs: h.roots, ServerName: "localhost"}))
	ok, _ = c.Extension("AUTH")
	require.False(t, ok, "AUTH advertised after STARTTLS")
	ok, size := c.Extension("SIZE")
	require.True(t, ok)
	require.Equal(t, fmt.Sprint(DefaultMaxMessageBytes), size)
	require.NoError(t, c.Mail("bounce@sender.example"))
	require.NoError(t, c.Rcpt("BOUNCES+0193E5A0-0000-7000-8000-0000000000CC@Send.Ours.Example"))
	require.NoError(t, c.Rcpt(receiving))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write(msg)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())

	got := h.acc.accepted()
	require.Len(t, got, 1)
	m := got[0]
	require.Equal(t, "bounce@sender.example", m.MailFrom)
	require.Equal(t, []inmail.Recipient{
		{Address: returnPath, Route: inmail.Route{Kind: inmail.RouteReturnPath, TeamID: teamID, DomainID: domainID, EmailID: emailID}},
		{Address: receiving, Route: inmail.Route{Kind: inmail.RouteReceiving, TeamID: teamID, DomainID: domainID}},
	}, m.Recipients)
	require.Equal(t, "127.0.0.1", m.ClientIP.String())
	require.Equal(t, "mx.sender.example", m.Helo)
	require.True(t, m.TLS)
	require.EqualValues(t, 7, m.ID.Version())

	// The Received header comes first, then the message as sent.
	head, _, found := bytes.Cut(m.Data, []byte("\r\n\r\n"))
	require.True(t, found)
	require.True(t, bytes.HasSuffix(m.Data, msg))
	recv := string(m.Data[:len(m.Data)-len(msg)])
	require.Regexp(t, `^Received: from mx\.sender\.example \(\[127\.0\.0\.1\]\)\r\n\tby mx\.posthaste\.test `+
		`with ESMTPS \(TLS1\.[23] [A-Z0-9_]+\) id `+m.ID.String()+`;\r\n\t[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} `+
		`\d\d:\d\d:\d\d [+-]\d{4}\r\n$`, recv)
	require.NotContains(t, recv, "for <", "two recipients: none named")
	require.Contains(t, string(head), "DKIM-Signature:")

	require.Equal(t, "pass", m.Auth.SPF.Result)
	require.Equal(t, []inmail.DKIMResult{{Result: "pass", Domain: "sender.example", Identifier: "@sender.example"}}, m.Auth.DKIM)
	require.Equal(t, "pass", m.Auth.DMARC.Result)
	require.Equal(t, "reject", m.Auth.DMARC.Policy)
	require.Equal(t, "mx.posthaste.test; spf=pass smtp.mailfrom=sender.example; dkim=pass header.d=sender.example header.i=@sender.example; "+
		`dmarc=pass reason="p=reject" header.from=sender.example`, strings.TrimSpace(m.AuthHeader))

	// A raw client over clear text: the reply names the id, the Received
	// header names the single recipient.
	d := h.dial()
	d.cmd(250, "EHLO client.example")
	d.cmd(250, "MAIL FROM:<x@unknown.example>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	text := d.data(250, testMessage("x@unknown.example", "plain\r\n"))
	mm := queuedAs.FindStringSubmatch(text)
	require.NotNil(t, mm, text)
	got = h.acc.accepted()
	require.Len(t, got, 2)
	require.Equal(t, mm[1], got[1].ID.String())
	require.False(t, got[1].TLS)
	require.Contains(t, string(got[1].Data), "with ESMTP id "+mm[1]+"\r\n\tfor <"+receiving+">;")
	require.Equal(t, "none", got[1].Auth.SPF.Result)
	require.Equal(t, "none", got[1].Auth.DMARC.Result)

	// DMARC fails (tampered body, no SPF for the MAIL FROM domain) with
	// p=reject: recorded, and the message is still accepted.
	tampered := bytes.Replace(msg, []byte("Hello over the MX"), []byte("Pay this invoice"), 1)
	d.cmd(250, "MAIL FROM:<x@unknown.example>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	d.cmd(250, "RCPT TO:<%s>", strings.ToUpper(receiving)) // the same mailbox: one copy
	d.data(250, tampered)
	got = h.acc.accepted()
	require.Len(t, got, 3)
	require.Len(t, got[2].Recipients, 1)
	require.Equal(t, []inmail.DKIMResult{{Result: "fail", Domain: "sender.example", Identifier: "@sender.example",
		Reason: got[2].Auth.DKIM[0].Reason}}, got[2].Auth.DKIM)
	require.Equal(t, inmail.DMARCResult{Result: "fail", FromDomain: "sender.example", Policy: "reject",
		PolicyDomain: "sender.example"}, got[2].Auth.DMARC)
	require.Contains(t, got[2].AuthHeader, `dmarc=fail reason="p=reject" header.from=sender.example`)
	require.Equal(t, 3.0, testutil.ToFloat64(h.metrics.Messages.WithLabelValues("accepted")))
}

func TestRefusesAUTHAndVRFY(t *testing.T) {
	h := newHarness(t, options{})
	d := h.dial()
	ehlo := d.cmd(250, "EHLO client.example")
	require.NotContains(t, ehlo, "AUTH")
	require.Contains(t, ehlo, "STARTTLS")
	d.cmd(504, "AUTH PLAIN %s", "AHBvc3RoYXN0ZQBzZWNyZXQ=")
	d.startTLS(h.roots)
	d.cmd(250, "EHLO client.example")
	d.cmd(504, "AUTH PLAIN %s", "AHBvc3RoYXN0ZQBzZWNyZXQ=")
	d.cmd(252, "VRFY %s", receiving) // RFC 5321 §3.5.3: no verification
	d.cmd(502, "EXPN staff")
	d.cmd(221, "QUIT")

	// Without TLS configured, STARTTLS is not offered.
	h2 := newHarness(t, options{noTLS: true})
	d = h2.dial()
	require.NotContains(t, d.cmd(250, "EHLO client.example"), "STARTTLS")
}

// TestNeverAnOpenRelay: recipients that are not ours are refused at RCPT,
// however they are spelled, and never reach DATA.
func TestNeverAnOpenRelay(t *testing.T) {
	h := newHarness(t, options{})
	for _, tc := range []struct {
		rcpt string
		code int
		enh  string
	}{
		{"<victim@example.org>", 550, "5.1.1"},
		{"<support@ours.example.evil.org>", 550, "5.1.1"},
		{"<@ours.example:victim@example.org>", 550, "5.1.1"},         // source route to a foreign mailbox
		{"<@a.example,@b.example:victim@example.org>", 550, "5.1.1"}, // RFC 5321 §4.1.1.3
		{"<victim%example.org@ours.example>", 550, "5.1.3"},          // percent hack
		{"<example.org!victim@ours.example>", 550, "5.1.3"},          // bang path
		{`<"victim@example.org"@ours.example>`, 550, "5.1.3"},        // quoted local part with @
		{`<"support"@ours.example>`, 250, ""},                        // quoting a plain local part is harmless
		{"<support@ours.example.>", 550, "5.1.3"},                    // trailing dot
		{"<support@[127.0.0.1]>", 550, "5.1.3"},                      // address literal
		{"<support@127.0.0.1>", 550, "5.1.3"},                        // bare IP
		{"<SUPPORT@OURS.EXAMPLE>", 250, ""},                          // case does not matter
		{"<@evil.example:SUPPORT@OURS.EXAMPLE>", 250, ""},            // a source route is ignored, the mailbox is ours
		{"<support>", 501, "5.5.2"},                                  // no domain (go-smtp)
		{"<postmaster>", 501, "5.5.2"},
		{"<support@>", 501, "5.5.2"},
	} {
		t.Run(tc.rcpt, func(t *testing.T) {
			d := h.dial()
			d.cmd(250, "EHLO client.example")
			d.cmd(250, "MAIL FROM:<someone@example.org>")
			text := d.cmd(tc.code, "RCPT TO:%s", tc.rcpt)
			if tc.enh != "" {
				require.True(t, strings.HasPrefix(text, tc.enh+" "), text)
			}
			if tc.code != 250 {
				d.cmd(502, "DATA") // no recipient was taken
			}
			d.cmd(221, "QUIT")
		})
	}
	require.Empty(t, h.acc.accepted())
	require.GreaterOrEqual(t, testutil.ToFloat64(h.metrics.Recipients.WithLabelValues("refused")), 10.0)
}

func TestNullSenderAccepted(t *testing.T) {
	h := newHarness(t, options{})
	h.dns.AddTXT("mx.remote.example", "v=spf1 ip4:127.0.0.1 -all")
	d := h.dial()
	d.cmd(250, "EHLO mx.remote.example")
	d.cmd(250, "MAIL FROM:<>")
	d.cmd(250, "RCPT TO:<%s>", returnPath)
	d.data(250, []byte("From: MAILER-DAEMON@remote.example\r\nSubject: Undelivered Mail\r\n\r\nbounce\r\n"))
	got := h.acc.accepted()
	require.Len(t, got, 1)
	require.Equal(t, "", got[0].MailFrom)
	require.Equal(t, inmail.RouteReturnPath, got[0].Recipients[0].Route.Kind)
	require.Equal(t, emailID, got[0].Recipients[0].Route.EmailID)
	require.Equal(t, inmail.SPFResult{Result: "pass", Domain: "mx.remote.example", Scope: "helo"}, got[0].Auth.SPF)
}

func TestLimits(t *testing.T) {
	t.Run("recipients per transaction", func(t *testing.T) {
		h := newHarness(t, options{maxRcpts: 2})
		h.router.mu.Lock()
		h.router.routes["a@ours.example"] = inmail.Route{Kind: inmail.RouteReceiving, TeamID: teamID, DomainID: domainID}
		h.router.mu.Unlock()
		d := h.dial()
		require.Contains(t, d.cmd(250, "EHLO client.example"), "LIMITS RCPTMAX=2")
		d.cmd(250, "MAIL FROM:<x@example.org>")
		d.cmd(250, "RCPT TO:<%s>", receiving)
		d.cmd(250, "RCPT TO:<a@ours.example>")
		require.True(t, strings.HasPrefix(d.cmd(452, "RCPT TO:<%s>", returnPath), "4.5.3 "))
		d.data(250, testMessage("x@example.org", "two\r\n"))
		require.Len(t, h.acc.accepted()[0].Recipients, 2)
	})

	t.Run("RSET clears the transaction", func(t *testing.T) {
		h := newHarness(t, options{})
		d := h.dial()
		d.cmd(250, "EHLO client.example")
		d.cmd(250, "MAIL FROM:<x@example.org>")
		d.cmd(250, "RCPT TO:<%s>", receiving)
		d.cmd(503, "MAIL FROM:<y@example.org>") // RFC 5321 §4.1.1.2
		d.cmd(250, "RSET")
		d.cmd(502, "DATA")
		d.cmd(250, "MAIL FROM:<y@example.org>")
		d.cmd(250, "RCPT TO:<%s>", returnPath)
		d.data(250, testMessage("y@example.org", "after RSET\r\n"))
		got := h.acc.accepted()
		require.Len(t, got, 1)
		require.Equal(t, "y@example.org", got[0].MailFrom)
		require.Equal(t, []string{returnPath}, []string{got[0].Recipients[0].Address})
	})

	t.Run("message over the size cap", func(t *testing.T) {
		h := newHarness(t, options{maxBytes: 64 << 10})
		d := h.dial()
		d.cmd(250, "EHLO client.example")
		// Declared too large (RFC 1870): refused at MAIL.
		d.cmd(552, "MAIL FROM:<x@example.org> SIZE=%d", 1<<20)
		d.cmd(250, "MAIL FROM:<x@example.org>")
		d.cmd(250, "RCPT TO:<%s>", receiving)
		big := append(testMessage("x@example.org", ""), bytes.Repeat([]byte(strings.Repeat("x", 998)+"\r\n"), 200)...)
		text := d.data(552, big)
		require.True(t, strings.HasPrefix(text, "5.3.4 "), text)
		// The connection stays usable. go-smtp's cap is exclusive: a
		// message must be smaller than MaxMessageBytes.
		sized := func(n int) []byte {
			m := testMessage("x@example.org", "")
			for len(m) < n {
				m = append(m, strings.Repeat("y", min(998, n-len(m)-2))+"\r\n"...)
			}
			require.Len(t, m, n)
			return m
		}
		d.cmd(250, "MAIL FROM:<x@example.org>")
		d.cmd(250, "RCPT TO:<%s>", receiving)
		d.data(552, sized(64<<10))
		d.cmd(250, "MAIL FROM:<x@example.org>")
		d.cmd(250, "RCPT TO:<%s>", receiving)
		under := sized(64<<10 - 1)
		d.data(250, under)
		got := h.acc.accepted()
		require.Len(t, got, 1, "only the message within the cap is accepted")
		require.True(t, bytes.HasSuffix(got[0].Data, under))
		require.Equal(t, 2.0, testutil.ToFloat64(h.metrics.Messages.WithLabelValues("rejected")))
	})

	t.Run("connections per client address", func(t *testing.T) {
		h := newHarness(t, options{maxConnsPerIP: 2})
		a, b := h.dial(), h.dial()
		over := h.dialFrom(nil, 421)
		_, err := over.tp.ReadLine()
		require.ErrorIs(t, err, io.EOF, "closed after the 421")
		// The refusal is counted before the 421 is written.
		require.Equal(t, 1.0, testutil.ToFloat64(h.metrics.Connections.WithLabelValues("refused")))
		// Another address is not affected.
		other := h.dialFrom(&net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, 220)
		other.cmd(221, "QUIT")
		// A slot frees when a connection ends. The server may notice
		// the end after a probe or two: those probes are refused and
		// counted too.
		a.cmd(221, "QUIT")
		_ = a.conn.Close()
		probesRefused := 0
		require.Eventually(t, func() bool {
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				return false
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, _ := textproto.NewReader(bufio.NewReader(c)).ReadLine()
			if strings.HasPrefix(line, "421 ") {
				probesRefused++
			}
			return strings.HasPrefix(line, "220 ")
		}, 5*time.Second, 20*time.Millisecond)
		b.cmd(250, "NOOP")
		require.Equal(t, float64(1+probesRefused), testutil.ToFloat64(h.metrics.Connections.WithLabelValues("refused")))
	})

	t.Run("connections in total", func(t *testing.T) {
		h := newHarness(t, options{maxConns: 1})
		h.dial()
		over := h.dialFrom(&net.TCPAddr{IP: net.ParseIP("127.0.0.3")}, 421)
		_ = over
	})
}

func TestTemporaryFailures(t *testing.T) {
	h := newHarness(t, options{})
	d := h.dial()
	d.cmd(250, "EHLO client.example")
	d.cmd(250, "MAIL FROM:<x@example.org>")
	// The Router fails: 451, without its text.
	text := d.cmd(451, "RCPT TO:<flaky@ours.example>")
	require.Equal(t, "4.3.0 Internal error, try again later", text)
	d.cmd(250, "RCPT TO:<%s>", receiving)

	// The Acceptor fails: 451 without its text, nothing kept; the client
	// tries again on the same connection and succeeds.
	h.acc.mu.Lock()
	h.acc.failNext = 1
	h.acc.mu.Unlock()
	msg := testMessage("x@example.org", "retry me\r\n")
	text = d.data(451, msg)
	require.Equal(t, "4.3.0 Internal error, try again later", text)
	require.Empty(t, h.acc.accepted())
	d.cmd(250, "MAIL FROM:<x@example.org>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	d.data(250, msg)
	require.Len(t, h.acc.accepted(), 1)
}

func TestFortyMegabyteMessage(t *testing.T) {
	h := newHarness(t, options{noTLS: true})
	const size = 40 << 20
	line := []byte(strings.Repeat("0123456789abcdef", 4) + "ABCDEFGHIJ\r\n") // 76 octets
	msg := make([]byte, 0, size)
	msg = append(msg, testMessage("x@example.org", "")...)
	for len(msg)+len(line) <= size {
		msg = append(msg, line...)
	}
	want := sha256.Sum256(msg)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	c, err := smtp.Dial(h.addr)
	require.NoError(t, err)
	require.NoError(t, c.Mail("x@example.org"))
	require.NoError(t, c.Rcpt(receiving))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write(msg)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())

	runtime.GC()
	runtime.ReadMemStats(&after)
	got := h.acc.accepted()
	require.Len(t, got, 1)
	h.acc.mu.Lock()
	sum := h.acc.sums[0]
	h.acc.mu.Unlock()
	require.Equal(t, want, sum, "the message follows the Received header, intact")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("40 MiB message: %d MiB allocated while receiving, heap in use %d → %d MiB", allocated>>20,
		before.HeapInuse>>20, after.HeapInuse>>20)
	// No copy of the message at all (it stays in its spool file, which
	// the checks and the Acceptor stream), only small buffers: reading it
	// back into memory would allocate its size, io.ReadAll about twice.
	require.Less(t, allocated, uint64(size)/4, "allocated %d bytes for a %d-byte message", allocated, size)
	// Nothing is kept once the Acceptor has dropped it.
	require.Less(t, after.HeapInuse, before.HeapInuse+8<<20)
	runtime.KeepAlive(msg) // in both measurements
	spooled, err := os.ReadDir(h.tempDir)
	require.NoError(t, err)
	require.Empty(t, spooled, "the spool file is removed")
}

func TestShutdownWaitsForATransaction(t *testing.T) {
	h := newHarness(t, options{})
	h.acc.mu.Lock()
	h.acc.block, h.acc.entered = make(chan struct{}), make(chan struct{}, 1)
	h.acc.mu.Unlock()

	idle := h.dial()
	idle.cmd(250, "EHLO idle.example")
	d := h.dial()
	d.cmd(250, "EHLO client.example")
	d.cmd(250, "MAIL FROM:<x@example.org>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	d.cmd(354, "DATA")
	dw := d.tp.DotWriter()
	_, err := dw.Write(testMessage("x@example.org", "in flight\r\n"))
	require.NoError(t, err)
	require.NoError(t, dw.Close())
	select {
	case <-h.acc.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept was not called")
	}

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- h.srv.Shutdown(ctx)
	}()
	// The idle connection is closed and the listener stops accepting...
	_ = idle.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = idle.tp.ReadLine()
	require.Error(t, err)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}, 10*time.Second, 20*time.Millisecond)
	// ...while the transaction in progress goes on.
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned during a transaction: %v", err)
	default:
	}
	close(h.acc.block)
	d.expect(250)
	select {
	case err := <-shut:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the transaction")
	}
	require.NoError(t, <-h.served)
	require.Len(t, h.acc.accepted(), 1)
}

// TestChunking: go-smtp always offers CHUNKING (RFC 3030); BDAT takes the
// same path as DATA, under the same cap.
func TestChunking(t *testing.T) {
	h := newHarness(t, options{maxBytes: 64 << 10})
	d := h.dial()
	require.Contains(t, d.cmd(250, "EHLO client.example"), "CHUNKING")
	msg := testMessage("x@example.org", "in two chunks\r\n")
	d.cmd(250, "MAIL FROM:<x@example.org>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	require.NoError(t, d.tp.PrintfLine("BDAT %d", 10))
	_, err := d.tp.W.Write(msg[:10])
	require.NoError(t, err)
	require.NoError(t, d.tp.W.Flush())
	d.expect(250)
	require.NoError(t, d.tp.PrintfLine("BDAT %d LAST", len(msg)-10))
	_, err = d.tp.W.Write(msg[10:])
	require.NoError(t, err)
	require.NoError(t, d.tp.W.Flush())
	require.Regexp(t, queuedAs, d.expect(250))
	got := h.acc.accepted()
	require.Len(t, got, 1)
	require.True(t, bytes.HasSuffix(got[0].Data, msg))

	d.cmd(250, "MAIL FROM:<x@example.org>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	big := bytes.Repeat([]byte(strings.Repeat("z", 998)+"\r\n"), 70)
	require.NoError(t, d.tp.PrintfLine("BDAT %d LAST", len(big)))
	_, err = d.tp.W.Write(big)
	require.NoError(t, err)
	require.NoError(t, d.tp.W.Flush())
	d.expect(552)
	require.Len(t, h.acc.accepted(), 1)
}
