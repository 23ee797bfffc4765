package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBlocked(t *testing.T) {
	tests := []struct {
		ip      string
		blocked bool
	}{
		// IPv4 special-purpose ranges.
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"100.64.0.1", true},
		{"100.100.100.200", true}, // Alibaba Cloud metadata
		{"100.127.255.255", true},
		{"127.0.0.1", true},
		{"127.255.0.1", true},
		{"169.254.0.1", true},
		{"169.254.169.254", true}, // AWS, GCP, Azure metadata
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.0.0.192", true}, // Oracle Cloud metadata
		{"192.0.2.1", true},
		{"192.88.99.1", true},
		{"192.168.1.1", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		{"168.63.129.16", true}, // Azure wireserver

		// IPv4 public neighbours of those ranges.
		{"1.1.1.1", false},
		{"8.8.8.8", false},
		{"9.255.255.255", false},
		{"11.0.0.0", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"126.255.255.255", false},
		{"128.0.0.0", false},
		{"169.253.255.255", false},
		{"169.255.0.0", false},
		{"172.15.255.255", false},
		{"172.32.0.0", false},
		{"192.0.1.1", false},
		{"192.167.255.255", false},
		{"192.169.0.0", false},
		{"198.17.255.255", false},
		{"198.20.0.0", false},
		{"223.255.255.255", false},
		{"93.184.215.14", false},
		{"168.63.129.17", false},

		// IPv6 special-purpose ranges.
		{"::", true},
		{"::1", true},
		{"::10.0.0.1", true}, // IPv4-compatible, deprecated
		{"::8.8.8.8", true},
		{"100::1", true},
		{"2001::1", true},       // Teredo
		{"2001:2::1", true},     // benchmarking
		{"2001:db8::1", true},   // documentation
		{"3fff::1", true},       // documentation
		{"5f00::1", true},       // SRv6
		{"64:ff9b:1::1", true},  // local-use NAT64
		{"fc00::1", true},       // unique local
		{"fd12:3456::1", true},  // unique local
		{"fd00:ec2::254", true}, // AWS metadata
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"febf::1", true},
		{"fec0::1", true}, // site-local
		{"ff02::1", true},
		{"ff0e::1", true},

		// IPv4 carried in IPv6 is judged as IPv4.
		{"::ffff:10.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:8.8.8.8", false},
		{"::ffff:0:10.0.0.1", true}, // IPv4-translated
		{"::ffff:0:8.8.8.8", false},
		{"64:ff9b::10.0.0.1", true}, // NAT64 of private
		{"64:ff9b::a9fe:a9fe", true},
		{"64:ff9b::7f00:1", true},
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
		{"2002:a00:1::1", true},     // 6to4 of 10.0.0.1
		{"2002:7f00:1::", true},     // 6to4 of 127.0.0.1
		{"2002:808:808::1", false},  // 6to4 of 8.8.8.8

		// IPv6 public.
		{"2606:4700:4700::1111", false},
		{"2001:4860:4860::8888", false},
		{"2a00:1450:4001:80b::200e", false},
		{"2001:200::1", false}, // just past 2001::/23
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			require.Equal(t, tt.blocked, Blocked(ip))
		})
	}
	require.True(t, Blocked(netip.Addr{}), "the invalid Addr")
}
