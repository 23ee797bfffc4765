package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadInbound(t *testing.T) {
	c, err := Load(env(map[string]string{"POSTHASTE_HOSTNAME": "out.example"}))
	require.NoError(t, err)
	require.Equal(t, Inbound{Hostname: "out.example", MaxMessageBytes: 46137344, MaxRecipients: 100,
		MaxConns: 200, MaxConnsPerIP: 10, MaxConnsPerNet: 40, ConnReservePercent: 20, SessionTimeout: 20 * time.Minute,
		MaxIdleCommands: 30, RatePerAddress: 30, RatePerNetwork: 120, RateReturnPath: 60,
		DailyMessages: 10000, StorageBytes: 1 << 30, WorkerSlots: 4}, c.Inbound, "unset listen: each command's default")

	c, err = Load(env(map[string]string{"POSTHASTE_HOSTNAME": "out.example",
		"POSTHASTE_INBOUND_LISTEN": "0.0.0.0:2525", "POSTHASTE_INBOUND_HOSTNAME": "mx.example",
		"POSTHASTE_INBOUND_MAX_MESSAGE_BYTES": "1000", "POSTHASTE_INBOUND_MAX_RECIPIENTS": "5",
		"POSTHASTE_INBOUND_MAX_CONNS": "7", "POSTHASTE_INBOUND_MAX_CONNS_PER_IP": "2",
		"POSTHASTE_INBOUND_MAX_CONNS_PER_NET": "3", "POSTHASTE_INBOUND_CONN_RESERVE_PERCENT": "50",
		"POSTHASTE_INBOUND_SESSION_TIMEOUT": "90s", "POSTHASTE_INBOUND_MAX_IDLE_COMMANDS": "4",
		"POSTHASTE_INBOUND_RATE_PER_ADDRESS": "0", "POSTHASTE_INBOUND_RATE_PER_NETWORK": "500",
		"POSTHASTE_INBOUND_RATE_RETURN_PATH": "5", "POSTHASTE_INBOUND_DAILY_MESSAGES": "0",
		"POSTHASTE_INBOUND_STORAGE_BYTES": "5368709120", "POSTHASTE_INBOUND_WORKER_SLOTS": "3"}))
	require.NoError(t, err)
	require.Equal(t, Inbound{Listen: "0.0.0.0:2525", Hostname: "mx.example", MaxMessageBytes: 1000, MaxRecipients: 5,
		MaxConns: 7, MaxConnsPerIP: 2, MaxConnsPerNet: 3, ConnReservePercent: 50, SessionTimeout: 90 * time.Second,
		MaxIdleCommands: 4, RatePerNetwork: 500, RateReturnPath: 5, StorageBytes: 5 << 30, WorkerSlots: 3}, c.Inbound)

	for k, v := range map[string]string{"POSTHASTE_INBOUND_LISTEN": "25", "POSTHASTE_INBOUND_MAX_CONNS": "0",
		"POSTHASTE_INBOUND_MAX_MESSAGE_BYTES": "big", "POSTHASTE_INBOUND_CONN_RESERVE_PERCENT": "91",
		"POSTHASTE_INBOUND_MAX_IDLE_COMMANDS": "0", "POSTHASTE_INBOUND_SESSION_TIMEOUT": "soon",
		"POSTHASTE_INBOUND_RATE_PER_ADDRESS": "-1", "POSTHASTE_INBOUND_STORAGE_BYTES": "1TB", "POSTHASTE_INBOUND_WORKER_SLOTS": "0"} {
		_, err := Load(env(map[string]string{k: v}))
		require.ErrorContains(t, err, k)
	}
}

func TestLoadFBLDomains(t *testing.T) {
	c, err := Load(env(map[string]string{"POSTHASTE_FBL_DOMAINS": " Yahoo.com, hotmail.com.,,"}))
	require.NoError(t, err)
	require.Equal(t, []string{"yahoo.com", "hotmail.com"}, c.Inbound.FBLDomains)
}
