package mta

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dnscache"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

const (
	hostname = "mta.posthaste.test"
	sender   = "bounces+42@rp.sender.test"
	body     = "From: a@sender.test\r\nTo: b@example.test\r\nSubject: hi\r\n\r\nhello\r\n"
)

// newMX starts an MX host for example.test: MX 10 mx.example.test, which
// resolves to 127.0.0.1.
func newMX(t *testing.T, opts smtptest.Options) (*dnstest.Server, *smtptest.Server) {
	t.Helper()
	if opts.STARTTLS && opts.CertHosts == nil {
		opts.CertHosts = []string{"mx.example.test"}
	}
	mx := smtptest.NewServer(t, opts)
	d := dnstest.NewServer(t)
	d.AddMX("example.test", "mx.example.test", 10)
	d.AddA("mx.example.test", "127.0.0.1")
	return d, mx
}

func testTimeouts() Timeouts {
	const d = 5 * time.Second
	return Timeouts{Connect: d, Greeting: d, Command: d, Mail: d, Rcpt: d, DataInit: d, DataBlock: d, DataFinal: d}
}

func newClient(t *testing.T, d *dnstest.Server, port int, edit func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		Hostname: hostname,
		Resolver: cachingResolver(t, d, nil),
		Port:     port,
		// The test MX hosts live on loopback, which the egress policy
		// refuses unless it is listed.
		Egress:   egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Timeouts: testTimeouts(),
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// cachingResolver is the resolver the program gives the client: answers
// from d, kept for their TTL as read from now (nil: time.Now).
func cachingResolver(t *testing.T, d *dnstest.Server, now func() time.Time) *dnscache.Resolver {
	t.Helper()
	r, err := dnscache.New(dnscache.Config{Servers: []string{d.Addr()}, Timeout: 5 * time.Second, Now: now})
	require.NoError(t, err)
	return r
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type want struct {
	status   Status
	code     int
	enhanced string
}

func requireResults(t *testing.T, got []Result, to []string, wants ...want) {
	t.Helper()
	require.Len(t, got, len(wants))
	for i, w := range wants {
		require.Equal(t, to[i], got[i].Rcpt, "result %d", i)
		require.Equal(t, w, want{got[i].Status, got[i].Code, got[i].EnhancedCode}, "result %d for %s: %q", i, got[i].Rcpt, got[i].Message)
	}
}

var (
	delivered   = want{Delivered, 250, "2.0.0"}
	rejected550 = want{Bounced, 550, "5.1.1"}
)

func rejectRcpt(rcpt string, reply *smtp.SMTPError) func(string, int) error {
	return func(to string, _ int) error {
		if to == rcpt {
			return reply
		}
		return nil
	}
}

func TestDeliver(t *testing.T) {
	two := []string{"gone@example.test", "b@example.test"}
	for _, tc := range []struct {
		name  string
		opts  smtptest.Options
		cfg   func(*Config, *smtptest.Server)
		env   Envelope // From, Data and To get defaults when empty
		want  []want
		check func(t *testing.T, mx *smtptest.Server)
	}{
		{
			name: "plain MX",
			want: []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				m := mx.Messages()[0]
				require.False(t, m.TLS)
				require.Equal(t, hostname, m.Helo)
				require.Equal(t, sender, m.From)
				require.Equal(t, []string{"b@example.test"}, m.To)
				require.Equal(t, body, string(m.Data))
				require.Equal(t, int64(len(body)), m.Size, "SIZE= declared")
				require.Empty(t, m.Body, "7-bit message without BODY=")
				require.False(t, m.UTF8)
			},
		},
		{
			name:  "STARTTLS opportunistic with a self-signed certificate",
			opts:  smtptest.Options{STARTTLS: true},
			want:  []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) { require.True(t, mx.Messages()[0].TLS) },
		},
		{
			name: "STARTTLS handshake failure falls back to plaintext",
			opts: smtptest.Options{BrokenSTARTTLS: true},
			want: []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				require.False(t, mx.Messages()[0].TLS)
				require.Equal(t, 2, mx.Connections())
			},
		},
		{
			name:  "enforced TLS with a trusted certificate",
			opts:  smtptest.Options{STARTTLS: true},
			cfg:   func(c *Config, mx *smtptest.Server) { c.RootCAs = mx.CertPool() },
			env:   Envelope{TLS: TLSEnforced},
			want:  []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) { require.True(t, mx.Messages()[0].TLS) },
		},
		{
			name:  "enforced TLS with an untrusted certificate",
			opts:  smtptest.Options{STARTTLS: true},
			env:   Envelope{TLS: TLSEnforced},
			want:  []want{{Deferred, 451, "4.7.5"}},
			check: func(t *testing.T, mx *smtptest.Server) { require.Zero(t, mx.MailCommands()) },
		},
		{
			name: "enforced TLS with a certificate for another name",
			opts: smtptest.Options{STARTTLS: true, CertHosts: []string{"other.example.test"}},
			cfg:  func(c *Config, mx *smtptest.Server) { c.RootCAs = mx.CertPool() },
			env:  Envelope{TLS: TLSEnforced},
			want: []want{{Deferred, 451, "4.7.5"}},
		},
		{
			name: "enforced TLS without STARTTLS",
			env:  Envelope{TLS: TLSEnforced},
			want: []want{{Deferred, 451, "4.7.4"}},
		},
		{
			name: "enforced TLS with a broken handshake",
			opts: smtptest.Options{BrokenSTARTTLS: true},
			env:  Envelope{TLS: TLSEnforced},
			want: []want{{Deferred, 451, "4.7.5"}},
		},
		{
			name: "550 for one of two recipients",
			opts: smtptest.Options{Rcpt: rejectRcpt("gone@example.test", smtptest.Reply(550, "5.1.1 no such user"))},
			env:  Envelope{To: two},
			want: []want{rejected550, delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				require.Equal(t, []string{"b@example.test"}, mx.Messages()[0].To)
			},
		},
		{
			name: "550 for one of two recipients without PIPELINING",
			opts: smtptest.Options{NoPipelining: true, Rcpt: rejectRcpt("gone@example.test", smtptest.Reply(550, "5.1.1 no such user"))},
			env:  Envelope{To: two},
			want: []want{rejected550, delivered},
		},
		{
			name:  "every recipient refused: no DATA",
			opts:  smtptest.Options{Rcpt: func(string, int) error { return smtptest.Reply(550, "5.1.1 no such user") }},
			env:   Envelope{To: two},
			want:  []want{rejected550, rejected550},
			check: func(t *testing.T, mx *smtptest.Server) { require.Empty(t, mx.Messages()) },
		},
		{
			name:  "every recipient refused without PIPELINING",
			opts:  smtptest.Options{NoPipelining: true, Rcpt: func(string, int) error { return smtptest.Reply(550, "5.1.1 no such user") }},
			env:   Envelope{To: two},
			want:  []want{rejected550, rejected550},
			check: func(t *testing.T, mx *smtptest.Server) { require.Empty(t, mx.Messages()) },
		},
		{
			name: "MAIL refused",
			opts: smtptest.Options{Mail: func(string, int) error { return smtptest.Reply(550, "5.7.1 sender blocked") }},
			env:  Envelope{To: two},
			want: []want{{Bounced, 550, "5.7.1"}, {Bounced, 550, "5.7.1"}},
		},
		{
			name: "MAIL deferred without PIPELINING",
			opts: smtptest.Options{NoPipelining: true, Mail: func(string, int) error { return smtptest.Reply(451, "4.3.0 try later") }},
			env:  Envelope{To: two},
			want: []want{{Deferred, 451, "4.3.0"}, {Deferred, 451, "4.3.0"}},
		},
		{
			name: "DATA refused: applies to the accepted recipients",
			opts: smtptest.Options{
				Rcpt: rejectRcpt("gone@example.test", smtptest.Reply(550, "5.1.1 no such user")),
				Data: func([]string, int) error { return smtptest.Reply(554, "5.6.0 content rejected") },
			},
			env:  Envelope{To: []string{"gone@example.test", "b@example.test", "c@example.test"}},
			want: []want{rejected550, {Bounced, 554, "5.6.0"}, {Bounced, 554, "5.6.0"}},
		},
		{
			name: "DATA deferred",
			opts: smtptest.Options{Data: func([]string, int) error { return smtptest.Reply(451, "4.3.0 queue full") }},
			want: []want{{Deferred, 451, "4.3.0"}},
		},
		{
			name: "552 on RCPT is treated as 452",
			opts: smtptest.Options{Rcpt: rejectRcpt("gone@example.test", smtptest.Reply(552, "5.2.2 mailbox full"))},
			env:  Envelope{To: two},
			want: []want{{Deferred, 452, "4.2.2"}, delivered},
		},
		{
			name: "452 too many recipients: the rest go in another transaction",
			opts: smtptest.Options{MaxRecipients: 2},
			env:  Envelope{To: []string{"a@example.test", "b@example.test", "c@example.test", "d@example.test", "e@example.test"}},
			want: []want{delivered, delivered, delivered, delivered, delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				msgs := mx.Messages()
				require.Len(t, msgs, 3)
				require.Equal(t, []string{"e@example.test"}, msgs[2].To)
				require.Equal(t, 1, mx.Connections())
			},
		},
		{
			name: "452 without progress defers",
			opts: smtptest.Options{Rcpt: func(string, int) error { return smtptest.Reply(452, "4.5.3 too many") }},
			env:  Envelope{To: two},
			want: []want{{Deferred, 452, "4.5.3"}, {Deferred, 452, "4.5.3"}},
		},
		{
			name:  "message over SIZE is bounced without sending",
			opts:  smtptest.Options{MaxMessageBytes: 20},
			want:  []want{{Bounced, 552, "5.3.4"}},
			check: func(t *testing.T, mx *smtptest.Server) { require.Zero(t, mx.MailCommands()) },
		},
		{
			name: "message within SIZE",
			opts: smtptest.Options{MaxMessageBytes: int64(len(body)) + 64},
			want: []want{delivered},
		},
		{
			name: "SMTPUTF8 recipient",
			opts: smtptest.Options{SMTPUTF8: true},
			env:  Envelope{To: []string{"üser@example.test"}},
			want: []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				m := mx.Messages()[0]
				require.True(t, m.UTF8)
				require.Equal(t, []string{"üser@example.test"}, m.To)
			},
		},
		{
			name: "SMTPUTF8 recipient at a server without it",
			env:  Envelope{To: []string{"üser@example.test", "b@example.test"}},
			want: []want{{Bounced, 553, "5.6.7"}, delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				require.False(t, mx.Messages()[0].UTF8)
				require.Equal(t, []string{"b@example.test"}, mx.Messages()[0].To)
			},
		},
		{
			name: "UTF-8 header at a server without SMTPUTF8",
			env:  Envelope{Data: []byte("Subject: grüße\r\n\r\nhello\r\n")},
			want: []want{{Bounced, 554, "5.6.9"}},
		},
		{
			name: "UTF-8 header with SMTPUTF8",
			opts: smtptest.Options{SMTPUTF8: true},
			env:  Envelope{Data: []byte("Subject: grüße\r\n\r\nhello\r\n")},
			want: []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				require.True(t, mx.Messages()[0].UTF8)
				require.Equal(t, smtp.Body8BitMIME, mx.Messages()[0].Body)
			},
		},
		{
			name: "8-bit body uses 8BITMIME",
			env:  Envelope{Data: []byte("Subject: x\r\n\r\ncafé\r\n")},
			want: []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				require.Equal(t, smtp.Body8BitMIME, mx.Messages()[0].Body)
				require.False(t, mx.Messages()[0].UTF8)
			},
		},
		{
			name: "dot-stuffing and bare LF",
			env:  Envelope{Data: []byte("Subject: x\n\n.leading dot\n..two\n.\nend")},
			want: []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) {
				require.Equal(t, "Subject: x\r\n\r\n.leading dot\r\n..two\r\n.\r\nend\r\n", string(mx.Messages()[0].Data))
			},
		},
		{
			name:  "null reverse path",
			env:   Envelope{From: "<>"},
			want:  []want{delivered},
			check: func(t *testing.T, mx *smtptest.Server) { require.Empty(t, mx.Messages()[0].From) },
		},
		{
			name:  "invalid recipient is bounced without a connection",
			env:   Envelope{To: []string{"bad address@example.test"}},
			want:  []want{{Bounced, 553, "5.1.3"}},
			check: func(t *testing.T, mx *smtptest.Server) { require.Zero(t, mx.Connections()) },
		},
		{
			name: "invalid sender bounces everyone",
			env:  Envelope{From: "no-at-sign", To: two},
			want: []want{{Bounced, 553, "5.1.7"}, {Bounced, 553, "5.1.7"}},
		},
		{
			name: "unknown TLS mode defers",
			env:  Envelope{TLS: "strict"},
			want: []want{{Deferred, 451, "4.3.5"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, mx := newMX(t, tc.opts)
			c := newClient(t, d, mx.Port(), func(cfg *Config) {
				if tc.cfg != nil {
					tc.cfg(cfg, mx)
				}
			})
			env := tc.env
			switch env.From {
			case "":
				env.From = sender
			case "<>":
				env.From = ""
			}
			if env.To == nil {
				env.To = []string{"b@example.test"}
			}
			if env.Data == nil {
				env.Data = []byte(body)
			}
			got := c.Deliver(testContext(t), "example.test", env)
			requireResults(t, got, env.To, tc.want...)
			if tc.check != nil {
				tc.check(t, mx)
			}
		})
	}
}

