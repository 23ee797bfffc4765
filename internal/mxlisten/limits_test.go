package mxlisten

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// TestClientRates: the rates take a client as an IPv4 address or an IPv6
// /64 and a network as an IPv4 /24 or an IPv6 /48, so that IPv6 clients
// spread over the /64s of one /48 still share its network's rate.
func TestClientRates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    []string
		refused int // index of the first address refused
	}{
		{"one IPv6 /64", []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3"}, 2},
		{"the /64s of one /48", []string{"2001:db8:1:2::1", "2001:db8:1:3::1", "2001:db8:1:4::1", "2001:db8:1:5::1"}, 3},
		{"IPv6 /48s apart", []string{"2001:db8:1::1", "2001:db8:2::1", "2001:db8:3::1", "2001:db8:4::1"}, -1},
		{"one IPv4 address, mapped or not", []string{"192.0.2.7", "::ffff:192.0.2.7", "192.0.2.7"}, 2},
		{"one IPv4 /24", []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{Limits: Limits{PerAddress: 2, PerNetwork: 3,
				Limiter: ratelimit.NewLocal(ratelimit.LocalConfig{Now: clocktest.New(time.Now()).Now})}}}
			for i, a := range tc.from {
				err := s.allowClient(context.Background(), netip.MustParseAddr(a))
				if tc.refused < 0 || i < tc.refused {
					require.NoError(t, err, "%d: %s", i, a)
					continue
				}
				require.Error(t, err, "%d: %s", i, a)
				return
			}
			require.Negative(t, tc.refused, "nothing refused")
		})
	}
}

func TestBudget(t *testing.T) {
	b := inmail.Budget{DailyMessages: 10, StorageBytes: 1000}
	for _, tc := range []struct {
		name             string
		u                inmail.Usage
		full, over, near bool
	}{
		{"empty", inmail.Usage{}, false, false, false},
		{"below", inmail.Usage{Messages: 7, Bytes: 799}, false, false, false},
		{"near messages", inmail.Usage{Messages: 8}, false, false, true},
		{"near bytes", inmail.Usage{Bytes: 800}, false, false, true},
		{"at messages", inmail.Usage{Messages: 10}, true, false, true},
		{"over messages", inmail.Usage{Messages: 11}, true, true, true},
		{"at bytes", inmail.Usage{Bytes: 1000}, true, false, true},
		{"over bytes", inmail.Usage{Bytes: 1001}, true, true, true},
		{"team's own limit", inmail.Usage{Messages: 11, MaxMessages: 100, Bytes: 10}, false, false, false},
		{"team's own bytes", inmail.Usage{Bytes: 1001, MaxBytes: 2000}, false, false, false},
		{"team's own, lower", inmail.Usage{Messages: 3, MaxMessages: 3}, true, false, true},
	} {
		require.Equal(t, tc.full, b.Full(tc.u), "full: %s", tc.name)
		require.Equal(t, tc.over, b.Over(tc.u), "over: %s", tc.name)
		require.Equal(t, tc.near, b.Near(tc.u), "near: %s", tc.name)
	}
	require.False(t, inmail.Budget{}.Full(inmail.Usage{Messages: 1 << 40, Bytes: 1 << 50}), "zero limits: none")
}

// TestMessageRates sends from loopback addresses of two /24s: a client
// address gets 450 4.7.1 at MAIL FROM beyond its rate, and nothing of
// its is accepted beyond it, while another address (and, once the /24 is
// spent, another network) still gets 250; a bucket refills by the clock.
func TestMessageRates(t *testing.T) {
	a1 := &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}
	a2 := &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}
	a3 := &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}
	other := &net.TCPAddr{IP: net.ParseIP("127.0.1.1")} // another /24
	type send struct {
		from *net.TCPAddr
		code int
	}
	for _, tc := range []struct {
		name   string
		limits Limits
		sends  []send
	}{
		{"per address", Limits{PerAddress: 3}, []send{
			{a1, 250}, {a1, 250}, {a1, 250}, {a1, 450}, {a1, 450}, {a2, 250}, {a2, 250}, {a2, 250}, {a2, 450},
		}},
		{"per network", Limits{PerAddress: 3, PerNetwork: 5}, []send{
			{a1, 250}, {a1, 250}, {a1, 250}, {a1, 450}, {a2, 250}, {a2, 250}, {a3, 450}, {a2, 450}, {other, 250},
		}},
		{"no limits", Limits{}, []send{{a1, 250}, {a1, 250}, {a1, 250}, {a1, 250}, {a1, 250}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			tc.limits.Limiter = ratelimit.NewLocal(ratelimit.LocalConfig{Now: clock.Now})
			h := newHarness(t, options{limits: tc.limits, maxConnsPerIP: 50})
			conns := map[string]*dialog{}
			accepted := 0
			for i, s := range tc.sends {
				d := conns[s.from.IP.String()]
				if d == nil {
					d = h.dialFrom(s.from, 220)
					d.cmd(250, "EHLO client.example")
					conns[s.from.IP.String()] = d
				}
				msg := d.cmd(s.code, "MAIL FROM:<x@example.org>")
				if s.code != 250 {
					require.True(t, strings.HasPrefix(msg, "4.7.1 Too many messages"), "%d: %s", i, msg)
					continue
				}
				d.cmd(250, "RCPT TO:<%s>", receiving)
				d.data(250, testMessage("x@example.org", "rated\r\n"))
				accepted++
			}
			require.Len(t, h.acc.accepted(), accepted, "nothing beyond the rates")

			// A minute later the buckets are full again.
			clock.Advance(RatePeriod)
			d := conns["127.0.0.1"]
			d.cmd(250, "MAIL FROM:<x@example.org>")
			d.cmd(250, "RSET")
		})
	}
}

