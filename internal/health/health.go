// Package health implements the account-health rules of a team: its bounce
// and complaint rates over a rolling window, the thresholds at which they
// warn (Resend's published ones: 4 % bounces, 0.08 % complaints) and the
// transitions of a team's state when a rate crosses its threshold. It holds
// no state and does no I/O: the store counts outcomes and keeps each team's
// state, the caller applies Evaluate's transitions.
package health

import (
	"fmt"
	"math"
	"time"
)

// DefaultWindow is the rolling window the rates are computed over: 30
// days, the longest window the data is sure to cover (email is deleted 30
// days after its last event by default, POSTHASTE_RETENTION) and the
// default range of Resend's metrics, so the Metrics page and the rates
// agree.
const DefaultWindow = 30 * 24 * time.Hour

// MinVolume is the fewest recipients with an outcome a window must hold
// before any rate is judged: below it a handful of bad addresses in a test
// send would read as a crisis.
const MinVolume = 100

// Metric names a rate.
type Metric string

// The two rates.
const (
	Bounce    Metric = "bounce"
	Complaint Metric = "complaint"
)

// Thresholds are Resend's published account-health limits: a bounce rate
// above 4 % or a complaint (spam report) rate above 0.08 % puts an account
// at risk. The rates are fractions (0.04 is 4 %).
var thresholds = map[Metric]float64{Bounce: 0.04, Complaint: 0.0008}

// Threshold returns the fraction above which m warns.
func Threshold(m Metric) float64 { return thresholds[m] }

// Counts are a team's recipients with an outcome in the window.
type Counts struct {
	// Delivered counts recipients whose mail was accepted by their server
	// (delivered, and those that went on to be opened, clicked or
	// reported as spam).
	Delivered int64
	// Bounced counts recipients whose mail bounced.
	Bounced int64
	// Complained counts delivered recipients who reported the mail as
	// spam (also counted in Delivered).
	Complained int64
}

// Sent is the bounce rate's denominator: recipients whose delivery reached
// an outcome (delivered or bounced). Mail still queued, scheduled,
// canceled, suppressed or failed before any server answered is not
// counted: it says nothing about the list's quality.
func (c Counts) Sent() int64 { return c.Delivered + c.Bounced }

// BounceRate is Bounced / (Delivered + Bounced), as Amazon SES (which
// Resend sends through) defines it; 0 without volume.
func (c Counts) BounceRate() float64 { return ratio(c.Bounced, c.Sent()) }

// ComplaintRate is Complained / Delivered: only delivered mail can be
// reported as spam; 0 without volume.
func (c Counts) ComplaintRate() float64 { return ratio(c.Complained, c.Delivered) }

// Rate returns the rate of m.
func (c Counts) Rate(m Metric) float64 {
	if m == Complaint {
		return c.ComplaintRate()
	}
	return c.BounceRate()
}

// Judged reports whether m's rate is judged at these counts: the window
// holds at least MinVolume recipients for its denominator, and enough that
// one event alone cannot cross the threshold (for complaints, at 0.08 %,
// that is 1,250 delivered recipients: one spam report in a few hundred
// emails is noise, not a pattern).
func (c Counts) Judged(m Metric) bool {
	den := c.Sent()
	if m == Complaint {
		den = c.Delivered
	}
	return den >= MinVolume && float64(den) >= math.Ceil(1/Threshold(m))
}

// Over reports whether m's rate is judged and above its threshold.
func (c Counts) Over(m Metric) bool {
	return c.Judged(m) && c.Rate(m) > Threshold(m)
}

// State is what the store keeps of a team's health between evaluations.
type State struct {
	// Warned holds the metrics above their threshold at the last
	// evaluation, since when.
	Warned map[Metric]time.Time
	// Paused is non-nil while the team's sending is paused.
	Paused *Pause
}

// Pause is why a team's sending is paused.
type Pause struct {
	Metric    Metric
	Rate      float64 // the rate when it was paused
	Threshold float64
	Window    time.Duration
	At        time.Time
}

// Message is the error text of a refused send: it names the rate, the
// threshold and how to get out.
func (p Pause) Message() string {
	return fmt.Sprintf("Sending is paused for this team: its %s rate over the last %s was %s, above the %s threshold. "+
		"Clean the addresses that %s from your lists, then ask the operator of this server to resume sending.",
		p.Metric, Days(p.Window), Percent(p.Rate), Percent(p.Threshold), verb(p.Metric))
}

func verb(m Metric) string {
	if m == Complaint {
		return "reported your mail as spam"
	}
	return "bounced"
}

// Crossing is a metric that went above its threshold at this evaluation.
type Crossing struct {
	Metric    Metric
	Rate      float64
	Threshold float64
	// Paused is true when this crossing paused the team's sending.
	Paused bool
}

// Evaluate returns the team's next state from its previous one and its
// current counts, and the metrics that crossed their threshold now (each
// crossing is reported once: a metric that stays above its threshold is
// not reported again until it has gone back under it). With pause, the
// first crossing pauses a team that is not paused; a paused team stays
// paused whatever its rates until an operator resumes it (Resume), and a
// resumed team whose rate is still above the threshold is not paused again
// until it crosses anew.
func Evaluate(prev State, c Counts, now time.Time, window time.Duration, pause bool) (State, []Crossing) {
	next := State{Warned: map[Metric]time.Time{}, Paused: prev.Paused}
	var crossed []Crossing
	for _, m := range []Metric{Bounce, Complaint} {
		if !c.Over(m) {
			continue
		}
		if since, ok := prev.Warned[m]; ok {
			next.Warned[m] = since
			continue
		}
		next.Warned[m] = now
		x := Crossing{Metric: m, Rate: c.Rate(m), Threshold: Threshold(m)}
		if pause && next.Paused == nil {
			next.Paused = &Pause{Metric: m, Rate: x.Rate, Threshold: x.Threshold, Window: window, At: now}
			x.Paused = true
		}
		crossed = append(crossed, x)
	}
	return next, crossed
}

// Percent formats a fraction as a percentage with the precision its
// threshold needs: 0.0412 → "4.12 %", 0.0008 → "0.08 %".
func Percent(f float64) string {
	return fmt.Sprintf("%.2f %%", f*100)
}

// Days formats a window: whole days as "30 days", else the duration.
func Days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		if n := d / (24 * time.Hour); n != 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "day"
	}
	return d.String()
}

func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}
