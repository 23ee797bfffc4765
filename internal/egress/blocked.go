package egress

import "net/netip"

// Blocked reports whether ip is an address Posthaste must not connect to on
// a user's behalf: anything that is not a globally reachable unicast address
// (RFC 6890 and the IANA special-purpose registries), plus cloud metadata
// endpoints. IPv4 addresses embedded in IPv6 (IPv4-mapped, IPv4-translated,
// NAT64 and 6to4) are judged by the IPv4 address they carry. The invalid
// Addr is blocked.
func Blocked(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("")
	if v4, ok := embeddedIPv4(ip); ok {
		return blockedIPv4(v4)
	}
	if ip.Is4() {
		return blockedIPv4(ip)
	}
	for _, p := range blockedIPv6Prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// embeddedIPv4 returns the IPv4 address carried by an IPv4-mapped
// (::ffff:0:0/96, RFC 4291 §2.5.5.2), IPv4-translated (::ffff:0:0:0/96,
// RFC 2765 §2.1), NAT64 well-known-prefix (64:ff9b::/96, RFC 6052 §2.1) or
// 6to4 (2002::/16, RFC 3056 §2) address.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	if ip.Is4In6() {
		return ip.Unmap(), true
	}
	b := ip.As16()
	for _, p := range embeddingPrefixes96 {
		if p.Contains(ip) {
			return netip.AddrFrom4([4]byte(b[12:16])), true
		}
	}
	if sixToFour.Contains(ip) {
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func blockedIPv4(ip netip.Addr) bool {
	for _, p := range blockedIPv4Prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// The tables below are read-only.

var (
	embeddingPrefixes96 = []netip.Prefix{
		netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated, RFC 2765
		netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 well-known prefix, RFC 6052
	}
	sixToFour = netip.MustParsePrefix("2002::/16") // RFC 3056
)

var blockedIPv4Prefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network", RFC 791; includes unspecified
	netip.MustParsePrefix("10.0.0.0/8"),         // private, RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),      // shared address space (CGNAT), RFC 6598; includes Alibaba metadata 100.100.100.200
	netip.MustParsePrefix("127.0.0.0/8"),        // loopback, RFC 1122
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local, RFC 3927; includes metadata 169.254.169.254
	netip.MustParsePrefix("172.16.0.0/12"),      // private, RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),       // IETF protocol assignments, RFC 6890; includes Oracle metadata 192.0.0.192
	netip.MustParsePrefix("192.0.2.0/24"),       // documentation TEST-NET-1, RFC 5737
	netip.MustParsePrefix("192.88.99.0/24"),     // 6to4 relay anycast, RFC 7526
	netip.MustParsePrefix("192.168.0.0/16"),     // private, RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),      // benchmarking, RFC 2544
	netip.MustParsePrefix("198.51.100.0/24"),    // documentation TEST-NET-2, RFC 5737
	netip.MustParsePrefix("203.0.113.0/24"),     // documentation TEST-NET-3, RFC 5737
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast, RFC 5771
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved, RFC 1112; includes broadcast 255.255.255.255
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure platform endpoint (wireserver)
	netip.MustParsePrefix("255.255.255.255/32"), // limited broadcast, RFC 919 (also in 240/4)
}

var blockedIPv6Prefixes = []netip.Prefix{
	netip.MustParsePrefix("::/128"),            // unspecified
	netip.MustParsePrefix("::1/128"),           // loopback
	netip.MustParsePrefix("::/96"),             // IPv4-compatible, deprecated by RFC 4291 §2.5.5.1
	netip.MustParsePrefix("64:ff9b:1::/48"),    // local-use NAT64, RFC 8215
	netip.MustParsePrefix("100::/64"),          // discard-only, RFC 6666
	netip.MustParsePrefix("2001::/23"),         // IETF protocol assignments (Teredo, benchmarking 2001:2::/48, ORCHID), RFC 2928
	netip.MustParsePrefix("2001:db8::/32"),     // documentation, RFC 3849
	netip.MustParsePrefix("3fff::/20"),         // documentation, RFC 9637
	netip.MustParsePrefix("5f00::/16"),         // SRv6 SIDs, RFC 9602
	netip.MustParsePrefix("fc00::/7"),          // unique local, RFC 4193
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6 (inside fc00::/7)
	netip.MustParsePrefix("fe80::/10"),         // link-local, RFC 4291
	netip.MustParsePrefix("fec0::/10"),         // site-local, deprecated by RFC 3879
	netip.MustParsePrefix("ff00::/8"),          // multicast, RFC 4291
}
