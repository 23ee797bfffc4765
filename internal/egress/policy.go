package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy decides which addresses outbound connections made on a user's
// behalf may reach: the HTTP requests of a Client and the MX connections of
// package mta. The zero Policy refuses every Blocked address.
type Policy struct {
	// AllowPrivate allows every address (POSTHASTE_ALLOW_PRIVATE_EGRESS):
	// for development, and operators whose peers live on their network.
	AllowPrivate bool
	// Allow lists prefixes that are allowed although Blocked
	// (POSTHASTE_EGRESS_ALLOW): a relay, an MX host or a webhook receiver
	// on the operator's own network, or the loopback peers of tests.
	Allow []netip.Prefix
}

// Allows reports whether a connection to ip may be made. An IPv4-mapped
// IPv6 address is judged as the IPv4 address it carries.
func (p Policy) Allows(ip netip.Addr) bool {
	if p.AllowPrivate {
		return true
	}
	ip = ip.WithZone("").Unmap()
	for _, pr := range p.Allow {
		if pr.Contains(ip) {
			return true
		}
	}
	return !Blocked(ip)
}

// ParseAllowList parses a comma-separated list of IP addresses and CIDR
// prefixes ("10.0.0.5, 192.168.10.0/24, fd00::/8"), the form of
// POSTHASTE_EGRESS_ALLOW. An address stands for itself alone; a prefix
// must have no bits set past its length.
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR prefix", item)
			}
			if p.Masked() != p {
				return nil, fmt.Errorf("%q has bits set past its prefix length; did you mean %s?", item, p.Masked())
			}
			if p.Addr().Is4In6() {
				// Allows judges IPv4-mapped addresses as IPv4. A masked
				// prefix of them is at least 96 bits long.
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an IP address", item)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
