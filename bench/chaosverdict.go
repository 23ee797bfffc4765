package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/store"
)

// The verdict of a chaos run: wait until every accepted email has an
// outcome, then compare what the clients got, what the API lists and what
// the MX hosts received.

// waitSettled lists the emails until every accepted one has a final state
// for each recipient, none was added for cfg.settleStall, or
// cfg.settleMax passed; it returns the last listing.
func waitSettled(ctx context.Context, c *chaosClient, sends []keyedSend, cfg chaosConfig, logf func(string, ...any)) ([]listedEmail, error) {
	want := map[string]bool{}
	for _, s := range sends {
		if s.id != "" {
			want[s.id] = true
		}
	}
	began := time.Now()
	lastMove, lastLog, best := began, began, -1
	for {
		listed, err := c.listEmails(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing emails: %w", err)
		}
		settled := 0
		for _, e := range listed {
			if want[e.ID] && allFinal(e) {
				settled++
			}
		}
		now := time.Now()
		if settled == len(want) {
			return listed, nil
		}
		if settled > best {
			best, lastMove = settled, now
		}
		if now.Sub(lastMove) > cfg.settleStall || now.Sub(began) > cfg.settleMax {
			logf("giving up the wait: %d of %d emails settled", settled, len(want))
			return listed, nil
		}
		if now.Sub(lastLog) >= 15*time.Second {
			logf("  %d of %d emails settled", settled, len(want))
			lastLog = now
		}
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return nil, err
		}
	}
}

func allFinal(e listedEmail) bool {
	if len(e.Recipients) == 0 {
		return false
	}
	for _, r := range e.Recipients {
		if !store.IsFinal(r.Status) {
			return false
		}
	}
	return true
}

// chaosTally is the verdict on a chaos run.
type chaosTally struct {
	accepted    int
	notAccepted int            // clients that never got an id
	notAccErrs  map[string]int // why, by the first 60 characters
	// lost: accepted emails that were not stored, have a recipient without
	// a final state, or a recipient recorded delivered whom the MX never
	// got it.
	lost                              int
	lostNotStored, lostNoOutcome      int
	lostNotAtMX                       int
	duplicated                        int // (key, recipient) pairs the MX got more than once
	extraCopies                       int // copies beyond the first
	keysTwice                         int // keys with more than one stored email
	notDelivered                      map[string]int
	atMXButNot                        int // recipients the MX got whose state is not delivered
	unknownAtMX                       int // messages without our Message-ID and key
	deferred                          int // RCPTs b.test deferred
	delivered                         int // recipients recorded delivered
	messagesByMX                      map[string]int
	waits                             []time.Duration // of accepted emails that needed a retry, sorted
	attempts, retriedEmails, maxTries int
	// examples names a few lost and duplicated emails, for a look at
	// their histories.
	examples []string
}

// maxExamples bounds chaosTally.examples.
const maxExamples = 10

