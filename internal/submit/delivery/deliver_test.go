package delivery_test

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows"
	"github.com/posthaste/posthaste/workflows/contract"
)

// destMX starts a loopback MX for dest.test with opts and a client that
// delivers to it.
func destMX(t *testing.T, opts smtptest.Options) (*smtptest.Server, *mta.Client) {
	t.Helper()
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, opts)
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	client, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return mx, client
}

// loopback is the egress policy of tests whose MX hosts are on loopback,
// which the policy refuses unless it is listed.
var loopback = egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func TestDeliverClassifiesBouncesAndSuppressesOnlyBadAddresses(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, client := destMX(t, smtptest.Options{
		Rcpt: func(rcpt string, n int) error {
			switch {
			case strings.HasPrefix(rcpt, "gone@"):
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "user unknown"}
			case strings.HasPrefix(rcpt, "off@"):
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 2, 1}, Message: "mailbox disabled"}
			case strings.HasPrefix(rcpt, "spam@"):
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "rejected by policy"}
			case strings.HasPrefix(rcpt, "plain@"):
				return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.NoEnhancedCode, Message: "message content rejected"}
			}
			return nil
		},
	})
	acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil)
	rcpts := []string{"gone@dest.test", "off@dest.test", "spam@dest.test", "plain@dest.test", "ok@dest.test"}
	e := insertEmail(t, st, rcpts...)
	_, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)

	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, contract.DeliverInput{
		EmailID: e.ID.String(), Domain: "dest.test", TLS: "opportunistic", Recipients: rcpts})
	require.NoError(t, err, "bounces are final: nothing to retry")

	ctx := context.Background()
	bounces, err := st.Emails.Bounces(ctx, e.TeamID, e.ID)
	require.NoError(t, err)
	require.Len(t, bounces, 4)
	require.Equal(t, store.Bounce{Type: "Permanent", SubType: "NoEmail",
		Message:        "The recipient's address does not exist or accepts no mail: 550 5.1.1 user unknown",
		DiagnosticCode: []string{"smtp; 550 5.1.1 user unknown"}}, bounces["gone@dest.test"])
	require.Equal(t, "NoEmail", bounces["off@dest.test"].SubType)
	require.Equal(t, store.Bounce{Type: "Transient", SubType: "ContentRejected",
		Message:        "The recipient's mail server rejected the message for its content or by policy: 550 5.7.1 rejected by policy",
		DiagnosticCode: []string{"smtp; 550 5.7.1 rejected by policy"}}, bounces["spam@dest.test"])
	require.Equal(t, []string{"smtp; 554 message content rejected"}, bounces["plain@dest.test"].DiagnosticCode)
	require.Equal(t, "ContentRejected", bounces["plain@dest.test"].SubType)

	// Only the addresses that do not work are suppressed; policy and
	// content rejections say nothing about the address.
	sup, err := st.Emails.Suppressed(ctx, e.TeamID, rcpts)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"gone@dest.test": true, "off@dest.test": true}, sup)
	require.Equal(t, map[string]string{"gone@dest.test": "bounced", "off@dest.test": "bounced",
		"spam@dest.test": "bounced", "plain@dest.test": "bounced", "ok@dest.test": "delivered"}, recipientStatus(t, st, e))
}

// resendWindow is the fixture of the resend-window tests: a migrated store
// st, a second store lost on the same database that the MX closes while it
// accepts the message's data (the attempt's database goes away after the
// MX answered), and that MX, which refuses gone@ with 550 5.1.1.
func resendWindow(t *testing.T) (st, lost *store.Store, mx *smtptest.Server, client *mta.Client) {
	t.Helper()
	ctx := context.Background()
	url := storetest.NewDatabase(t)
	open := func() *store.Store {
		st, err := store.Open(ctx, store.Config{URL: url})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	st = open()
	lost = open()
	mx, client = destMX(t, smtptest.Options{
		Rcpt: func(rcpt string, n int) error {
			if strings.HasPrefix(rcpt, "gone@") {
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "user unknown"}
			}
			return nil
		},
		Data: func(rcpts []string, n int) error {
			lost.Close() // no connection is in use: Deliver loaded all it needs
			return nil
		},
	})
	return st, lost, mx, client
}

