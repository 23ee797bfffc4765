package pooldeliver_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/pooldeliver"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

func addr(ip, host string) ippool.Address {
	return ippool.Address{IP: netip.MustParseAddr(ip), Hostname: host}
}

// A pool's Deliverer sends from each of its addresses in turn, binding
// the connection to the address and saying the address's EHLO name: the
// recipient MX sees both.
func TestDelivererBindsEachAddress(t *testing.T) {
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		require.NoError(t, err, "this test needs %s on loopback", ip)
		_ = ln.Close()
	}
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns := dnstest.NewServer(t)
	dns.AddMX("example.test", "mx.example.test", 10)
	dns.AddA("mx.example.test", "127.0.0.1")
	d, err := pooldeliver.New(mta.Config{Resolver: dns.Resolver(), Port: mx.Port(),
		Egress: egress.Policy{AllowPrivate: true}},
		[]ippool.Address{addr("127.0.0.2", "mta2.test"), addr("127.0.0.3", "mta3.test")}, pooldeliver.Warmup{})
	require.NoError(t, err)
	defer d.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sources []string
	for range 4 {
		res := d.Deliver(ctx, "example.test", mta.Envelope{From: "b@rp.test", To: []string{"x@example.test"},
			Data: []byte("From: a@sender.test\r\n\r\nhi\r\n")})
		require.Equal(t, mta.Delivered, res[0].Status, res[0].Message)
		sources = append(sources, res[0].SourceIP)
	}
	require.Equal(t, []string{"127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"}, sources)

	seen := map[string]string{} // client address → EHLO name
	for _, m := range mx.Messages() {
		host, _, err := net.SplitHostPort(m.RemoteAddr)
		require.NoError(t, err)
		seen[host] = m.Helo
	}
	require.Equal(t, map[string]string{"127.0.0.2": "mta2.test", "127.0.0.3": "mta3.test"}, seen)
	require.Equal(t, 2, mx.Connections(), "each address reuses its own connection")
}

func TestNewNeedsAnAddress(t *testing.T) {
	_, err := pooldeliver.New(mta.Config{}, nil, pooldeliver.Warmup{})
	require.Error(t, err)
}

type failingGate struct{}

func (failingGate) Take(context.Context, ippool.Address, int) (int, error) {
	return 0, errors.New("database down")
}

// When the allowance cannot be checked, nothing is sent and every
// recipient is deferred with a reply that does not tell the error, even
// with a Spill pool.
func TestDelivererDefersWhenTheGateFails(t *testing.T) {
	spill, err := pooldeliver.New(mta.Config{}, []ippool.Address{addr("127.0.0.4", "mta4.test")}, pooldeliver.Warmup{})
	require.NoError(t, err)
	d, err := pooldeliver.New(mta.Config{}, []ippool.Address{addr("127.0.0.2", "mta2.test")},
		pooldeliver.Warmup{Gate: failingGate{}, Spill: spill})
	require.NoError(t, err)
	res := d.Deliver(context.Background(), "example.test", mta.Envelope{From: "b@rp.test", To: []string{"x@example.test", "y@example.test"}})
	require.Len(t, res, 2)
	for _, r := range res {
		require.Equal(t, mta.Deferred, r.Status)
		require.Equal(t, 451, r.Code)
		require.Equal(t, "4.3.0", r.EnhancedCode)
		require.NotContains(t, r.Message, "database")
	}
}