func TestRemoteServerAndMessage(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{Rcpt: rejectRcpt("gone@example.test", smtptest.Reply(550, "5.1.1 no such user"))})
	c := newClient(t, d, mx.Port(), nil)
	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"gone@example.test", "b@example.test"}, Data: []byte(body)})
	require.Equal(t, Result{Rcpt: "gone@example.test", Status: Bounced, Code: 550, EnhancedCode: "5.1.1", Message: "no such user", RemoteServer: "mx.example.test", SourceIP: "127.0.0.1"}, got[0])
	require.Equal(t, "mx.example.test", got[1].RemoteServer)
	require.Equal(t, "OK: queued", got[1].Message)
}

func TestGreylistingAcrossDeliveries(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{Rcpt: func(_ string, n int) error {
		if n == 1 {
			return smtptest.Reply(451, "4.7.1 greylisted, try again later")
		}
		return nil
	}})
	c := newClient(t, d, mx.Port(), nil)
	env := Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}

	first := c.Deliver(testContext(t), "example.test", env)
	requireResults(t, first, env.To, want{Deferred, 451, "4.7.1"})
	require.Equal(t, "greylisted, try again later", first[0].Message)
	require.Empty(t, mx.Messages())

	second := c.Deliver(testContext(t), "example.test", env)
	requireResults(t, second, env.To, delivered)
	require.Len(t, mx.Messages(), 1)
}