// TestDeliverRetryRecordsHeartbeatOutcomesInsteadOfResending covers the
// resend window: the database goes away after the MX accepted the message
// and before the outcome is recorded; the retry, which carries the first
// attempt's heartbeat details, records the outcomes without sending again.
func TestDeliverRetryRecordsHeartbeatOutcomesInsteadOfResending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, lost, mx, client := resendWindow(t)
	rcpts := []string{"a@dest.test", "b@dest.test", "gone@dest.test"}
	e := insertEmail(t, st, rcpts...)
	acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil)
	_, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	in := contract.DeliverInput{EmailID: e.ID.String(), Domain: "dest.test", TLS: "opportunistic", Recipients: rcpts}

	var s testsuite.WorkflowTestSuite
	first := s.NewTestActivityEnvironment()
	var (
		mu   sync.Mutex
		beat converter.EncodedValues
	)
	first.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		beat = d
	})
	firstActs := delivery.New(delivery.Config{Hostname: "out.example"}, lost, client, nil, nil)
	first.RegisterActivity(firstActs.Deliver)
	_, err = first.ExecuteActivity(firstActs.Deliver, in)
	require.ErrorContains(t, err, "closed pool", "the outcome could not be recorded")
	require.Len(t, mx.Messages(), 1)
	require.Equal(t, map[string]string{"a@dest.test": "sent", "b@dest.test": "sent", "gone@dest.test": "sent"},
		recipientStatus(t, st, e), "nothing recorded")

	mu.Lock()
	require.NotNil(t, beat, "the outcome went out as a heartbeat")
	var prog contract.DeliverProgress
	require.NoError(t, beat.Get(&prog))
	mu.Unlock()
	got := map[string]string{}
	for _, o := range prog.Outcomes {
		got[o.Rcpt] = o.Status
	}
	require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "delivered", "gone@dest.test": "bounced"}, got)

	// The retry, on a working database, with the first attempt's details.
	retry := s.NewTestActivityEnvironment()
	retry.SetHeartbeatDetails(prog)
	retry.RegisterActivity(acts.Deliver)
	_, err = retry.ExecuteActivity(acts.Deliver, in)
	require.NoError(t, err)
	require.Len(t, mx.Messages(), 1, "the MX received the message once")
	require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "delivered", "gone@dest.test": "bounced"},
		recipientStatus(t, st, e))
	sp, err := storetest.SuppressionByEmail(ctx, st, e.TeamID, "gone@dest.test")
	require.NoError(t, err)
	require.Equal(t, e.ID, *sp.EmailID)
	bounces, err := st.Emails.Bounces(ctx, e.TeamID, e.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"smtp; 550 5.1.1 user unknown"}, bounces["gone@dest.test"].DiagnosticCode)

	// Yet another retry finds everything final and sends nothing.
	again := s.NewTestActivityEnvironment()
	again.SetHeartbeatDetails(prog)
	again.RegisterActivity(acts.Deliver)
	_, err = again.ExecuteActivity(acts.Deliver, in)
	require.NoError(t, err)
	require.Len(t, mx.Messages(), 1)
}

// sendEmailEnv is a test environment running the real SendEmail workflow
// with acts' Prepare, RecordEvents, Deliver and FailEmail, and the
// activities of more (by name), which add to or replace those.
func sendEmailEnv(acts *delivery.Sending, more map[string]any) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterWorkflowWithOptions(workflows.SendEmail, workflow.RegisterOptions{Name: workflows.SendEmailName})
	fns := map[string]any{
		contract.PrepareName: acts.Prepare, contract.RecordEventsName: acts.RecordEvents,
		contract.DeliverName: acts.Deliver, contract.FailEmailName: acts.FailEmail,
	}
	for name, fn := range more {
		fns[name] = fn
	}
	for name, fn := range fns {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return env
}

