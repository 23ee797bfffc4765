package domains_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/invalid"
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
