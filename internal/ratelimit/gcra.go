package ratelimit

import "time"

// Rate is one GCRA bucket (the generic cell rate algorithm of ITU-T
// I.371): Limit requests per Period, a burst of Limit. A bucket's whole
// state is its theoretical arrival time (TAT): a request is allowed when
// the TAT it leaves, max(TAT, now) plus one interval (Period/Limit), is
// no more than one Period ahead of now. It is the arithmetic of every
// limit Posthaste keeps in process: the API's Local limiter, the
// per-destination shaping, the API's budget of key lookups and the
// sign-in throttle; the Redis script
// (Script) does the same in Redis.
type Rate struct {
	Limit  int
	Period time.Duration
}

// Interval is how often the bucket lets one more request through,
// rounded down (an error under a nanosecond a request, in the
// requester's favour, as in Script).
func (r Rate) Interval() time.Duration { return r.Period / time.Duration(max(1, r.Limit)) }

// Take is one request against a bucket whose TAT is tat (the zero time,
// or a time before now, for a full bucket). Allowed, it returns the TAT
// to keep and a zero wait; refused, the tat unchanged and how long until
// a request would be allowed.
func (r Rate) Take(tat, now time.Time) (next time.Time, wait time.Duration) {
	if r.Limit <= 0 {
		return tat, r.Period // a bucket of nothing never allows
	}
	next = later(tat, now).Add(r.Interval())
	if over := next.Sub(now) - r.Period; over > 0 {
		return tat, over
	}
	return next, 0
}

// Charge counts one request against a bucket whatever it allows, and
// returns the bucket's new TAT: for a cost known only afterwards (a key
// lookup that found nothing, a failed sign-in).
func (r Rate) Charge(tat, now time.Time) time.Time { return later(tat, now).Add(r.Interval()) }

// Remaining is how many requests a bucket with TAT tat allows at now.
func (r Rate) Remaining(tat, now time.Time) int {
	return max(0, int((r.Period-Ahead(tat, now))/r.Interval()))
}

// Ahead is how far tat is ahead of now, zero when it is not: how long
// until the bucket is full again.
func Ahead(tat, now time.Time) time.Duration { return max(0, tat.Sub(now)) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