func TestDropMidData(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{DropData: func(n int) bool { return n == 1 }})
	c := newClient(t, d, mx.Port(), nil)
	env := Envelope{From: sender, To: []string{"a@example.test", "b@example.test"}, Data: []byte(body + strings.Repeat(strings.Repeat("x", 76)+"\r\n", 1000))}

	first := c.Deliver(testContext(t), "example.test", env)
	requireResults(t, first, env.To, want{Deferred, 451, "4.4.2"}, want{Deferred, 451, "4.4.2"})
	require.Empty(t, mx.Messages())

	second := c.Deliver(testContext(t), "example.test", env)
	requireResults(t, second, env.To, delivered, delivered)
	require.Equal(t, 2, mx.Connections(), "the broken connection was not reused")
}

func TestRouting(t *testing.T) {
	mx := smtptest.NewServer(t, smtptest.Options{})
	d := dnstest.NewServer(t)
	d.AddA("mx.example.test", "127.0.0.1")
	d.AddNullMX("nomail.test")
	d.AddA("nomail.test", "127.0.0.1") // the null MX wins over the A fallback
	d.AddA("direct.test", "127.0.0.1")
	d.AddMX("flaky.test", "mx.example.test", 10)
	d.ServFail("flaky.test", true)
	d.AddMX("bücher.test", "mx.example.test", 10)
	d.AddMX("dangling.test", "mx.nowhere.test", 10)
	c := newClient(t, d, mx.Port(), nil)

	for _, tc := range []struct {
		domain string
		to     string
		want   want
		remote string
		rcpt   string // as received by the MX
	}{
		{"nomail.test", "a@nomail.test", want{Bounced, 556, "5.1.10"}, "", ""},
		{"missing.test", "a@missing.test", want{Bounced, 550, "5.1.2"}, "", ""},
		{"flaky.test", "a@flaky.test", want{Deferred, 451, "4.4.3"}, "", ""},
		{"direct.test", "a@direct.test", delivered, "direct.test", "a@direct.test"},
		{"bücher.test", "user@bücher.test", delivered, "mx.example.test", "user@xn--bcher-kva.test"},
		{"BÜCHER.test", "user@Bücher.TEST", delivered, "mx.example.test", "user@xn--bcher-kva.test"},
		{"[127.0.0.1]", "user@[127.0.0.1]", delivered, "127.0.0.1", "user@[127.0.0.1]"},
		{"dangling.test", "a@dangling.test", want{Deferred, 451, "4.4.1"}, "mx.nowhere.test", ""},
		{"bad domain.test", "a@example.test", want{Bounced, 550, "5.1.2"}, "", ""},
	} {
		t.Run(tc.domain, func(t *testing.T) {
			before := len(mx.Messages())
			got := c.Deliver(testContext(t), tc.domain, Envelope{From: sender, To: []string{tc.to}, Data: []byte(body)})
			requireResults(t, got, []string{tc.to}, tc.want)
			require.Equal(t, tc.remote, got[0].RemoteServer)
			msgs := mx.Messages()
			if tc.rcpt == "" {
				require.Len(t, msgs, before)
				return
			}
			require.Len(t, msgs, before+1)
			require.Equal(t, []string{tc.rcpt}, msgs[before].To)
			require.False(t, msgs[before].UTF8, "A-labels need no SMTPUTF8")
		})
	}
}

