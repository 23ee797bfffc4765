package config

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadEgress(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, Egress{}, c.Egress, "the default refuses private targets")

	c, err = Load(env(map[string]string{"POSTHASTE_EGRESS_ALLOW": "10.0.0.5, 192.168.10.0/24"}))
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32"), netip.MustParsePrefix("192.168.10.0/24")},
		c.Egress.Allow)

	_, err = Load(env(map[string]string{"POSTHASTE_EGRESS_ALLOW": "relay.internal"}))
	require.ErrorContains(t, err, "POSTHASTE_EGRESS_ALLOW")
	require.ErrorContains(t, err, `"relay.internal" is not an IP address`)
}
