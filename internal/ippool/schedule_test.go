package ippool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ippool"
)

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    ippool.Schedule
		wantErr string
	}{
		{spec: "off", want: ippool.Schedule{}},
		{spec: "50,100, 200 ,400", want: ippool.Schedule{50, 100, 200, 400}},
		{spec: "1000", want: ippool.Schedule{1000}},
		{spec: ippool.DefaultScheduleSpec, want: ippool.Schedule{50, 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200}},
		{spec: "100*1.5..500", want: ippool.Schedule{100, 150, 225, 337}},
		{spec: "10*2..80", want: ippool.Schedule{10, 20, 40, 80}},
		{spec: "3*1.1..6", want: ippool.Schedule{3, 4, 5, 6}},
		{spec: "5*2..5", want: ippool.Schedule{5}},
		{spec: "", wantErr: "whole number"},
		{spec: "50,,100", wantErr: "whole number"},
		{spec: "50,-1", wantErr: "whole number"},
		{spec: "0", wantErr: "whole number"},
		{spec: "2000000000", wantErr: "whole number"},
		{spec: "50*2", wantErr: "START*FACTOR..CAP"},
		{spec: "50*1..100", wantErr: "above 1"},
		{spec: "50*NaN..100", wantErr: "above 1"},
		{spec: "50*x..100", wantErr: "above 1"},
		{spec: "500*2..100", wantErr: "above its cap"},
		{spec: "1*1.000001..1000000000", wantErr: "more than 366 days"},
		{spec: strings.Repeat("1,", 366) + "1", wantErr: "at most 366 days"},
		{spec: "OFF", wantErr: "whole number"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ippool.ParseSchedule(tc.spec)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestScheduleAllowance(t *testing.T) {
	s := ippool.Schedule{50, 100}
	for _, tc := range []struct {
		day     int
		want    int64
		limited bool
	}{{-3, 50, true}, {0, 50, true}, {1, 50, true}, {2, 100, true}, {3, 0, false}, {400, 0, false}} {
		n, limited := s.Allowance(tc.day)
		require.Equal(t, tc.want, n, "day %d", tc.day)
		require.Equal(t, tc.limited, limited, "day %d", tc.day)
	}
	_, limited := ippool.Schedule{}.Allowance(1)
	require.False(t, limited, "no warm-up")
}

// A parsed schedule has from 0 to MaxScheduleDays days of allowances from 1
// to MaxDailyAllowance, and String gives it back as ParseSchedule reads it.
func FuzzParseSchedule(f *testing.F) {
	for _, seed := range []string{"off", "50,100,200", ippool.DefaultScheduleSpec, "100*1.5..500", "1*1.0001..1000",
		"7*999..1000000000", "50*2", "-1", "1,2,,3", "9*1e2..1e3", "5*+Inf..10"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ippool.ParseSchedule(spec)
		if err != nil {
			return
		}
		if len(s) > ippool.MaxScheduleDays {
			t.Fatalf("%q: %d days", spec, len(s))
		}
		for _, n := range s {
			if n < 1 || n > ippool.MaxDailyAllowance {
				t.Fatalf("%q: allowance %d", spec, n)
			}
		}
		again, err := ippool.ParseSchedule(s.String())
		if err != nil || again.String() != s.String() {
			t.Fatalf("%q: String %q reads back as %v, %v", spec, s.String(), again, err)
		}
	})
}

func TestWarmupDay(t *testing.T) {
	start := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	for _, tc := range []struct {
		now  time.Time
		want int
	}{
		{start, 1},
		{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 1},
		{time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 2},
		{time.Date(2026, 3, 2, 0, 30, 0, 0, time.FixedZone("CET", 3600)), 1}, // 23:30 UTC on 1 March
		{time.Date(2026, 3, 11, 12, 0, 0, 0, time.UTC), 11},
		{time.Date(2026, 2, 28, 12, 0, 0, 0, time.UTC), 0},
		{time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), -24165},
	} {
		require.Equal(t, tc.want, ippool.WarmupDay(start, tc.now), "%s", tc.now)
	}
}
