package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadInbound(t *testing.T) {
	c, err := Load(env(map[string]string{"POSTHASTE_HOSTNAME": "out.example"}))
	require.NoError(t, err)
	require.Equal(t, Inbound{Hostname: "out.example", MaxMessageBytes: 46137344, MaxRecipients: 100,
		MaxConns: 200, MaxConnsPerIP: 10, WorkerSlots: 4}, c.Inbound, "unset listen: each command's default")

	c, err = Load(env(map[string]string{"POSTHASTE_HOSTNAME": "out.example",
		"POSTHASTE_INBOUND_LISTEN": "0.0.0.0:2525", "POSTHASTE_INBOUND_HOSTNAME": "mx.example",
		"POSTHASTE_INBOUND_MAX_MESSAGE_BYTES": "1000", "POSTHASTE_INBOUND_MAX_RECIPIENTS": "5",
		"POSTHASTE_INBOUND_MAX_CONNS": "7", "POSTHASTE_INBOUND_MAX_CONNS_PER_IP": "2",
		"POSTHASTE_INBOUND_WORKER_SLOTS": "3"}))
	require.NoError(t, err)
	require.Equal(t, Inbound{Listen: "0.0.0.0:2525", Hostname: "mx.example", MaxMessageBytes: 1000, MaxRecipients: 5,
		MaxConns: 7, MaxConnsPerIP: 2, WorkerSlots: 3}, c.Inbound)

	for k, v := range map[string]string{"POSTHASTE_INBOUND_LISTEN": "25", "POSTHASTE_INBOUND_MAX_CONNS": "0",
		"POSTHASTE_INBOUND_MAX_MESSAGE_BYTES": "big", "POSTHASTE_INBOUND_WORKER_SLOTS": "0"} {
		_, err := Load(env(map[string]string{k: v}))
		require.ErrorContains(t, err, k)
	}
}