// requireLoopbackAlias fails the test where ip (in 127.0.0.0/8) is not on
// loopback, as it is on Linux.
func requireLoopbackAlias(t *testing.T, ip string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("this test needs %s on loopback: %v", ip, err)
	}
	_ = ln.Close()
}

func TestMXPreferenceFirstHostDown(t *testing.T) {
	requireLoopbackAlias(t, "127.0.0.3")
	primary := smtptest.NewServer(t, smtptest.Options{Domain: "mx2.example.test"})
	port := strconv.Itoa(primary.Port())
	backup := smtptest.NewServer(t, smtptest.Options{Addr: net.JoinHostPort("127.0.0.3", port), Domain: "mx3.example.test"})

	d := dnstest.NewServer(t)
	d.AddMX("example.test", "mx3.example.test", 30)
	d.AddMX("example.test", "mx1.example.test", 10) // nothing listens there
	d.AddMX("example.test", "mx2.example.test", 20)
	d.AddA("mx1.example.test", "127.0.0.2")
	d.AddA("mx2.example.test", "127.0.0.1")
	d.AddA("mx3.example.test", "127.0.0.3")
	clock := clocktest.New(time.Now())
	c := newClient(t, d, primary.Port(), func(cfg *Config) { cfg.Resolver = cachingResolver(t, d, clock.Now) })

	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"b@example.test"}, delivered)
	require.Equal(t, "mx2.example.test", got[0].RemoteServer)
	require.Len(t, primary.Messages(), 1)
	require.Empty(t, backup.Messages())

	// With every host down the recipients are deferred.
	d.Remove("mx2.example.test", dns.TypeA)
	d.Remove("mx3.example.test", dns.TypeA)
	d.AddA("mx2.example.test", "127.0.0.2")
	d.AddA("mx3.example.test", "127.0.0.2")
	clock.Advance(time.Minute)    // the old addresses expire
	require.NoError(t, c.Close()) // forget the pooled connection
	got = c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"b@example.test"}, want{Deferred, 451, "4.4.1"})
	require.Contains(t, got[0].Message, "connection refused")
}

