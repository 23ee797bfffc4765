package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadTrackingHost(t *testing.T) {
	c, err := Load(env(map[string]string{"POSTHASTE_PUBLIC_URL": "https://Mail.Example.com:8443/"}))
	require.NoError(t, err)
	require.Equal(t, "mail.example.com", c.Domains.TrackingHost, "the host of the public URL")
	c, err = Load(env(map[string]string{"POSTHASTE_PUBLIC_URL": "http://localhost:8080"}))
	require.NoError(t, err)
	require.Equal(t, "localhost", c.Domains.TrackingHost, "a development URL's host is taken as it is")

	c, err = Load(env(map[string]string{"POSTHASTE_PUBLIC_URL": "https://mail.example.com",
		"POSTHASTE_TRACKING_HOST": "Track.Example.com."}))
	require.NoError(t, err)
	require.Equal(t, "track.example.com", c.Domains.TrackingHost)

	for _, bad := range []string{"track.example.com:443", "https://track.example.com", "localhost"} {
		_, err = Load(env(map[string]string{"POSTHASTE_TRACKING_HOST": bad}))
		require.ErrorContains(t, err, "POSTHASTE_TRACKING_HOST", bad)
	}
}
