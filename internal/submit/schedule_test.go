package submit

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseScheduledAt(t *testing.T) {
	// A Sunday, 10:00 UTC.
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	et := time.FixedZone("EST", -5*3600)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-11-23T10:00:00Z", time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)},
		{"2026-11-23T11:00:00+01:00", time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)},
		{"in 30 seconds", now.Add(30 * time.Second)},
		{"in 1 min", now.Add(time.Minute)},
		{"in 1 minute", now.Add(time.Minute)},
		{"in 2 hours", now.Add(2 * time.Hour)},
		{"  In 2 Hours ", now.Add(2 * time.Hour)},
		{"in 3 days", now.Add(72 * time.Hour)},
		{"tomorrow at 9am", time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)},
		{"Friday at 3pm ET", time.Date(2026, 11, 27, 15, 0, 0, 0, et)},
		{"friday at 3pm", time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseScheduledAt("scheduled_at", tt.in, now)
			require.NoError(t, err)
			require.True(t, tt.want.Equal(got), "got %v, want %v", got, tt.want)
			require.Equal(t, time.UTC, got.Location())
		})
	}
	for _, in := range []string{"", "   ", "soon-ish maybe", "2026-11-23T10:00:00", "2026-13-01T00:00:00Z",
		"yesterday", "in 40 days", "2027-01-01T00:00:00Z", "2026-11-22T09:58:00Z", "\xff\xfe"} {
		t.Run("refuses "+in, func(t *testing.T) {
			_, err := ParseScheduledAt("scheduled_at", in, now)
			var se *Error
			require.True(t, errors.As(err, &se), "%q: %v", in, err)
			require.Equal(t, KindValidation, se.Kind)
			require.Equal(t, "scheduled_at", se.Field)
			require.Contains(t, se.Message, "`scheduled_at`")
		})
	}
}

// FuzzParseScheduledAt checks that any text yields a time inside the
// allowed window or an *Error, and never panics.
func FuzzParseScheduledAt(f *testing.F) {
	for _, s := range []string{"in 30 seconds", "in 1 min", "tomorrow at 9am", "Friday at 3pm ET",
		"2026-11-23T10:00:00Z", "2026-11-23 10:00z", "next monday", "in 2 hours", "12/01/2026 10:00 PST", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseScheduledAt("scheduled_at", in, now)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("%q: error is not *Error: %v", in, err)
			}
			return
		}
		if got.Before(now.Add(-scheduleSkew)) || got.After(now.Add(maxScheduleAhead)) {
			t.Fatalf("%q: %v is outside the window", in, got)
		}
	})
}