func TestGreeting421TriesNextHost(t *testing.T) {
	requireLoopbackAlias(t, "127.0.0.2")
	good := smtptest.NewServer(t, smtptest.Options{})
	port := strconv.Itoa(good.Port())
	script(t, net.JoinHostPort("127.0.0.2", port), func(c *scriptConn) {
		c.reply("421 4.3.2 too busy")
	})
	d := dnstest.NewServer(t)
	d.AddMX("example.test", "busy.example.test", 10)
	d.AddMX("example.test", "mx.example.test", 20)
	d.AddA("busy.example.test", "127.0.0.2")
	d.AddA("mx.example.test", "127.0.0.1")
	c := newClient(t, d, good.Port(), nil)

	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"b@example.test"}, delivered)
	require.Equal(t, "mx.example.test", got[0].RemoteServer)
}

func TestConnectionReuse(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{STARTTLS: true})
	c := newClient(t, d, mx.Port(), nil)
	env := Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}
	deliver := func() {
		t.Helper()
		requireResults(t, c.Deliver(testContext(t), "example.test", env), env.To, delivered)
	}

	deliver()
	deliver()
	require.Equal(t, 1, mx.Connections(), "two envelopes, one connection")
	require.Len(t, mx.Messages(), 2)
	require.True(t, mx.Messages()[1].TLS)

	// A pooled connection the server closed is retried on a fresh one.
	mx.CloseConnections()
	deliver()
	require.Equal(t, 2, mx.Connections())
	require.Len(t, mx.Messages(), 3)

	// Close ends idle connections with QUIT.
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return mx.OpenConnections() == 0 }, 5*time.Second, 10*time.Millisecond)
	deliver()
	require.Eventually(t, func() bool { return mx.OpenConnections() == 0 }, 5*time.Second, 10*time.Millisecond,
		"a closed client keeps no connection")
}

func TestIdleTimeout(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{})
	c := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.IdleTimeout = 50 * time.Millisecond })
	env := Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}

	requireResults(t, c.Deliver(testContext(t), "example.test", env), env.To, delivered)
	require.Eventually(t, func() bool { return mx.OpenConnections() == 0 }, 5*time.Second, 10*time.Millisecond)
	requireResults(t, c.Deliver(testContext(t), "example.test", env), env.To, delivered)
	require.Equal(t, 2, mx.Connections())
}

func TestNoReuse(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{})
	c := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.IdleTimeout = -1 })
	env := Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}
	for range 2 {
		requireResults(t, c.Deliver(testContext(t), "example.test", env), env.To, delivered)
	}
	require.Equal(t, 2, mx.Connections())
	require.Eventually(t, func() bool { return mx.OpenConnections() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// Deliveries to a domain ask DNS once while the answers live: each new
// connection resolves its MX host from the cache, and asks again after
// the TTL (60 seconds from dnstest).
func TestDNSAnswersAreKept(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{})
	d.AddA("bare.test", "127.0.0.1") // implicit MX
	clock := clocktest.New(time.Now())
	c := newClient(t, d, mx.Port(), func(cfg *Config) {
		cfg.IdleTimeout = -1 // every delivery connects
		cfg.Resolver = cachingResolver(t, d, clock.Now)
	})
	for _, domain := range []string{"example.test", "bare.test"} {
		env := Envelope{From: sender, To: []string{"b@" + domain}, Data: []byte(body)}
		for range 3 {
			requireResults(t, c.Deliver(testContext(t), domain, env), env.To, delivered)
		}
	}
	require.Equal(t, 6, mx.Connections())
	require.Equal(t, 1, d.Queries("example.test", dns.TypeMX))
	require.Equal(t, 1, d.Queries("mx.example.test", dns.TypeA))
	require.Equal(t, 1, d.Queries("bare.test", dns.TypeMX), "the NODATA answer is kept too")
	require.Equal(t, 1, d.Queries("bare.test", dns.TypeA))

	clock.Advance(time.Minute)
	env := Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}
	requireResults(t, c.Deliver(testContext(t), "example.test", env), env.To, delivered)
	require.Equal(t, 2, d.Queries("example.test", dns.TypeMX))
	require.Equal(t, 2, d.Queries("mx.example.test", dns.TypeA))
}

