package ippool_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

func addr(ip, host string) ippool.Address {
	return ippool.Address{IP: netip.MustParseAddr(ip), Hostname: host}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    []ippool.Pool
		wantErr string
	}{
		{spec: "", want: nil},
		{spec: "shared=203.0.113.5@mta1.example.com", want: []ippool.Pool{
			{Name: "shared", Addresses: []ippool.Address{addr("203.0.113.5", "mta1.example.com")}}}},
		{spec: " shared = 203.0.113.5@MTA1.Example.com. ; acme=203.0.113.9@mta9.example.com, 2001:db8::10@mta10.example.com ;",
			want: []ippool.Pool{
				{Name: "shared", Addresses: []ippool.Address{addr("203.0.113.5", "mta1.example.com")}},
				{Name: "acme", Addresses: []ippool.Address{addr("203.0.113.9", "mta9.example.com"),
					addr("2001:db8::10", "mta10.example.com")}}}},
		{spec: "a=::ffff:192.0.2.1@m.example.com", want: []ippool.Pool{
			{Name: "a", Addresses: []ippool.Address{addr("192.0.2.1", "m.example.com")}}}},
		{spec: ";", wantErr: "names no pool"},
		{spec: "shared", wantErr: "must be name="},
		{spec: "Shared=203.0.113.5@mta1.example.com", wantErr: "lower-case"},
		{spec: strings.Repeat("a", 33) + "=203.0.113.5@mta1.example.com", wantErr: "1 to 32"},
		{spec: "a_b=203.0.113.5@mta1.example.com", wantErr: "pool name"},
		{spec: "shared=", wantErr: "has no address"},
		{spec: "shared=203.0.113.5", wantErr: "address@ehlo-name"},
		{spec: "shared=203.0.113.500@mta1.example.com", wantErr: "not an IP address"},
		{spec: "shared=fe80::1%eth0@mta1.example.com", wantErr: "not an IP address"},
		{spec: "shared=0.0.0.0@mta1.example.com", wantErr: "cannot be a source address"},
		{spec: "shared=224.0.0.1@mta1.example.com", wantErr: "cannot be a source address"},
		{spec: "shared=203.0.113.5@mta1", wantErr: "fully qualified"},
		{spec: "shared=203.0.113.5@mta_1.example.com", wantErr: "host name"},
		{spec: "shared=203.0.113.5@-mta.example.com", wantErr: "host name"},
		{spec: "shared=203.0.113.5@mta1..example.com", wantErr: "host name"},
		{spec: "shared=203.0.113.5@", wantErr: "fully qualified"},
		{spec: "a=203.0.113.5@m.example.com;a=203.0.113.6@n.example.com", wantErr: "named twice"},
		{spec: "a=203.0.113.5@m.example.com;b=203.0.113.5@n.example.com", wantErr: "already in pool a"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ippool.Parse(tc.spec)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "shared=203.0.113.5@mta1.example.com",
		"shared=203.0.113.5@mta1.example.com;acme=203.0.113.9@mta9.example.com,203.0.113.10@mta10.example.com",
		"a=::1@x.y", "a=1.2.3.4@", "=;=,@", "a=fe80::1%x@h.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		pools, err := ippool.Parse(spec)
		if err != nil {
			return
		}
		// What parses is valid, and its canonical form parses to itself.
		var parts []string
		seen := map[netip.Addr]bool{}
		for _, p := range pools {
			if err := ippool.ValidName(p.Name); err != nil {
				t.Fatalf("invalid name accepted: %v", err)
			}
			if len(p.Addresses) == 0 {
				t.Fatalf("pool %s without address", p.Name)
			}
			var as []string
			for _, a := range p.Addresses {
				if !a.IP.IsValid() || a.IP.Zone() != "" || seen[a.IP] {
					t.Fatalf("bad or repeated address %v", a.IP)
				}
				seen[a.IP] = true
				if h, err := ippool.NormalizeHostname(a.Hostname); err != nil || h != a.Hostname {
					t.Fatalf("hostname %q not normalized: %v", a.Hostname, err)
				}
				as = append(as, a.String())
			}
			parts = append(parts, p.Name+"="+strings.Join(as, ","))
		}
		again, err := ippool.Parse(strings.Join(parts, ";"))
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", strings.Join(parts, ";"), err)
		}
		require.Equal(t, pools, again)
	})
}

func TestDefaultName(t *testing.T) {
	acme := ippool.Pool{Name: "acme"}
	shared := ippool.Pool{Name: "shared"}
	require.Equal(t, "shared", ippool.DefaultName(nil))
	require.Equal(t, "acme", ippool.DefaultName([]ippool.Pool{acme}), "the first pool without a shared one")
	require.Equal(t, "shared", ippool.DefaultName([]ippool.Pool{acme, shared}))
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
	d, err := ippool.NewDeliverer(mta.Config{Resolver: dns.Resolver(), Port: mx.Port(),
		Egress: egress.Policy{AllowPrivate: true}},
		[]ippool.Address{addr("127.0.0.2", "mta2.test"), addr("127.0.0.3", "mta3.test")}, ippool.Warmup{})
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

func TestNewDelivererNeedsAnAddress(t *testing.T) {
	_, err := ippool.NewDeliverer(mta.Config{}, nil, ippool.Warmup{})
	require.Error(t, err)
}