// An MX on a private address is never connected to: through the real
// workflow, the email's recipients end `failed` with the reason, at the
// first attempt, and the MX hears nothing.
func TestDeliverToPrivateMXFailsTheEmail(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	// The production default: no private targets, nothing listed.
	client, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil)
	e := insertEmail(t, st, "a@dest.test", "b@dest.test", "delivered@posthaste.test")

	env := sendEmailEnv(acts, nil)
	var attempts int
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == contract.DeliverName {
			attempts++
		}
	})
	env.ExecuteWorkflow(workflows.SendEmailName, workflows.SendEmailInput{EmailID: e.ID.String(),
		Delivery: workflows.DeliveryPolicy{Initial: time.Second, Backoff: 2, Max: time.Minute, Expire: time.Hour}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 1, attempts, "a refusal is not retried")
	require.Zero(t, mx.Connections())

	const reason = "MX host mx.dest.test resolves only to loopback, private, link-local or cloud metadata addresses, " +
		"which the egress policy refuses"
	require.Equal(t, map[string]string{"a@dest.test": "failed", "b@dest.test": "failed",
		"delivered@posthaste.test": "delivered"}, recipientStatus(t, st, e))
	evs, err := st.Emails.Events(context.Background(), e.ID)
	require.NoError(t, err)
	failed := map[string]any{}
	for _, ev := range evs {
		if ev.Type == store.EventFailed {
			failed[ev.Recipient] = ev.Detail["reason"]
		}
	}
	require.Equal(t, map[string]any{"a@dest.test": reason, "b@dest.test": reason}, failed)
}

// TestDeliverLocalHandsUnrecordedAnswersToTheFallback covers the resend
// window of local-first delivery through the real SendEmail workflow: the
// local first attempt, which has no heartbeat, loses its database after
// the MX accepted the message; its result carries the MX's answers, and
// the regular Deliver that takes over on the region's queue records them
// without sending again. The first attempt is Prepare's own
// (DeliveryGroup.First) or, in a history from before it, DeliverLocal's.
func TestDeliverLocalHandsUnrecordedAnswersToTheFallback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		local int // DeliverLocal runs
	}{{"prepare", 0}, {"deliver local", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, lost, mx, client := resendWindow(t)
			rcpts := []string{"a@dest.test", "b@dest.test", "gone@dest.test"}
			e := insertEmail(t, st, rcpts...)
			regions := []string{delivery.DefaultRegion}
			acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil).WithLocalDelivery(regions)
			lostActs := delivery.New(delivery.Config{Hostname: "out.example"}, lost, client, nil, nil).WithLocalDelivery(regions)
			more := map[string]any{contract.DeliverLocalName: lostActs.DeliverLocal, contract.PrepareName: lostActs.Prepare}
			if tc.local > 0 {
				// As recorded before Prepare made first attempts: a
				// Local group without one.
				plain := delivery.New(delivery.Config{Hostname: "out.example"}, st, nil, nil, nil)
				more[contract.PrepareName] = func(ctx context.Context, in contract.PrepareInput) (contract.PrepareResult, error) {
					res, err := plain.Prepare(ctx, in)
					for i := range res.Groups {
						res.Groups[i].Local = true
					}
					return res, err
				}
			}
			env := sendEmailEnv(acts, more)
			var (
				mu       sync.Mutex
				started  []string
				answered []contract.DeliverOutcome
			)
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
				if info.ActivityType.Name != contract.DeliverName {
					return
				}
				var in contract.DeliverInput
				require.NoError(t, args.Get(&in))
				mu.Lock()
				defer mu.Unlock()
				started = append(started, info.ActivityType.Name)
				answered = in.Answered
			})
			var localRuns int
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				if info.ActivityType.Name == contract.DeliverLocalName {
					mu.Lock()
					defer mu.Unlock()
					localRuns++
				}
			})
			env.ExecuteWorkflow(workflows.SendEmailName, workflows.SendEmailInput{EmailID: e.ID.String(),
				Delivery: workflows.DeliveryPolicy{Initial: time.Second, Backoff: 2, Max: time.Minute, Expire: time.Hour}})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tc.local, localRuns, "DeliverLocal runs")
			require.Equal(t, []string{contract.DeliverName}, started, "one regular attempt took over")
			got := map[string]string{}
			for _, o := range answered {
				got[o.Rcpt] = o.Status
			}
			require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "delivered", "gone@dest.test": "bounced"},
				got, "the local attempt's answers reached the regular Deliver")
			require.Len(t, mx.Messages(), 1, "the MX received the message once")
			require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "delivered", "gone@dest.test": "bounced"},
				recipientStatus(t, st, e))
			sp, err := storetest.SuppressionByEmail(ctx, st, e.TeamID, "gone@dest.test")
			require.NoError(t, err)
			require.Equal(t, e.ID, *sp.EmailID)
		})
	}
}

