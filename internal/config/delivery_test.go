package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadTransportSecurity(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.True(t, c.Delivery.MTASTS)
	require.Equal(t, 443, c.Delivery.MTASTSPort)
	require.True(t, c.Delivery.DANE)

	c, err = Load(env(map[string]string{"POSTHASTE_MTA_STS": "false", "POSTHASTE_MTA_STS_PORT": "8443", "POSTHASTE_DANE": "false"}))
	require.NoError(t, err)
	require.False(t, c.Delivery.MTASTS)
	require.Equal(t, 8443, c.Delivery.MTASTSPort)
	require.False(t, c.Delivery.DANE)

	for name, val := range map[string]string{"POSTHASTE_MTA_STS_PORT": "70000", "POSTHASTE_DANE": "maybe", "POSTHASTE_MTA_STS": "on"} {
		_, err = Load(env(map[string]string{name: val}))
		require.ErrorContains(t, err, name)
	}
}