// A pooled session serves a stricter policy only when it meets it: an
// opportunistic session with a certificate that does not verify is not
// reused under TLSEnforced; one whose certificate verifies is.
func TestEnforcedTLSReusesOnlyVerifiedConnections(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{STARTTLS: true})
	env := Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}

	untrusted := newClient(t, d, mx.Port(), nil) // system roots: the test certificate does not verify
	requireResults(t, untrusted.Deliver(testContext(t), "example.test", env), env.To, delivered)
	enforced := env
	enforced.TLS = TLSEnforced
	got := untrusted.Deliver(testContext(t), "example.test", enforced)
	requireResults(t, got, env.To, want{Deferred, 451, "4.7.5"})
	require.Contains(t, got[0].Message, "the sender domain's TLS setting (enforced): certificate of mx.example.test not valid")
	require.Equal(t, 2, mx.Connections(), "the unverified session was not reused")

	trusted := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.RootCAs = mx.CertPool() })
	requireResults(t, trusted.Deliver(testContext(t), "example.test", env), env.To, delivered)
	requireResults(t, trusted.Deliver(testContext(t), "example.test", enforced), env.To, delivered)
	requireResults(t, trusted.Deliver(testContext(t), "example.test", enforced), env.To, delivered)
	require.Equal(t, 3, mx.Connections(), "the session whose certificate verifies was reused")
}

func TestManyRecipientsTakeSeveralTransactions(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{})
	c := newClient(t, d, mx.Port(), nil)
	to := make([]string, 150)
	wants := make([]want, len(to))
	for i := range to {
		to[i] = "r" + strconv.Itoa(i) + "@example.test"
		wants[i] = delivered
	}
	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: to, Data: []byte(body)})
	requireResults(t, got, to, wants...)
	msgs := mx.Messages()
	require.Len(t, msgs, 2)
	require.Len(t, msgs[0].To, maxRcptsPerTxn)
	require.Len(t, msgs[1].To, 50)
	require.Equal(t, 1, mx.Connections())
}

func TestRelay(t *testing.T) {
	relay := smtptest.NewServer(t, smtptest.Options{STARTTLS: true})
	d := dnstest.NewServer(t) // knows nothing: the relay needs no lookups
	c := newClient(t, d, 0, func(cfg *Config) {
		cfg.Relay = "smtp://" + relay.Addr()
		cfg.RootCAs = relay.CertPool()
		// The operator chose the relay: the egress policy, which refuses
		// its loopback address, does not apply to it.
		cfg.Egress = egress.Policy{}
	})

	to := []string{"a@example.test", "b@elsewhere.test"}
	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: to, Data: []byte(body)})
	requireResults(t, got, to, delivered, delivered)
	require.Equal(t, "127.0.0.1", got[0].RemoteServer)
	m := relay.Messages()[0]
	require.Equal(t, to, m.To)
	require.True(t, m.TLS)

	// Enforced TLS verifies the relay's certificate for its IP address.
	got = c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: to[:1], Data: []byte(body), TLS: TLSEnforced})
	requireResults(t, got, to[:1], delivered)
}

func TestSourceIP(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{})
	requireLoopbackAlias(t, "127.0.0.5")
	c := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.SourceIP = net.ParseIP("127.0.0.5") })
	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"b@example.test"}, delivered)
	host, _, err := net.SplitHostPort(mx.Messages()[0].RemoteAddr)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.5", host)
	require.Equal(t, "127.0.0.5", got[0].SourceIP, "the result names the source address")

	// Idle connections are kept per source address: one opened from an
	// address never carries mail meant to leave from another.
	other := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.SourceIP = net.ParseIP("127.0.0.6") })
	require.NotEqual(t, c.poolKey("mx.example.test", "25"), other.poolKey("mx.example.test", "25"))
}

