package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The real delivery target compares two rates that drift with the state of
// a shared machine (the bare one-activity rate of one binary has varied
// from 25 to 109 workflows/s between runs), so it is judged on pairs: a
// bare one-activity run and a real delivery run measured back to back, one
// pair after another, and the median of the pairs' ratios.

// pair is a bare one-activity run and the real delivery run after it.
type pair struct {
	bare rate // workflows
	real rate // emails
}

// ratio is real delivery / bare one activity.
func (pr pair) ratio() float64 { return ratio(pr.real, pr.bare) }

// median returns the median of xs, the mean of the middle two for an even
// count, 0 for none; xs is left as it is.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// medianPairRatio is the median of the pairs' ratios real / bare, which
// the real delivery target is judged on.
func medianPairRatio(ps []pair) float64 {
	rs := make([]float64, len(ps))
	for i, pr := range ps {
		rs[i] = pr.ratio()
	}
	return median(rs)
}

// medianRate returns a rate of the median per-second value of rs, over as
// many things as rs[0] (the runs of one kind are all of one size); the
// zero rate for none.
func medianRate(rs []rate) rate {
	if len(rs) == 0 {
		return rate{}
	}
	per := make([]float64, len(rs))
	for i, r := range rs {
		per[i] = r.perSecond()
	}
	m := median(per)
	if m <= 0 {
		return rate{}
	}
	return rate{n: rs[0].n, elapsed: time.Duration(float64(rs[0].n) / m * float64(time.Second))}
}

// medianRates returns the median bare one-activity rate and the median
// real delivery rate of the pairs.
func medianRates(ps []pair) (bare, real rate) {
	var bs, rs []rate
	for _, pr := range ps {
		bs, rs = append(bs, pr.bare), append(rs, pr.real)
	}
	return medianRate(bs), medianRate(rs)
}

// measurePairs measures pairs 2 to c.rounds, each a bare one-activity run
// with its warm-up on a bare worker of its own, then a real delivery run
// of c.real emails to that pair's recipient (deliveryRound). Pair 1 is the
// bare run of the Temporal step and the first real delivery run.
func measurePairs(ctx context.Context, api *apiClient, dev *devProcess, side *deliverySide, c counts,
	p func(string, ...any), logf func(string, ...any)) ([]pair, error) {
	if c.rounds < 2 {
		return nil, nil
	}
	tc, stop, err := connectBare(ctx, dev.temporal)
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []pair
	for round := 2; round <= c.rounds; round++ {
		p("")
		p("pair %d of %d: bare Temporal, one activity (task queue %s, %d concurrent starters), then real delivery",
			round, c.rounds, bareTaskQueue, c.conc)
		br, err := runBareWarm(ctx, tc, bareActivity, c.warmup, c.bare, c.conc, logf)
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", round, err)
		}
		p("  %s", br)
		rr, err := realDeliveryRun(ctx, api, dev, side, round, c.real, c.conc, "verified before", p, logf)
		if err != nil {
			return nil, fmt.Errorf("pair %d: real delivery: %w", round, err)
		}
		out = append(out, pair{bare: br.rate, real: rr.rate})
	}
	return out, nil
}

// printPairs prints each pair's rates and ratio, and the median ratio.
func printPairs(p func(string, ...any), ps []pair) {
	p("")
	p("real delivery / bare one activity, pair by pair (pair 1: the runs above; each later pair back to back)")
	for i, pr := range ps {
		p("  pair %d  bare %8.1f workflows/s  real %8.1f emails/s  ratio %.2f", i+1, pr.bare.perSecond(), pr.real.perSecond(), pr.ratio())
	}
	p("  median of %d pair ratios: %.2f", len(ps), medianPairRatio(ps))
}
