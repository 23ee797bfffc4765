package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

var testSchedule = VerifySchedule{Interval: time.Minute, FastPeriod: 10 * time.Minute, MaxInterval: time.Hour,
	Expire: 72 * time.Hour, Recheck: 24 * time.Hour}

type statusChange struct {
	after  time.Duration // since the workflow started
	status string
	dkim   string
	dmarc  string
}

// verifyEnv runs VerifyDomain against a DNS whose published records are
// published(elapsed) and records every status it sets.
type verifyEnv struct {
	env     *testsuite.TestWorkflowEnvironment
	start   time.Time
	checks  []time.Duration
	changes []statusChange
}

func newVerifyEnv(t *testing.T, published func(elapsed time.Duration) (found map[string]bool, deleted bool)) *verifyEnv {
	v := &verifyEnv{env: testEnv()}
	v.start = v.env.Now()
	v.env.RegisterWorkflowWithOptions(VerifyDomain, workflow.RegisterOptions{Name: VerifyDomainName})
	v.env.RegisterActivityWithOptions(domainActs.CheckDomain, activity.RegisterOptions{Name: contract.CheckDomainName})
	v.env.RegisterActivityWithOptions(domainActs.SetDomainStatus, activity.RegisterOptions{Name: contract.SetDomainStatusName})
	v.env.OnActivity(contract.CheckDomainName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.CheckDomainInput) (contract.CheckDomainResult, error) {
			require.Equal(t, "d1", in.DomainID)
			elapsed := v.env.Now().Sub(v.start)
			v.checks = append(v.checks, elapsed)
			found, deleted := published(elapsed)
			if deleted {
				return contract.CheckDomainResult{Deleted: true}, nil
			}
			var res contract.CheckDomainResult
			for _, k := range []string{"dkim", "spf_mx", "spf_txt", "dmarc"} {
				res.Records = append(res.Records, contract.RecordCheck{Key: k, Required: k != "dmarc", Found: found[k]})
			}
			return res, nil
		})
	v.env.OnActivity(contract.SetDomainStatusName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.SetDomainStatusInput) error {
			c := statusChange{after: v.env.Now().Sub(v.start), status: in.Status, dkim: in.Records["dkim"], dmarc: in.Records["dmarc"]}
			if n := len(v.changes); n == 0 || v.changes[n-1].status != c.status || v.changes[n-1].dkim != c.dkim {
				v.changes = append(v.changes, c)
			}
			return nil
		})
	return v
}

func all(found bool) map[string]bool {
	return map[string]bool{"dkim": found, "spf_mx": found, "spf_txt": found, "dmarc": found}
}

func required() map[string]bool {
	return map[string]bool{"dkim": true, "spf_mx": true, "spf_txt": true}
}

func TestVerifyDomainPendingThenVerified(t *testing.T) {
	v := newVerifyEnv(t, func(e time.Duration) (map[string]bool, bool) {
		switch {
		case e < 3*time.Minute:
			return all(false), false
		case e < 5*time.Minute:
			return map[string]bool{"dkim": true}, false
		case e < 24*time.Hour:
			return required(), false // DMARC is never required
		}
		return nil, true // deleted: the workflow ends
	})
	v.env.ExecuteWorkflow(VerifyDomainName, VerifyDomainInput{DomainID: "d1", Schedule: testSchedule})
	require.True(t, v.env.IsWorkflowCompleted())
	require.NoError(t, v.env.GetWorkflowError())
	require.Equal(t, []statusChange{
		{0, "pending", "pending", "pending"},
		{3 * time.Minute, "partially_verified", "verified", "pending"},
		{5 * time.Minute, "verified", "verified", "failed"},
	}, v.changes)
	// Every minute while pending, then the daily recheck that finds the
	// domain deleted.
	require.Equal(t, []time.Duration{0, time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute,
		5 * time.Minute, 24*time.Hour + 5*time.Minute}, v.checks)
}

func TestVerifyDomainFailsAfterExpire(t *testing.T) {
	v := newVerifyEnv(t, func(time.Duration) (map[string]bool, bool) { return all(false), false })
	v.env.ExecuteWorkflow(VerifyDomainName, VerifyDomainInput{DomainID: "d1", Schedule: testSchedule})
	require.NoError(t, v.env.GetWorkflowError())
	require.Equal(t, []statusChange{
		{0, "pending", "pending", "pending"},
		{72 * time.Hour, "failed", "failed", "failed"},
	}, v.changes)
	// Every minute for 10 minutes, then doubling up to an hour, never past
	// the deadline.
	require.Equal(t, 10*time.Minute, v.checks[10])
	require.Equal(t, []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour},
		gaps(v.checks[10:18]))
	require.Equal(t, 72*time.Hour, v.checks[len(v.checks)-1])
	require.Less(t, len(v.checks), 100)
}

func gaps(ds []time.Duration) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ds); i++ {
		out = append(out, ds[i]-ds[i-1])
	}
	return out
}

