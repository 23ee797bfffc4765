package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadHealth(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, Health{Window: 30 * 24 * time.Hour, Interval: 5 * time.Minute, Pause: false}, c.Health)

	c, err = Load(env(map[string]string{"POSTHASTE_HEALTH_WINDOW": "168h", "POSTHASTE_HEALTH_INTERVAL": "1m",
		"POSTHASTE_HEALTH_PAUSE": "true"}))
	require.NoError(t, err)
	require.Equal(t, Health{Window: 7 * 24 * time.Hour, Interval: time.Minute, Pause: true}, c.Health)

	_, err = Load(env(map[string]string{"POSTHASTE_HEALTH_PAUSE": "maybe"}))
	require.ErrorContains(t, err, "POSTHASTE_HEALTH_PAUSE")
	_, err = Load(env(map[string]string{"POSTHASTE_HEALTH_WINDOW": "1440h"}))
	require.ErrorContains(t, err, "POSTHASTE_HEALTH_WINDOW")
	_, err = Load(env(map[string]string{"POSTHASTE_HEALTH_WINDOW": "1440h", "POSTHASTE_RETENTION": "1440h"}))
	require.NoError(t, err)
	c, err = Load(env(map[string]string{"POSTHASTE_RETENTION": "168h"}))
	require.NoError(t, err)
	require.Equal(t, 168*time.Hour, c.Health.Window, "the default window never outlasts the data")
}