// tallyChaos judges a run from what the clients got, what the API lists
// and what the MX hosts received.
func tallyChaos(sends []keyedSend, listed []listedEmail, mx mxSnapshot) chaosTally {
	t := chaosTally{notAccErrs: map[string]int{}, notDelivered: map[string]int{}, messagesByMX: mx.messages,
		unknownAtMX: mx.unknown}
	byID := map[string]listedEmail{}
	perKey := map[string]int{}
	for _, e := range listed {
		byID[e.ID] = e
		if strings.HasPrefix(e.Subject, "chaos/") {
			perKey[e.Subject]++
		}
	}
	for _, n := range perKey {
		if n > 1 {
			t.keysTwice++
		}
	}
	for _, s := range sends {
		t.attempts += s.attempts
		t.maxTries = max(t.maxTries, s.attempts)
		if s.id == "" {
			t.notAccepted++
			t.notAccErrs[truncate(s.err, 60)]++
			continue
		}
		t.accepted++
		if s.attempts > 1 {
			t.retriedEmails++
			t.waits = append(t.waits, s.wait)
		}
		e, ok := byID[s.id]
		if !ok {
			t.lost++
			t.lostNotStored++
			t.example("lost: %s, email %s, not listed by GET /emails", s.key, s.id)
			continue
		}
		noOutcome, notAtMX := false, false
		for _, rc := range e.Recipients {
			got := mx.byID[s.id+" "+strings.ToLower(rc.Email)]
			switch {
			case !store.IsFinal(rc.Status):
				noOutcome = true
			case rc.Status == store.EventDelivered || rc.Status == store.EventOpened || rc.Status == store.EventClicked:
				t.delivered++
				if got == 0 {
					notAtMX = true
				}
			default:
				t.notDelivered[rc.Status]++
				if got > 0 {
					t.atMXButNot++
				}
			}
		}
		if len(e.Recipients) == 0 {
			noOutcome = true
		}
		switch {
		case noOutcome:
			t.lost++
			t.lostNoOutcome++
			t.example("lost: %s, email %s, a recipient without an outcome", s.key, s.id)
		case notAtMX:
			t.lost++
			t.lostNotAtMX++
			t.example("lost: %s, email %s, recorded delivered but not at the MX", s.key, s.id)
		}
	}
	ids := map[string]string{}
	for _, s := range sends {
		ids[s.key] = s.id
	}
	pairs := make([]string, 0, len(mx.byKey))
	for k := range mx.byKey {
		pairs = append(pairs, k)
	}
	sort.Strings(pairs)
	for _, k := range pairs {
		if n := mx.byKey[k]; n > 1 {
			t.duplicated++
			t.extraCopies += n - 1
			key, rcpt, _ := strings.Cut(k, " ")
			times := make([]string, len(mx.at[k]))
			for i, at := range mx.at[k] {
				times[i] = at.Format("15:04:05.000")
			}
			t.example("duplicated: %s, email %s, %d copies to %s at %s", key, ids[key], n, rcpt,
				strings.Join(times, ", "))
		}
	}
	sort.Slice(t.waits, func(i, j int) bool { return t.waits[i] < t.waits[j] })
	return t
}

func (t *chaosTally) example(format string, args ...any) {
	if len(t.examples) < maxExamples {
		t.examples = append(t.examples, fmt.Sprintf(format, args...))
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// quantile returns the value at quantile q of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func printChaos(p func(string, ...any), cfg chaosConfig, r *chaosRunner, t chaosTally, sends []keyedSend,
	retries *retryCounts, sending, total time.Duration) {
	p("")
	p("results")
	p("  emails accepted      %d of %d (in %s)", t.accepted, len(sends), fmtDur(sending))
	if t.notAccepted > 0 {
		p("  NOT accepted         %d: %v", t.notAccepted, t.notAccErrs)
	}
	p("  lost                 %d  (not stored %d, a recipient without an outcome %d, delivered but not at the MX %d)",
		t.lost, t.lostNotStored, t.lostNoOutcome, t.lostNotAtMX)
	p("  duplicated           %d recipients got an email more than once (%d extra copies); %d keys accepted twice",
		t.duplicated, t.extraCopies, t.keysTwice)
	p("  delivered            %d recipients; at the MX: %s; %d more without our Message-ID",
		t.delivered, fmtCounts(t.messagesByMX), t.unknownAtMX)
	if len(t.notDelivered) > 0 || t.atMXButNot > 0 {
		p("  not delivered        %s recipients (of them at the MX all the same: %d)", fmtCounts(t.notDelivered), t.atMXButNot)
	}
	p("  deferred             %d RCPTs answered 451 by mx.b.test in its first %s", t.deferred, cfg.deferB)
	crashes := map[string]int{}
	for _, pt := range faults.Points {
		crashes[string(pt)] = r.crashes[pt]
	}
	p("  crashes by point     %s; killed by the bench when the point was not reached: %d", fmtPoints(crashes), r.outlived)
	p("  PostgreSQL outages   %d, %s in all", r.outages, fmtDur(r.outageTotal))
	p("  dev processes        %d started", r.starts)
	p("  client retries       %d over %d emails (max %d attempts for one): %s",
		t.attempts-len(sends), t.retriedEmails, t.maxTries, retries)
	p("  client waits         beyond the first attempt, of the %d retried emails: p50 %s  p99 %s  max %s",
		t.retriedEmails, fmtDur(quantile(t.waits, 0.5)), fmtDur(quantile(t.waits, 0.99)), fmtDur(quantile(t.waits, 1)))
	p("  total time           %s, first request until every outcome was in", fmtDur(total))
	for _, e := range t.examples {
		p("  %s", e)
	}
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// fmtPoints lists the crash counts in the order of faults.Points.
func fmtPoints(m map[string]int) string {
	parts := make([]string, 0, len(faults.Points))
	for _, pt := range faults.Points {
		parts = append(parts, fmt.Sprintf("%s %d", pt, m[string(pt)]))
	}
	return strings.Join(parts, ", ")
}