func TestVerifyDomainRecheckTemporaryFailure(t *testing.T) {
	// Verified at once; DKIM and DMARC vanish at 47 h (the daily recheck at
	// 48 h sees it) and come back at 49.5 h; everything vanishes from 90 h
	// for good.
	v := newVerifyEnv(t, func(e time.Duration) (map[string]bool, bool) {
		switch {
		case e < 47*time.Hour:
			return all(true), false
		case e < 49*time.Hour+30*time.Minute:
			return map[string]bool{"spf_mx": true, "spf_txt": true}, false
		case e < 90*time.Hour:
			return all(true), false
		}
		return all(false), false
	})
	v.env.ExecuteWorkflow(VerifyDomainName, VerifyDomainInput{DomainID: "d1", Schedule: testSchedule})
	require.NoError(t, v.env.GetWorkflowError())
	require.Equal(t, []statusChange{
		{0, "verified", "verified", "verified"},
		{48 * time.Hour, "temporary_failure", "temporary_failure", "temporary_failure"},
		// Checked on the verification schedule again: every minute for 10
		// minutes, then 2, 4, 8, 16, 32 and 60 minutes later, so at 50h12m.
		{50*time.Hour + 12*time.Minute, "verified", "verified", "verified"},
		{98*time.Hour + 12*time.Minute, "temporary_failure", "temporary_failure", "temporary_failure"},
		{170*time.Hour + 12*time.Minute, "failed", "failed", "failed"}, // 72 h of temporary failure
	}, v.changes)
}

func TestVerifyDomainSignalChecksAtOnce(t *testing.T) {
	v := newVerifyEnv(t, func(e time.Duration) (map[string]bool, bool) {
		if e < 30*time.Second {
			return all(false), false
		}
		return all(true), false
	})
	v.env.RegisterDelayedCallback(func() { v.env.SignalWorkflow(VerifySignalName, nil) }, 30*time.Second)
	v.env.RegisterDelayedCallback(func() { v.env.SignalWorkflow(VerifySignalName, nil) }, 2*time.Hour)
	v.env.RegisterDelayedCallback(func() { v.env.CancelWorkflow() }, 3*time.Hour)
	v.env.ExecuteWorkflow(VerifyDomainName, VerifyDomainInput{DomainID: "d1", Schedule: testSchedule})
	var canceled *temporal.CanceledError
	require.ErrorAs(t, v.env.GetWorkflowError(), &canceled, "canceled when the domain is deleted")
	require.Equal(t, []statusChange{
		{0, "pending", "pending", "pending"},
		{30 * time.Second, "verified", "verified", "verified"},
	}, v.changes)
	require.Equal(t, []time.Duration{0, 30 * time.Second, 2 * time.Hour}, v.checks, "a nudge checks at once, also when verified")
}

func TestVerifyDomainContinuesAsNew(t *testing.T) {
	v := newVerifyEnv(t, func(time.Duration) (map[string]bool, bool) { return all(true), false })
	v.env.ExecuteWorkflow(VerifyDomainName, VerifyDomainInput{DomainID: "d1", Schedule: testSchedule})
	err := v.env.GetWorkflowError()
	require.Error(t, err)
	require.True(t, workflow.IsContinueAsNewError(err), fmt.Sprint(err))
	require.Len(t, v.checks, 1+rechecksPerRun)
}

func TestVerifyDomainKeepsVerifiedThroughDNSOutage(t *testing.T) {
	env := testEnv()
	env.RegisterWorkflowWithOptions(VerifyDomain, workflow.RegisterOptions{Name: VerifyDomainName})
	env.RegisterActivityWithOptions(domainActs.CheckDomain, activity.RegisterOptions{Name: contract.CheckDomainName})
	env.RegisterActivityWithOptions(domainActs.SetDomainStatus, activity.RegisterOptions{Name: contract.SetDomainStatusName})
	start := env.Now()
	env.OnActivity(contract.CheckDomainName, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.CheckDomainInput) (contract.CheckDomainResult, error) {
			e := env.Now().Sub(start)
			if e > 4*24*time.Hour {
				return contract.CheckDomainResult{Deleted: true}, nil
			}
			// On day 2 the DNS server times out for DKIM.
			outage := e > 24*time.Hour && e < 3*24*time.Hour
			return contract.CheckDomainResult{Records: []contract.RecordCheck{
				{Key: "dkim", Required: true, Found: !outage, Temporary: outage},
				{Key: "spf_mx", Required: true, Found: true},
				{Key: "spf_txt", Required: true, Found: true},
			}}, nil
		})
	var set []string
	env.OnActivity(contract.SetDomainStatusName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.SetDomainStatusInput) error {
			set = append(set, in.Status)
			return nil
		})
	env.ExecuteWorkflow(VerifyDomainName, VerifyDomainInput{DomainID: "d1", Schedule: testSchedule})
	require.NoError(t, env.GetWorkflowError())
	require.NotContains(t, set, "temporary_failure", "a lookup that failed is not a missing record")
	require.Equal(t, "verified", set[0])
}