func TestTimeouts(t *testing.T) {
	silent := func(c *scriptConn) { c.discard() }

	t.Run("greeting", func(t *testing.T) {
		addr := script(t, "127.0.0.1:0", silent)
		d := dnstest.NewServer(t)
		d.AddA("slow.test", "127.0.0.1")
		c := newClient(t, d, portOf(t, addr), func(cfg *Config) { cfg.Timeouts.Greeting = 100 * time.Millisecond })
		start := time.Now()
		got := c.Deliver(testContext(t), "slow.test", Envelope{From: sender, To: []string{"a@slow.test"}, Data: []byte(body)})
		requireResults(t, got, []string{"a@slow.test"}, want{Deferred, 451, "4.4.2"})
		require.Contains(t, got[0].Message, "timeout")
		require.Less(t, time.Since(start), 3*time.Second)
	})

	t.Run("RCPT", func(t *testing.T) {
		addr := script(t, "127.0.0.1:0", func(c *scriptConn) {
			c.reply("220 slow.test")
			c.expect("EHLO")
			c.reply("250 slow.test")
			c.expect("MAIL")
			c.reply("250 ok")
			c.expect("RCPT")
			c.discard()
		})
		d := dnstest.NewServer(t)
		d.AddA("slow.test", "127.0.0.1")
		c := newClient(t, d, portOf(t, addr), func(cfg *Config) { cfg.Timeouts.Rcpt = 100 * time.Millisecond })
		got := c.Deliver(testContext(t), "slow.test", Envelope{From: sender, To: []string{"a@slow.test"}, Data: []byte(body)})
		requireResults(t, got, []string{"a@slow.test"}, want{Deferred, 451, "4.4.2"})
		require.Contains(t, got[0].Message, "RCPT TO")
	})

	t.Run("context", func(t *testing.T) {
		addr := script(t, "127.0.0.1:0", silent)
		d := dnstest.NewServer(t)
		d.AddA("slow.test", "127.0.0.1")
		c := newClient(t, d, portOf(t, addr), nil)
		ctx, cancel := context.WithTimeout(testContext(t), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		got := c.Deliver(ctx, "slow.test", Envelope{From: sender, To: []string{"a@slow.test"}, Data: []byte(body)})
		require.Equal(t, Deferred, got[0].Status)
		require.Contains(t, got[0].Message, "deadline exceeded")
		require.Less(t, time.Since(start), 3*time.Second)
	})
}

func TestHELOFallbackWithoutExtensions(t *testing.T) {
	var cmds []string
	done := make(chan struct{})
	addr := script(t, "127.0.0.1:0", func(c *scriptConn) {
		defer close(done)
		c.reply("220 old.test SMTP")
		cmds = append(cmds, c.expect("EHLO"))
		c.reply("502 5.5.2 command not recognized")
		cmds = append(cmds, c.expect("HELO"))
		c.reply("250 old.test")
		cmds = append(cmds, c.expect("MAIL"))
		c.reply("250 ok")
		cmds = append(cmds, c.expect("RCPT"))
		c.reply("250 ok")
		cmds = append(cmds, c.expect("DATA"))
		c.reply("354 go on")
		c.readData()
		c.reply("250 queued")
		cmds = append(cmds, c.expect("QUIT"))
		c.reply("221 bye")
	})
	d := dnstest.NewServer(t)
	d.AddA("old.test", "127.0.0.1")
	c := newClient(t, d, portOf(t, addr), func(cfg *Config) { cfg.IdleTimeout = -1 })

	got := c.Deliver(testContext(t), "old.test", Envelope{From: sender, To: []string{"a@old.test"}, Data: []byte("Subject: x\r\n\r\ncafé\r\n")})
	requireResults(t, got, []string{"a@old.test"}, want{Delivered, 250, ""})
	<-done
	require.Equal(t, []string{
		"EHLO " + hostname,
		"HELO " + hostname,
		"MAIL FROM:<" + sender + ">", // no SIZE, no BODY: not offered
		"RCPT TO:<a@old.test>",
		"DATA",
		"QUIT",
	}, cmds)
}

func TestPipelinedGroup(t *testing.T) {
	// This server answers nothing until it has MAIL, both RCPTs and DATA:
	// a client that waits for each reply would time out.
	addr := script(t, "127.0.0.1:0", func(c *scriptConn) {
		c.reply("220 fast.test")
		c.expect("EHLO")
		c.reply("250-fast.test", "250 PIPELINING")
		c.expect("MAIL")
		c.expect("RCPT")
		c.expect("RCPT")
		c.expect("DATA")
		c.reply("250 2.1.0 ok", "550 5.1.1 unknown", "250 2.1.5 ok", "354 go on")
		c.readData()
		c.reply("250 2.0.0 queued")
		c.discard()
	})
	d := dnstest.NewServer(t)
	d.AddA("fast.test", "127.0.0.1")
	c := newClient(t, d, portOf(t, addr), func(cfg *Config) {
		cfg.Timeouts.Mail = 500 * time.Millisecond
		cfg.Timeouts.Rcpt = 500 * time.Millisecond
	})
	to := []string{"gone@fast.test", "a@fast.test"}
	got := c.Deliver(testContext(t), "fast.test", Envelope{From: sender, To: to, Data: []byte(body)})
	requireResults(t, got, to, rejected550, delivered)
}

func TestDataAcceptedWithoutRecipients(t *testing.T) {
	// RFC 2920 §3.1: a server may take DATA after refusing every RCPT; the
	// client ends it with a lone dot and sends nothing.
	var data string
	done := make(chan struct{})
	addr := script(t, "127.0.0.1:0", func(c *scriptConn) {
		defer close(done)
		c.reply("220 odd.test")
		c.expect("EHLO")
		c.reply("250-odd.test", "250 PIPELINING")
		c.expect("MAIL")
		c.expect("RCPT")
		c.expect("DATA")
		c.reply("250 ok", "550 5.1.1 unknown", "354 go on")
		data = c.readData()
		c.reply("554 5.5.1 no valid recipients")
		c.expect("RSET")
		c.reply("250 ok")
		c.expect("QUIT")
		c.reply("221 bye")
	})
	d := dnstest.NewServer(t)
	d.AddA("odd.test", "127.0.0.1")
	c := newClient(t, d, portOf(t, addr), func(cfg *Config) { cfg.IdleTimeout = -1 })
	got := c.Deliver(testContext(t), "odd.test", Envelope{From: sender, To: []string{"gone@odd.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"gone@odd.test"}, rejected550)
	<-done
	require.Empty(t, data)
}

func TestSTARTTLSResponseInjection(t *testing.T) {
	// CVE-2011-0411: plaintext sent after the 220 to STARTTLS must not be
	// taken as the server's first reply over TLS.
	addr := script(t, "127.0.0.1:0", func(c *scriptConn) {
		c.reply("220 evil.test")
		c.expect("EHLO")
		c.reply("250-evil.test", "250 STARTTLS")
		c.expect("STARTTLS")
		c.reply("220 go ahead", "250 injected")
		c.discard()
	})
	d := dnstest.NewServer(t)
	d.AddA("evil.test", "127.0.0.1")
	c := newClient(t, d, portOf(t, addr), nil)
	got := c.Deliver(testContext(t), "evil.test", Envelope{From: sender, To: []string{"a@evil.test"}, Data: []byte(body), TLS: TLSEnforced})
	requireResults(t, got, []string{"a@evil.test"}, want{Deferred, 451, "4.7.5"})
	require.Contains(t, got[0].Message, "after its STARTTLS reply")
}

func TestDeliverNoRecipients(t *testing.T) {
	c, err := New(Config{Hostname: hostname})
	require.NoError(t, err)
	require.Empty(t, c.Deliver(testContext(t), "example.test", Envelope{From: sender}))
}

func TestSTARTTLSRefused(t *testing.T) {
	// RFC 3207 §4: after a 454 to STARTTLS the plaintext session goes on,
	// when the policy allows plaintext.
	var mail string
	addr := script(t, "127.0.0.1:0", func(c *scriptConn) {
		c.reply("220 notls.test")
		c.expect("EHLO")
		c.reply("250-notls.test", "250 STARTTLS")
		c.expect("STARTTLS")
		c.reply("454 4.7.0 TLS not available now")
		line, err := c.tp.ReadLine()
		if err != nil || strings.EqualFold(line, "QUIT") {
			c.reply("221 bye")
			return // the enforced client gives up
		}
		mail = line
		c.reply("250 ok")
		c.expect("RCPT")
		c.reply("250 ok")
		c.expect("DATA")
		c.reply("354 go on")
		c.readData()
		c.reply("250 queued")
		c.discard()
	})
	d := dnstest.NewServer(t)
	d.AddA("notls.test", "127.0.0.1")
	c := newClient(t, d, portOf(t, addr), nil)
	env := Envelope{From: sender, To: []string{"a@notls.test"}, Data: []byte(body), TLS: TLSEnforced}

	got := c.Deliver(testContext(t), "notls.test", env)
	requireResults(t, got, env.To, want{Deferred, 451, "4.7.4"})
	require.Contains(t, got[0].Message, "454 4.7.0 TLS not available now")

	env.TLS = TLSOpportunistic
	got = c.Deliver(testContext(t), "notls.test", env)
	requireResults(t, got, env.To, want{Delivered, 250, ""})
	require.Equal(t, "MAIL FROM:<"+sender+">", mail)
}

func TestConcurrentDeliveries(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{STARTTLS: true})
	c := newClient(t, d, mx.Port(), nil)
	const n = 8
	var wg sync.WaitGroup
	results := make([][]Result, n)
	for i := range n {
		wg.Go(func() {
			to := []string{"r" + strconv.Itoa(i) + "@example.test"}
			results[i] = c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: to, Data: []byte(body)})
		})
	}
	wg.Wait()
	for _, r := range results {
		require.Equal(t, Delivered, r[0].Status, r[0].Message)
	}
	require.Len(t, mx.Messages(), n)
	require.LessOrEqual(t, mx.Connections(), n)

	// The idle connections serve the next round.
	before := mx.Connections()
	requireResults(t, c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: []string{"b@example.test"}, Data: []byte(body)}),
		[]string{"b@example.test"}, delivered)
	require.Equal(t, before, mx.Connections())
}
