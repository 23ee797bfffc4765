// Package ippool defines IP pools: named sets of source addresses from
// which mail is delivered, each address with the EHLO name its PTR record
// gives. It holds the one definition of a valid pool name and EHLO name,
// parses POSTHASTE_IP_POOLS and names the default pool. It also defines the
// warm-up of new addresses: the daily schedule (Schedule, parsed from
// POSTHASTE_WARMUP_SCHEDULE) and the Gate that grants the allowances; the
// counters themselves live in the database. Package pooldeliver spreads
// the deliveries of a pool over its addresses within those allowances; it
// is a package of its own so that this one links no SMTP client.
//
// Teams and domains are assigned pools in the database; the default pool
// sends everything else. Each pool has its own delivery task queues
// (workflows.DeliverTaskQueue), so that only workers owning its addresses
// deliver its mail.
package ippool

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Default is the name of the default pool: the pool of teams and domains
// assigned none, when POSTHASTE_IP_POOLS names it or is unset.
const Default = "shared"

// Pool is a named set of source addresses.
type Pool struct {
	Name      string
	Addresses []Address
}

// Address is one source address and the name given in EHLO from it.
type Address struct {
	IP netip.Addr
	// Hostname is the EHLO name: the name the address's PTR record gives,
	// whose A or AAAA record points back at it (forward-confirmed reverse
	// DNS, which receivers check).
	Hostname string
}

func (a Address) String() string { return a.IP.String() + "@" + a.Hostname }

var nameRE = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ValidName checks a pool name: 1 to 32 lower-case letters, digits and
// hyphens (migration 00030 checks the same in ip_pool).
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("pool name %q must be 1 to 32 lower-case letters, digits and hyphens", name)
	}
	return nil
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// NormalizeHostname checks an EHLO name and returns it in lower case
// without a trailing dot: a fully qualified host name (RFC 5321 §4.1.1.1:
// the client's primary host name), at least two DNS labels of letters,
// digits and hyphens, at most 253 characters.
func NormalizeHostname(h string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(h), ".")
	labels := strings.Split(n, ".")
	if len(n) > 253 || len(labels) < 2 {
		return "", fmt.Errorf("EHLO name %q must be a fully qualified host name such as mta1.example.com", h)
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return "", fmt.Errorf("EHLO name %q must be a host name (letters, digits, hyphens and dots)", h)
		}
	}
	return n, nil
}

// ParseAddress reads "ip@ehlo-name", checking both parts: the address must
// be a unicast IPv4 or IPv6 address without a zone.
func ParseAddress(s string) (Address, error) {
	ipText, host, ok := strings.Cut(strings.TrimSpace(s), "@")
	if !ok {
		return Address{}, fmt.Errorf("%q must be address@ehlo-name", s)
	}
	ip, err := ParseIP(strings.TrimSpace(ipText))
	if err != nil {
		return Address{}, err
	}
	h, err := NormalizeHostname(strings.TrimSpace(host))
	if err != nil {
		return Address{}, err
	}
	return Address{IP: ip, Hostname: h}, nil
}

// ParseIP reads a source address: a unicast IPv4 or IPv6 address without
// a zone (an IPv4-mapped IPv6 address is taken as IPv4).
func ParseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	ip = ip.Unmap()
	if ip.IsUnspecified() || ip.IsMulticast() || (ip.Is4() && ip == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return netip.Addr{}, fmt.Errorf("%s cannot be a source address", ip)
	}
	return ip, nil
}

// Parse reads POSTHASTE_IP_POOLS: pools separated by semicolons, each
// "name=ip@ehlo-name,ip@ehlo-name...". Spaces around items are ignored; an
// empty spec is no pool. A pool name or an address may appear once.
func Parse(spec string) ([]Pool, error) {
	var pools []Pool
	seenPool := map[string]bool{}
	seenIP := map[netip.Addr]string{}
	for _, item := range strings.Split(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, list, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q must be name=address@ehlo-name,...", item)
		}
		name = strings.TrimSpace(name)
		if err := ValidName(name); err != nil {
			return nil, err
		}
		if seenPool[name] {
			return nil, fmt.Errorf("pool %q is named twice", name)
		}
		seenPool[name] = true
		p := Pool{Name: name}
		for _, a := range strings.Split(list, ",") {
			if strings.TrimSpace(a) == "" {
				continue
			}
			addr, err := ParseAddress(a)
			if err != nil {
				return nil, fmt.Errorf("pool %s: %w", name, err)
			}
			if other, dup := seenIP[addr.IP]; dup {
				return nil, fmt.Errorf("pool %s: address %s is already in pool %s", name, addr.IP, other)
			}
			seenIP[addr.IP] = name
			p.Addresses = append(p.Addresses, addr)
		}
		if len(p.Addresses) == 0 {
			return nil, fmt.Errorf("pool %s has no address", name)
		}
		pools = append(pools, p)
	}
	if len(pools) == 0 && strings.TrimSpace(spec) != "" {
		return nil, errors.New("names no pool")
	}
	return pools, nil
}

// DefaultName is the name of the default pool among pools (in the order
// of POSTHASTE_IP_POOLS): Default when it is there or pools is empty,
// else the first.
func DefaultName(pools []Pool) string {
	for _, p := range pools {
		if p.Name == Default {
			return Default
		}
	}
	if len(pools) == 0 {
		return Default
	}
	return pools[0].Name
}

// Gate grants the daily warm-up allowances of addresses (see Schedule);
// a pooldeliver.Deliverer asks it.
type Gate interface {
	// Take returns how many of n messages (0 to n) address a may send
	// now, counting them as sent.
	Take(ctx context.Context, a Address, n int) (int, error)
}
