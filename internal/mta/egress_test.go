package mta

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

// only returns an egress policy that allows the given loopback addresses
// and nothing else special: other loopback addresses stand for the private
// and metadata addresses a domain's MX could point at.
func only(ips ...string) egress.Policy {
	var p egress.Policy
	for _, ip := range ips {
		a := netip.MustParseAddr(ip)
		p.Allow = append(p.Allow, netip.PrefixFrom(a, a.BitLen()))
	}
	return p
}

// A domain whose MX resolves to a loopback (private, metadata...) address
// is refused before any connection: the MX listening there never hears of
// it, and the outcome says why without naming the address.
func TestEgressPolicyRefusesPrivateMX(t *testing.T) {
	d, mx := newMX(t, smtptest.Options{})
	c := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.Egress = egress.Policy{} })

	to := []string{"a@example.test", "b@example.test"}
	got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: to, Data: []byte(body)})
	requireResults(t, got, to, want{Refused, 550, "5.7.1"}, want{Refused, 550, "5.7.1"})
	require.Equal(t, "MX host mx.example.test resolves only to loopback, private, link-local or cloud metadata "+
		"addresses, which the egress policy refuses", got[0].Message)
	require.NotContains(t, got[0].Message, "127.0.0.1")
	require.Empty(t, got[0].RemoteServer)
	require.Zero(t, mx.Connections(), "nothing was dialed")

	// The implicit MX (RFC 5321 §5.1) and an address literal are checked
	// alike.
	d.AddA("bare.test", "127.0.0.1")
	got = c.Deliver(testContext(t), "bare.test", Envelope{From: sender, To: []string{"a@bare.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"a@bare.test"}, want{Refused, 550, "5.7.1"})
	require.Contains(t, got[0].Message, "MX host bare.test resolves only to")
	got = c.Deliver(testContext(t), "[127.0.0.1]", Envelope{From: sender, To: []string{"a@[127.0.0.1]"}, Data: []byte(body)})
	requireResults(t, got, []string{"a@[127.0.0.1]"}, want{Refused, 550, "5.7.1"})
	require.Contains(t, got[0].Message, "address 127.0.0.1 is a loopback")
	require.Zero(t, mx.Connections())

	// Allowing private targets, or listing the address, delivers.
	for _, p := range []egress.Policy{{AllowPrivate: true}, only("127.0.0.1")} {
		c := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.Egress = p })
		got := c.Deliver(testContext(t), "example.test", Envelope{From: sender, To: to[:1], Data: []byte(body)})
		requireResults(t, got, to[:1], delivered)
	}
	require.Len(t, mx.Messages(), 2)
}

// Every address is checked at connect time: a host with a refused and an
// allowed address is reached at the allowed one, and a refused MX host
// gives way to the next one.
func TestEgressPolicyChecksEachAddress(t *testing.T) {
	requireLoopbackAlias(t, "127.0.0.2")
	refused := smtptest.NewServer(t, smtptest.Options{})
	port := refused.Port()
	allowed := smtptest.NewServer(t, smtptest.Options{Addr: net.JoinHostPort("127.0.0.2", strconv.Itoa(port))})
	d := dnstest.NewServer(t)
	d.AddMX("two.test", "mx.two.test", 10)
	d.AddA("mx.two.test", "127.0.0.1")
	d.AddA("mx.two.test", "127.0.0.2")
	d.AddMX("next.test", "inside.next.test", 10)
	d.AddMX("next.test", "outside.next.test", 20)
	d.AddA("inside.next.test", "127.0.0.1")
	d.AddA("outside.next.test", "127.0.0.2")
	c := newClient(t, d, port, func(cfg *Config) { cfg.Egress = only("127.0.0.2") })

	for _, domain := range []string{"two.test", "next.test"} {
		to := []string{"a@" + domain}
		got := c.Deliver(testContext(t), domain, Envelope{From: sender, To: to, Data: []byte(body)})
		requireResults(t, got, to, delivered)
	}
	require.Len(t, allowed.Messages(), 2)
	require.Zero(t, refused.Connections(), "the refused address was never connected to")
}

// A refused host next to one that is down is a deferral, not a refusal:
// the other host may come back.
func TestEgressPolicyRefusedAndDownDefers(t *testing.T) {
	requireLoopbackAlias(t, "127.0.0.2")
	mx := smtptest.NewServer(t, smtptest.Options{})
	d := dnstest.NewServer(t)
	d.AddMX("mixed.test", "inside.mixed.test", 10)
	d.AddMX("mixed.test", "down.mixed.test", 20)
	d.AddA("inside.mixed.test", "127.0.0.1")
	d.AddA("down.mixed.test", "127.0.0.2") // allowed, nothing listens there
	c := newClient(t, d, mx.Port(), func(cfg *Config) { cfg.Egress = only("127.0.0.2") })

	got := c.Deliver(testContext(t), "mixed.test", Envelope{From: sender, To: []string{"a@mixed.test"}, Data: []byte(body)})
	requireResults(t, got, []string{"a@mixed.test"}, want{Deferred, 451, "4.4.1"})
	require.Equal(t, "down.mixed.test", got[0].RemoteServer)
	require.Zero(t, mx.Connections())
}

func TestDialGuard(t *testing.T) {
	g := &dialGuard{policy: only("127.0.0.2")}
	require.False(t, g.refusedAll(), "nothing tried yet")
	require.ErrorIs(t, g.control("tcp4", "127.0.0.1:25", nil), errRefusedAddr)
	require.ErrorIs(t, g.control("tcp4", "169.254.169.254:25", nil), errRefusedAddr)
	require.ErrorIs(t, g.control("tcp6", "[::ffff:10.0.0.1]:25", nil), errRefusedAddr)
	require.ErrorIs(t, g.control("tcp6", "not an address", nil), errRefusedAddr)
	require.True(t, g.refusedAll())
	require.NoError(t, g.control("tcp4", "127.0.0.2:25", nil))
	require.NoError(t, g.control("tcp4", "93.184.215.14:25", nil), "a public address")
	require.False(t, g.refusedAll())
}
