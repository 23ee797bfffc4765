package ippool

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Schedule is an IP warm-up schedule: Schedule[d-1] is the most messages
// (recipients) an address may send on day d of its warm-up, days being
// UTC calendar days and day 1 the day its warm-up started; from day
// len(Schedule)+1 on, its warm-up is done and it sends without limit. An
// empty Schedule is no warm-up.
type Schedule []int64

// DefaultScheduleSpec is POSTHASTE_WARMUP_SCHEDULE's default: 50 messages
// on day 1, doubling every day while the day's allowance stays at or below
// 100,000 (51,200 on day 11); the warm-up is done on day 12.
const DefaultScheduleSpec = "50*2..100000"

// Bounds of a schedule: MaxScheduleDays days, MaxDailyAllowance messages a
// day.
const (
	MaxScheduleDays   = 366
	MaxDailyAllowance = 1_000_000_000
)

// ParseSchedule reads POSTHASTE_WARMUP_SCHEDULE, in one of three forms:
//
//   - "off": no warm-up (an empty Schedule);
//   - a list of daily allowances, "50,100,200,400": day 1 to day 4, then
//     done;
//   - "START*FACTOR..CAP", such as "50*2..100000": START on day 1, each
//     day the previous day's allowance times FACTOR (a number above 1,
//     such as 1.5; rounded down), for as long as the day's allowance stays
//     at or below CAP; then done.
//
// Allowances are whole numbers from 1 to MaxDailyAllowance; a schedule
// has at most MaxScheduleDays days.
func ParseSchedule(spec string) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "off":
		return Schedule{}, nil
	case strings.Contains(spec, "*"):
		return parseGeometric(spec)
	}
	var s Schedule
	for _, item := range strings.Split(spec, ",") {
		n, err := allowance(item)
		if err != nil {
			return nil, err
		}
		if len(s) == MaxScheduleDays {
			return nil, fmt.Errorf("a schedule has at most %d days", MaxScheduleDays)
		}
		s = append(s, n)
	}
	return s, nil
}

func parseGeometric(spec string) (Schedule, error) {
	startText, rest, _ := strings.Cut(spec, "*")
	factorText, capText, ok := strings.Cut(rest, "..")
	if !ok {
		return nil, fmt.Errorf("%q must look like 50*2..100000 (START*FACTOR..CAP)", spec)
	}
	start, err := allowance(startText)
	if err != nil {
		return nil, err
	}
	limit, err := allowance(capText)
	if err != nil {
		return nil, err
	}
	factor, err := strconv.ParseFloat(strings.TrimSpace(factorText), 64)
	if err != nil || math.IsNaN(factor) || factor <= 1 || factor > 1000 {
		return nil, fmt.Errorf("warm-up factor %q must be a number above 1 and at most 1000", factorText)
	}
	if start > limit {
		return nil, fmt.Errorf("warm-up start %d is above its cap %d", start, limit)
	}
	s := Schedule{start}
	for v := float64(start); ; {
		v *= factor
		n := int64(v)
		if v > float64(limit) {
			return s, nil
		}
		if len(s) == MaxScheduleDays {
			return nil, fmt.Errorf("warm-up %q lasts more than %d days", spec, MaxScheduleDays)
		}
		if n <= s[len(s)-1] {
			// A factor close to 1 rounds down to the same number: still
			// one more a day.
			n = s[len(s)-1] + 1
			v = float64(n)
		}
		s = append(s, n)
	}
}

func allowance(text string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil || n < 1 || n > MaxDailyAllowance {
		return 0, fmt.Errorf("daily allowance %q must be a whole number from 1 to %d", strings.TrimSpace(text), MaxDailyAllowance)
	}
	return n, nil
}

// String is the schedule as a list of daily allowances ("off" when
// empty), which ParseSchedule reads back.
func (s Schedule) String() string {
	if len(s) == 0 {
		return "off"
	}
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, ",")
}

// Allowance is the allowance of day (1 for the day the warm-up started);
// limited is false once the warm-up is done. A day before 1 (a start a
// clock ahead of this one set) is day 1.
func (s Schedule) Allowance(day int) (n int64, limited bool) {
	day = max(day, 1)
	if day > len(s) {
		return 0, false
	}
	return s[day-1], true
}

// WarmupDay is the day of a warm-up started at start, as of now: 1 on
// start's UTC calendar day, 2 on the next, and so on (the store counts
// days the same way in its SQL: store.TakeWarmup).
func WarmupDay(start, now time.Time) int {
	return int(utcDays(now)-utcDays(start)) + 1
}

// utcDays is the number of UTC calendar days from 1970-01-01 to t's.
func utcDays(t time.Time) int64 {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return d
}
