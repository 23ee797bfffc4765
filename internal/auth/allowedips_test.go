package auth_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/auth"
)

func TestParseAllowedIPs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string // nil: an error
	}{
		{[]string{}, []string{}},
		{[]string{"203.0.113.0/24", " 2001:db8::/32 "}, []string{"203.0.113.0/24", "2001:db8::/32"}},
		{[]string{"203.0.113.77/24"}, []string{"203.0.113.0/24"}},
		{[]string{"198.51.100.7", "2001:db8::1"}, []string{"198.51.100.7/32", "2001:db8::1/128"}},
		{[]string{"::ffff:203.0.113.0/120"}, []string{"203.0.113.0/24"}},
		{[]string{"10.0.0.0/8", "10.1.2.3/8"}, []string{"10.0.0.0/8"}},
		{[]string{"203.0.113.0/33"}, nil},
		{[]string{"office"}, nil},
		{[]string{""}, nil},
		{[]string{"fe80::1%eth0"}, nil},
		{[]string{"fe80::1%eth0/64"}, nil},
	} {
		got, err := auth.ParseAllowedIPs(tc.in)
		if tc.want == nil {
			require.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		strs := []string{}
		for _, p := range got {
			strs = append(strs, p.String())
		}
		require.Equal(t, tc.want, strs, "%q", tc.in)
	}
	many := make([]string, auth.MaxAllowedIPs+1)
	for i := range many {
		many[i] = "10.0.0.1"
	}
	_, err := auth.ParseAllowedIPs(many)
	require.Error(t, err)
}

func TestPrincipalAllowsAddr(t *testing.T) {
	open := auth.Principal{}
	require.True(t, open.AllowsAddr(netip.MustParseAddr("192.0.2.1")))
	require.True(t, open.AllowsAddr(netip.Addr{}))
	p := auth.Principal{AllowedIPs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}}
	require.True(t, p.AllowsAddr(netip.MustParseAddr("203.0.113.5")))
	require.True(t, p.AllowsAddr(netip.MustParseAddr("::ffff:203.0.113.5")), "IPv4-mapped")
	require.True(t, p.AllowsAddr(netip.MustParseAddr("2001:db8:ffff::1")))
	require.False(t, p.AllowsAddr(netip.MustParseAddr("203.0.114.5")))
	require.False(t, p.AllowsAddr(netip.Addr{}), "an unknown address is outside every range")
}

// FuzzParseAllowedIPs: every accepted range is masked and contains its
// own address.
func FuzzParseAllowedIPs(f *testing.F) {
	for _, s := range []string{"203.0.113.0/24", "2001:db8::/32", "198.51.100.7", "::ffff:1.2.3.4/128", "x", "1.2.3.4/99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := auth.ParseAllowedIPs([]string{s})
		if err != nil {
			return
		}
		require.Len(t, got, 1)
		require.Equal(t, got[0], got[0].Masked())
		require.True(t, got[0].Contains(got[0].Addr()))
		require.False(t, got[0].Addr().Is4In6())
	})
}
