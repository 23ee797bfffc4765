package submit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/invalid"
)

// TestShareExpiry: expires_in reads the durations Resend documents, within
// one minute and 48 hours; anything else is an invalid.Error naming it.
func TestShareExpiry(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	for in, want := range map[string]time.Duration{
		"10m": 10 * time.Minute, "2 hours": 2 * time.Hour, "1 day": 24 * time.Hour, "48h": 48 * time.Hour,
		"1.5h": 90 * time.Minute, " 90 Seconds ": 90 * time.Second, "2d": 48 * time.Hour, "60000ms": time.Minute,
		".5 hr": 30 * time.Minute,
	} {
		got, err := ShareExpiry(s(in))
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	got, err := ShareExpiry(nil)
	require.NoError(t, err)
	require.Equal(t, ShareDefault, got)
	for _, in := range []string{"", "10", "h", "-1h", "49h", "3 days", "1w", "59s", "0m", "1 fortnight", "1h30m", "1e3h"} {
		_, err := ShareExpiry(s(in))
		var ie *invalid.Error
		require.ErrorAs(t, err, &ie, in)
		require.Equal(t, "expires_in", ie.Field, in)
	}
}
