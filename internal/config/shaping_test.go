package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/shaping"
)

func TestLoadShaping(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, shaping.DefaultRules(), c.Delivery.Shaping)
	require.Equal(t, 5*time.Second, c.Delivery.ShapingWait)

	c, err = Load(env(map[string]string{"POSTHASTE_SHAPING": "gmail:conns=2,per_hour=1000", "POSTHASTE_SHAPING_WAIT": "0"}))
	require.NoError(t, err)
	require.Equal(t, 2, c.Delivery.Shaping[shaping.Gmail].Connections)
	require.Equal(t, 1000, c.Delivery.Shaping[shaping.Gmail].PerHour)
	require.Equal(t, shaping.DefaultRules()[shaping.Yahoo], c.Delivery.Shaping[shaping.Yahoo])
	require.Zero(t, c.Delivery.ShapingWait)

	c, err = Load(env(map[string]string{"POSTHASTE_SHAPING": "off"}))
	require.NoError(t, err)
	require.Nil(t, c.Delivery.Shaping)

	for name, val := range map[string]string{
		"POSTHASTE_SHAPING":      "aol:conns=1",
		"POSTHASTE_SHAPING_WAIT": "-1s",
	} {
		_, err = Load(env(map[string]string{name: val}))
		require.ErrorContains(t, err, name)
	}
	_, err = Load(env(map[string]string{"POSTHASTE_SHAPING": "gmail:conns=x"}))
	require.ErrorContains(t, err, "conns")
}
