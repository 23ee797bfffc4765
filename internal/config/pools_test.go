package config

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ippool"
)

func TestLoadIPPools(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        string
		wantPools   []string // name=ip@host,... as LogAttrs shows them
		wantDefault string
		wantErr     string
	}{
		{name: "unset", wantDefault: "shared"},
		{name: "issue example",
			spec: "shared=203.0.113.5@mta1.example.com;acme=203.0.113.9@mta9.example.com,203.0.113.10@mta10.example.com",
			wantPools: []string{"shared=203.0.113.5@mta1.example.com",
				"acme=203.0.113.9@mta9.example.com,203.0.113.10@mta10.example.com"},
			wantDefault: "shared"},
		{name: "shared named later is still the default",
			spec:      "acme=203.0.113.9@mta9.example.com;shared=203.0.113.5@mta1.example.com",
			wantPools: []string{"acme=203.0.113.9@mta9.example.com", "shared=203.0.113.5@mta1.example.com"}, wantDefault: "shared"},
		{name: "without shared the first is the default", spec: "eu=192.0.2.1@out1.example.eu;us=192.0.2.2@out1.example.us",
			wantPools: []string{"eu=192.0.2.1@out1.example.eu", "us=192.0.2.2@out1.example.us"}, wantDefault: "eu"},
		{name: "bad address", spec: "shared=203.0.113.300@mta1.example.com", wantErr: "not an IP address"},
		{name: "bad EHLO name", spec: "shared=203.0.113.5@mta 1", wantErr: "EHLO name"},
		{name: "bad pool name", spec: "Big Pool=203.0.113.5@mta1.example.com", wantErr: "pool name"},
		{name: "address twice", spec: "a=203.0.113.5@m.example.com;b=203.0.113.5@m.example.com", wantErr: "already in pool a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(map[string]string{"POSTHASTE_IP_POOLS": tc.spec}))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, "POSTHASTE_IP_POOLS")
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantDefault, c.Delivery.DefaultPool)
			require.Len(t, c.Delivery.Pools, len(tc.wantPools))
			require.Equal(t, len(tc.wantPools) > 0, len(poolsAttr(c.Delivery.Pools)) > 0)
			for i, p := range poolsAttr(c.Delivery.Pools) {
				require.Equal(t, tc.wantPools[i], p)
			}
			require.Contains(t, fmt.Sprint(c.LogAttrs()...), "default_pool")
		})
	}
	c, err := Load(env(map[string]string{"POSTHASTE_IP_POOLS": "acme=203.0.113.9@mta9.example.com"}))
	require.NoError(t, err)
	require.Equal(t, []ippool.Pool{{Name: "acme", Addresses: []ippool.Address{
		{IP: netip.MustParseAddr("203.0.113.9"), Hostname: "mta9.example.com"}}}}, c.Delivery.Pools)
}

// Whatever POSTHASTE_IP_POOLS holds, Load either accepts pools with valid
// names and at least one address each, a default among them, or fails
// naming the variable.
func FuzzLoadIPPools(f *testing.F) {
	for _, s := range []string{"shared=203.0.113.5@mta1.example.com",
		"shared=203.0.113.5@mta1.example.com;acme=203.0.113.9@mta9.example.com,203.0.113.10@mta10.example.com",
		"a=::1@x.y", ";;", "x=", "=1.2.3.4@a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := Load(env(map[string]string{"POSTHASTE_IP_POOLS": spec}))
		if err != nil {
			if !strings.Contains(err.Error(), "POSTHASTE_IP_POOLS") {
				t.Fatalf("error does not name the variable: %v", err)
			}
			return
		}
		found := len(c.Delivery.Pools) == 0 && c.Delivery.DefaultPool == ippool.Default
		for _, p := range c.Delivery.Pools {
			if ippool.ValidName(p.Name) != nil || len(p.Addresses) == 0 {
				t.Fatalf("bad pool accepted: %+v", p)
			}
			found = found || p.Name == c.Delivery.DefaultPool
		}
		if !found {
			t.Fatalf("default pool %q is not among %v", c.Delivery.DefaultPool, c.Delivery.Pools)
		}
	})
}

func TestLoadWarmup(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, ippool.Schedule{50, 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200}, c.Delivery.Warmup)
	require.Equal(t, WarmupWait, c.Delivery.WarmupOverflow)

	c, err = Load(env(map[string]string{"POSTHASTE_WARMUP_SCHEDULE": "off", "POSTHASTE_WARMUP_OVERFLOW": "spill"}))
	require.NoError(t, err)
	require.Empty(t, c.Delivery.Warmup)
	require.Equal(t, WarmupSpill, c.Delivery.WarmupOverflow)

	c, err = Load(env(map[string]string{"POSTHASTE_WARMUP_SCHEDULE": "5,10"}))
	require.NoError(t, err)
	require.Equal(t, ippool.Schedule{5, 10}, c.Delivery.Warmup)

	_, err = Load(env(map[string]string{"POSTHASTE_WARMUP_SCHEDULE": "50*2"}))
	require.ErrorContains(t, err, "POSTHASTE_WARMUP_SCHEDULE")
	_, err = Load(env(map[string]string{"POSTHASTE_WARMUP_OVERFLOW": "drop"}))
	require.ErrorContains(t, err, "POSTHASTE_WARMUP_OVERFLOW")
}
