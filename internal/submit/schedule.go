package submit

import (
	"strings"
	"time"
	"unicode/utf8"

	dateparser "github.com/markusmobius/go-dateparser"
)

// maxScheduleText bounds the scheduled_at text handed to the
// natural-language parser.
const maxScheduleText = 256

// ParseScheduledAt reads a `scheduled_at` value relative to now: an ISO
// 8601 timestamp with a time zone (RFC 3339 and its profiles without
// seconds or with a colon-less offset), or English natural language such
// as "in 30 seconds", "in 2 hours", "tomorrow at 9am" or "Friday at 3pm
// ET", parsed by github.com/markusmobius/go-dateparser. Natural-language
// times without a zone are UTC; weekdays and times of day mean the next
// one to come. The result is UTC and lies between scheduleSkew before now
// and 30 days after it; anything else is an *Error naming `field`.
func ParseScheduledAt(field, in string, now time.Time) (time.Time, error) {
	s := strings.TrimSpace(in)
	if looksLikeTimestamp(s) {
		t, ok := parseTimestamp(s)
		if !ok {
			return time.Time{}, Errorf(KindValidation, field,
				"Invalid `%s` field. Use an ISO 8601 timestamp with a time zone, such as `2026-11-22T10:00:00Z` "+
					"or `2026-11-22T11:00:00+01:00`, or natural language such as `in 1 hour`.", field)
		}
		return checkScheduleWindow(field, t, now)
	}
	if s == "" || len(s) > maxScheduleText || !utf8.ValidString(s) {
		return time.Time{}, unparsable(field)
	}
	d, err := dateparser.Parse(&dateparser.Configuration{
		CurrentTime:         now.UTC(),
		DefaultTimezone:     time.UTC,
		PreferredDateSource: dateparser.Future,
		Languages:           []string{"en"},
	}, s)
	if err != nil || d.Time.IsZero() {
		return time.Time{}, unparsable(field)
	}
	return checkScheduleWindow(field, d.Time.UTC(), now)
}

func unparsable(field string) error {
	return Errorf(KindValidation, field,
		"Invalid `%s` field. Use an ISO 8601 timestamp with a time zone, such as `2026-11-22T10:00:00Z`, "+
			"or natural language such as `in 30 seconds`, `in 2 hours`, `tomorrow at 9am` or `Friday at 3pm ET`.", field)
}

// looksLikeTimestamp reports whether s starts like an ISO 8601 date
// (YYYY-MM-DD): those are held to the strict ISO profiles, so that a
// timestamp without a zone is refused instead of guessed.
func looksLikeTimestamp(s string) bool {
	if len(s) < 10 {
		return false
	}
	for i := range 10 {
		c := s[i]
		if i == 4 || i == 7 {
			if c != '-' {
				return false
			}
		} else if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func checkScheduleWindow(field string, t, now time.Time) (time.Time, error) {
	if now.IsZero() {
		now = time.Now()
	}
	if t.Before(now.Add(-scheduleSkew)) {
		return time.Time{}, Errorf(KindValidation, field, "Invalid `%s` field. It must not be in the past.", field)
	}
	if t.After(now.Add(maxScheduleAhead)) {
		return time.Time{}, Errorf(KindValidation, field, "Invalid `%s` field. It must be at most 30 days in the future.", field)
	}
	return t.UTC(), nil
}
