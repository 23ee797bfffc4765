package submit

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/invalid"
)

// How long a share link of an email (POST /emails/{id}/share) works:
// Resend's default and maximum, 48 hours, and a minimum of our own, one
// minute, below which a link is expired before anyone can open it.
const (
	ShareDefault = 48 * time.Hour
	ShareMin     = time.Minute
	ShareMax     = 48 * time.Hour
)

// shareDuration matches the durations Resend documents for `expires_in`
// ("10m", "2 hours", "1 day"): a number, optionally with a fraction, and a
// unit, as the `ms` package of Node writes them.
var shareDuration = regexp.MustCompile(`^(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)$`)

var shareUnits = map[string]time.Duration{
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ShareExpiry reads the `expires_in` of a share request: nil (absent) is
// ShareDefault; otherwise a duration with a unit such as "10m", "2 hours"
// or "1 day", between ShareMin and ShareMax. Errors are *invalid.Error.
func ShareExpiry(raw *string) (time.Duration, error) {
	if raw == nil {
		return ShareDefault, nil
	}
	m := shareDuration.FindStringSubmatch(strings.ToLower(strings.TrimSpace(*raw)))
	unit, ok := time.Duration(0), false
	if m != nil {
		unit, ok = shareUnits[m[2]]
	}
	if !ok {
		return 0, invalid.Errorf("expires_in",
			"The `expires_in` field must be a duration such as `10m`, `2 hours` or `1 day`.")
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil || n*float64(unit) < float64(ShareMin) || n*float64(unit) > float64(ShareMax) {
		return 0, invalid.Errorf("expires_in",
			"The `expires_in` field must be between 1 minute and 48 hours.")
	}
	return time.Duration(n * float64(unit)).Round(time.Second), nil
}