// TestDeliverLocalDeliversOnlyForServedRegions: Prepare marks a group
// local, and makes its first attempt, only when the worker serves the
// sender domain's region, and DeliverLocal of a worker that does not serve it (one that took a
// workflow over from another) sends nothing and hands the group to the
// regular Deliver. Without a Deliverer nothing is ever local.
func TestDeliverLocalDeliversOnlyForServedRegions(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	mx, client := destMX(t, smtptest.Options{})
	e := insertEmail(t, st, "a@dest.test")
	base := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil)

	res, err := run[contract.PrepareInput, contract.PrepareResult](t, base.WithLocalDelivery([]string{"eu-west-1"}).Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Len(t, res.Groups, 1)
	require.Equal(t, delivery.DefaultRegion, res.Groups[0].Region)
	require.False(t, res.Groups[0].Local, "the worker does not serve the group's region")

	res, err = run[contract.PrepareInput, contract.PrepareResult](t,
		delivery.New(delivery.Config{Hostname: "out.example"}, st, nil, nil, nil).WithLocalDelivery([]string{delivery.DefaultRegion}).Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.False(t, res.Groups[0].Local, "a process that does not deliver")

	require.Zero(t, mx.Connections(), "no first attempt where the group is not local")

	res, err = run[contract.PrepareInput, contract.PrepareResult](t, base.WithLocalDelivery([]string{delivery.DefaultRegion}).Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.True(t, res.Groups[0].Local)
	require.Equal(t, &contract.DeliverLocalResult{Done: true}, res.Groups[0].First, "Prepare made the first attempt")
	require.Len(t, mx.Messages(), 1)
	require.Equal(t, map[string]string{"a@dest.test": "delivered"}, recipientStatus(t, st, e))

	// DeliverLocal, of histories from before Prepare's first attempts.
	e2 := insertEmail(t, st, "b@dest.test")
	_, err = run[contract.PrepareInput, contract.PrepareResult](t, base.Prepare, contract.PrepareInput{EmailID: e2.ID.String()})
	require.NoError(t, err)
	in := contract.DeliverInput{EmailID: e2.ID.String(), Domain: "dest.test", Region: delivery.DefaultRegion,
		TLS: "opportunistic", Recipients: []string{"b@dest.test"}}
	out, err := run[contract.DeliverInput, contract.DeliverLocalResult](t, base.WithLocalDelivery([]string{"eu-west-1"}).DeliverLocal, in)
	require.NoError(t, err)
	require.False(t, out.Done)
	require.Contains(t, out.Retry, "does not serve region")
	require.Len(t, mx.Messages(), 1, "nothing sent")

	out, err = run[contract.DeliverInput, contract.DeliverLocalResult](t, base.WithLocalDelivery([]string{delivery.DefaultRegion}).DeliverLocal, in)
	require.NoError(t, err)
	require.True(t, out.Done)
	require.Len(t, mx.Messages(), 2)
	require.Equal(t, map[string]string{"b@dest.test": "delivered"}, recipientStatus(t, st, e2))
}