// TestReturnPathRate: the return paths of one team take a few recipients
// a minute (450 4.7.1 beyond), apart from its receiving domains, which
// still receive.
func TestReturnPathRate(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, options{limits: Limits{ReturnPath: 2,
		Limiter: ratelimit.NewLocal(ratelimit.LocalConfig{Now: clock.Now})}})
	d := h.dial()
	d.cmd(250, "EHLO client.example")
	for range 2 {
		d.cmd(250, "MAIL FROM:<>")
		d.cmd(250, "RCPT TO:<%s>", returnPath)
		d.cmd(250, "RCPT TO:<%s>", returnPath) // the same mailbox: one copy, not counted again
		d.data(250, testMessage("mailer-daemon@example.org", "bounce\r\n"))
	}
	d.cmd(250, "MAIL FROM:<>")
	require.True(t, strings.HasPrefix(d.cmd(450, "RCPT TO:<%s>", returnPath), "4.7.1 "))
	d.cmd(250, "RCPT TO:<%s>", receiving)
	d.data(250, testMessage("x@example.org", "to the receiving domain\r\n"))
	got := h.acc.accepted()
	require.Len(t, got, 3)
	require.Equal(t, receiving, got[2].Recipients[0].Address, "only the receiving recipient")
	require.Len(t, got[2].Recipients, 1)

	// One network's use does not hold back another's reports: each of
	// nine more /24s takes its two, and then the team's ceiling of ten
	// times the rate (2 already taken by 127.0.0.0/24) is reached.
	for n := 1; n <= 9; n++ {
		d := h.dialFrom(&net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.%d.1", n))}, 220)
		d.cmd(250, "EHLO client.example")
		for range 2 {
			d.cmd(250, "MAIL FROM:<>")
			d.cmd(250, "RCPT TO:<%s>", returnPath)
			d.cmd(250, "RSET")
		}
	}
	d = h.dialFrom(&net.TCPAddr{IP: net.ParseIP("127.0.10.1")}, 220)
	d.cmd(250, "EHLO client.example")
	d.cmd(250, "MAIL FROM:<>")
	require.True(t, strings.HasPrefix(d.cmd(450, "RCPT TO:<%s>", returnPath), "4.7.1 "), "the team's ceiling")
}

// fakeUsage reports fixed usage per team.
type fakeUsage struct {
	mu    sync.Mutex
	usage map[uuid.UUID]inmail.Usage
}

func (f *fakeUsage) InboundUsage(_ context.Context, team uuid.UUID, _ time.Time) (inmail.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usage[team], nil
}

// TestBudgetAtRCPT: a recipient of a team whose budget is full is refused
// with 452 4.2.2 at RCPT; the team's return paths, which the budget does
// not cover, and another team's domain still take mail.
func TestBudgetAtRCPT(t *testing.T) {
	otherTeam := uuid.MustParse("0193e5a0-0000-7000-8000-0000000000dd")
	usage := &fakeUsage{usage: map[uuid.UUID]inmail.Usage{teamID: {Messages: 10}, otherTeam: {Messages: 9}}}
	h := newHarness(t, options{budget: inmail.Budget{DailyMessages: 10, Usage: usage}})
	h.router.mu.Lock()
	h.router.routes["info@other.example"] = inmail.Route{Kind: inmail.RouteReceiving, TeamID: otherTeam, DomainID: uuid.New()}
	h.router.mu.Unlock()
	d := h.dial()
	d.cmd(250, "EHLO client.example")
	d.cmd(250, "MAIL FROM:<x@example.org>")
	require.True(t, strings.HasPrefix(d.cmd(452, "RCPT TO:<%s>", receiving), "4.2.2 "))
	d.cmd(250, "RCPT TO:<info@other.example>")
	d.cmd(250, "RCPT TO:<%s>", returnPath)
	d.data(250, testMessage("x@example.org", "hi\r\n"))
	got := h.acc.accepted()
	require.Len(t, got, 1)
	require.Len(t, got[0].Recipients, 2)
}

// overBudget is an Acceptor that finds every message over its team's
// budget, as the store's does when racing transactions took the rest.
type overBudget struct{}

func (overBudget) Accept(context.Context, inmail.Message) error {
	return fmt.Errorf("accepting for team %s: %w", teamID, inmail.ErrOverBudget)
}

// TestOverBudgetAtDATA: a message the Acceptor finds over budget is
// answered 452 4.2.2 (try later), not a generic failure.
func TestOverBudgetAtDATA(t *testing.T) {
	router := &fakeRouter{routes: map[string]inmail.Route{receiving: {Kind: inmail.RouteReceiving, TeamID: teamID}}}
	srv, err := New(Config{Hostname: "mx.posthaste.test", Resolver: dnstest.NewServer(t).Resolver()}, router,
		overBudget{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	h := &harness{t: t, addr: ln.Addr().String()}
	d := h.dial()
	d.cmd(250, "EHLO client.example")
	d.cmd(250, "MAIL FROM:<x@example.org>")
	d.cmd(250, "RCPT TO:<%s>", receiving)
	require.True(t, strings.HasPrefix(d.data(452, testMessage("x@example.org", "hi\r\n")), "4.2.2 "))
}
