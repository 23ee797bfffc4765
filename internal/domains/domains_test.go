package domains_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		missing  bool
	}{
		{in: "Example.COM", want: "example.com"},
		{in: " mail.example.com. ", want: "mail.example.com"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		{in: "", missing: true},
		{in: "localhost"},
		{in: "not a domain"},
		{in: "user@example.com"},
		{in: "[127.0.0.1]"},
		{in: "posthaste.test"},
	} {
		got, err := domains.Name(tc.in)
		if tc.want != "" {
			require.NoError(t, err, tc.in)
			require.Equal(t, tc.want, got, tc.in)
			continue
		}
		var ie *invalid.Error
		require.True(t, errors.As(err, &ie), "%q: %v", tc.in, err)
		require.Equal(t, "name", ie.Field, tc.in)
		require.Equal(t, tc.missing, ie.Missing, tc.in)
	}
}

func TestRegions(t *testing.T) {
	require.Equal(t, "us-east-1", domains.Regions[0], "the default region")
	require.True(t, domains.ValidRegion("eu-west-1"))
	require.False(t, domains.ValidRegion("eu-west-2"))
}

// A domain with tracking on whose server has no tracking host (nor dev's
// own address to track under) is warned about: its mail goes untracked.
func TestTrackingWarning(t *testing.T) {
	host := records.Config{TrackingHost: "track.posthaste.example"}
	local := records.Config{LocalTracking: "http://localhost:3000"}
	for _, tc := range []struct {
		name        string
		cfg         records.Config
		open, click bool
		warned      bool
	}{
		{"no host, open tracking", records.Config{}, true, false, true},
		{"no host, click tracking", records.Config{}, false, true, true},
		{"no host, both", records.Config{BounceHost: "b.example"}, true, true, true},
		{"no host, tracking off", records.Config{}, false, false, false},
		{"a tracking host", host, true, true, false},
		{"dev's own address", local, true, true, false},
	} {
		got := domains.TrackingWarning(tc.cfg, store.Domain{Name: "example.com", TrackingSubdomain: "links",
			OpenTracking: tc.open, ClickTracking: tc.click})
		if !tc.warned {
			require.Empty(t, got, tc.name)
			continue
		}
		require.Equal(t, domains.NoTrackingHostWarning, got, tc.name)
		require.Contains(t, got, "POSTHASTE_TRACKING_HOST", tc.name)
	}
}
