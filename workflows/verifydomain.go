package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// VerifySchedule is when VerifyDomain looks a domain's records up: every
// Interval during FastPeriod, then at intervals doubling up to MaxInterval,
// until Expire has passed (the domain then fails); a verified domain is
// rechecked every Recheck. It travels in the workflow input so a run keeps
// the schedule it started with.
type VerifySchedule struct {
	Interval    time.Duration
	FastPeriod  time.Duration
	MaxInterval time.Duration
	Expire      time.Duration
	Recheck     time.Duration
	// Steps is the retry window of the lookups and status updates.
	Steps StepPolicy
}

// VerifyDomainInput starts (or continues) the verification of a domain.
type VerifyDomainInput struct {
	DomainID string
	Schedule VerifySchedule
	// Verified continues the daily recheck of a domain that was verified
	// (a continued-as-new run).
	Verified bool
}

// rechecksPerRun bounds a run's history: after this many daily rechecks the
// workflow continues as new.
const rechecksPerRun = 30

// VerifyDomain moves a domain through not_started → pending (or
// partially_verified, when some required records are found) → verified or,
// after Schedule.Expire, failed. A verified domain is rechecked every
// Schedule.Recheck; when a required record vanishes it becomes
// temporary_failure and is checked on the verification schedule again:
// verified when the records are back, failed when Expire passes first.
// The verify signal makes it check at once. It ends when the domain is
// deleted. Lookups failing temporarily (timeouts, SERVFAIL) never unverify
// a domain.
func VerifyDomain(ctx workflow.Context, in VerifyDomainInput) error {
	v := verifier{in: in, signal: workflow.GetSignalChannel(ctx, VerifySignalName),
		lctx: workflow.WithLocalActivityOptions(ctx, in.Schedule.Steps.localOptions(stepAttempt))}
	if !in.Verified {
		ok, err := v.poll(ctx, false)
		if err != nil || !ok {
			return err
		}
	}
	for i := 0; ; i++ {
		if i >= rechecksPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			v.drain()
			return workflow.NewContinueAsNewError(ctx, VerifyDomainName,
				VerifyDomainInput{DomainID: in.DomainID, Schedule: in.Schedule, Verified: true})
		}
		if err := v.wait(ctx, in.Schedule.Recheck); err != nil {
			return err
		}
		res, err := v.check(ctx)
		if err != nil || res.Deleted {
			return err
		}
		switch {
		case allRequired(res):
			if err := v.set(ctx, contract.DomainVerified, statuses(res, contract.DomainFailed)); err != nil {
				return err
			}
		case onlyTemporarilyMissing(res):
			// The DNS did not answer; the records may well be there.
		default:
			ok, err := v.poll(ctx, true)
			if err != nil || !ok {
				return err
			}
		}
	}
}

type verifier struct {
	in     VerifyDomainInput
	signal workflow.ReceiveChannel
	lctx   workflow.Context
}

// poll checks on the verification schedule until the required records are
// found (true) or Expire passes (false, the domain failed). lapsed says
// the domain was verified before: it is then temporary_failure meanwhile.
func (v *verifier) poll(ctx workflow.Context, lapsed bool) (bool, error) {
	s := v.in.Schedule
	start := workflow.Now(ctx)
	next := s.Interval
	for {
		res, err := v.check(ctx)
		if err != nil || res.Deleted {
			return false, err
		}
		if allRequired(res) {
			return true, v.set(ctx, contract.DomainVerified, statuses(res, contract.DomainFailed))
		}
		elapsed := workflow.Now(ctx).Sub(start)
		if elapsed >= s.Expire {
			return false, v.set(ctx, contract.DomainFailed, statuses(res, contract.DomainFailed))
		}
		status, missing := contract.DomainPending, contract.DomainPending
		switch {
		case lapsed:
			status, missing = contract.DomainTemporaryFailure, contract.DomainTemporaryFailure
		case anyRequired(res):
			status = contract.DomainPartiallyVerified
		}
		if err := v.set(ctx, status, statuses(res, missing)); err != nil {
			return false, err
		}
		delay := s.Interval
		if elapsed >= s.FastPeriod {
			next = min(next*2, s.MaxInterval)
			delay = next
		}
		if err := v.wait(ctx, min(delay, s.Expire-elapsed)); err != nil {
			return false, err
		}
	}
}

func (v *verifier) check(ctx workflow.Context) (contract.CheckDomainResult, error) {
	var res contract.CheckDomainResult
	err := workflow.ExecuteLocalActivity(v.lctx, contract.CheckDomainName, contract.CheckDomainInput{DomainID: v.in.DomainID}).
		Get(ctx, &res)
	return res, err
}

func (v *verifier) set(ctx workflow.Context, status string, records map[string]string) error {
	return workflow.ExecuteLocalActivity(v.lctx, contract.SetDomainStatusName, contract.SetDomainStatusInput{
		DomainID: v.in.DomainID, Status: status, Records: records,
	}).Get(ctx, nil)
}

// wait sleeps for d on a durable timer, or less when a verify signal
// arrives. It fails only when the workflow is canceled (the domain was
// deleted).
func (v *verifier) wait(ctx workflow.Context, d time.Duration) error {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, d), func(workflow.Future) {})
	sel.AddReceive(v.signal, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.Select(ctx)
	v.drain() // several nudges ask for one check
	return ctx.Err()
}

func (v *verifier) drain() {
	for v.signal.ReceiveAsync(nil) {
	}
}

func allRequired(res contract.CheckDomainResult) bool {
	for _, r := range res.Records {
		if r.Required && !r.Found {
			return false
		}
	}
	return true
}

func anyRequired(res contract.CheckDomainResult) bool {
	for _, r := range res.Records {
		if r.Required && r.Found {
			return true
		}
	}
	return false
}

func onlyTemporarilyMissing(res contract.CheckDomainResult) bool {
	for _, r := range res.Records {
		if r.Required && !r.Found && !r.Temporary {
			return false
		}
	}
	return true
}

// statuses gives found records `verified` and the others missing.
func statuses(res contract.CheckDomainResult, missing string) map[string]string {
	out := make(map[string]string, len(res.Records))
	for _, r := range res.Records {
		if r.Found {
			out[r.Key] = contract.DomainVerified
		} else {
			out[r.Key] = missing
		}
	}
	return out
}
