package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := testEnv()
	env.RegisterWorkflowWithOptions(SendEmail, workflow.RegisterOptions{Name: SendEmailName})
	env.RegisterActivityWithOptions(sendingActs.Prepare, activity.RegisterOptions{Name: contract.PrepareName})
	env.RegisterActivityWithOptions(sendingActs.RecordEvents, activity.RegisterOptions{Name: contract.RecordEventsName})
	env.RegisterActivityWithOptions(sendingActs.Deliver, activity.RegisterOptions{Name: contract.DeliverName})
	env.RegisterActivityWithOptions(sendingActs.FailEmail, activity.RegisterOptions{Name: contract.FailEmailName})
	env.RegisterActivityWithOptions(sendingActs.DeliverLocal, activity.RegisterOptions{Name: contract.DeliverLocalName})
	env.RegisterActivityWithOptions(sendingActs.PrepareBatch, activity.RegisterOptions{Name: contract.PrepareBatchName})
	env.RegisterActivityWithOptions(sendingActs.RecordBatchEvents, activity.RegisterOptions{Name: contract.RecordBatchEventsName})
	return env
}

var fastPolicy = DeliveryPolicy{Initial: time.Second, Backoff: 2, Max: 10 * time.Second, Expire: time.Hour}

// recorded collects the events the workflow records (RecordEvents, and
// RecordBatchEvents for SendBatch), in order. Read the result after the
// workflow completed: SendBatch runs local activities concurrently, hence
// the lock.
func recorded(env *testsuite.TestWorkflowEnvironment) *[]string {
	var (
		mu  sync.Mutex
		out []string
	)
	record := func(in contract.RecordEventsInput) {
		for _, e := range in.Events {
			out = append(out, e.Type+":"+e.Recipient)
		}
	}
	env.OnActivity(contract.RecordEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordEventsInput) error {
			mu.Lock()
			defer mu.Unlock()
			record(in)
			return nil
		})
	env.OnActivity(contract.RecordBatchEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordBatchEventsInput) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range in.Emails {
				record(e)
			}
			return nil
		})
	return &out
}

func TestSendEmailSandboxOutcomes(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, contract.PrepareInput{EmailID: "e1"}).Return(
		contract.PrepareResult{Sandbox: []contract.SandboxRecipient{
			{Address: "delivered@posthaste.test", Events: []string{"delivered"}},
			{Address: "complained@posthaste.test", Events: []string{"delivered", "complained"}},
			{Address: "bounced@posthaste.test", Events: []string{"bounced"}},
		}}, nil)
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{
		"delivered:delivered@posthaste.test",
		"delivered:complained@posthaste.test", "complained:complained@posthaste.test",
		"bounced:bounced@posthaste.test",
	}, *events)
}

func TestSendEmailWaitsForScheduledTime(t *testing.T) {
	env := newEnv(t)
	start := env.Now()
	at := start.Add(2 * time.Hour)
	var preparedAt time.Time
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ contract.PrepareInput) (contract.PrepareResult, error) {
			preparedAt = env.Now()
			return contract.PrepareResult{Skip: true}, nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", ScheduledAt: &at, Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.False(t, preparedAt.Before(at), "prepared at %v, scheduled for %v", preparedAt, at)
}

func TestSendEmailSkipsCanceledEmail(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{Skip: true}, nil)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	env.AssertNotCalled(t, contract.RecordEventsName, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, contract.DeliverName, mock.Anything, mock.Anything)
}

func TestSendEmailDeliversPerDomainAndRetries(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", TLS: "opportunistic", Recipients: []string{"x@a.test"}},
			{Domain: "b.test", Region: "eu-west-1", TLS: "enforced", ReturnPath: "bounces+e1@send.shop.test",
				Recipients: []string{"y@b.test", "z@b.test"}},
		}}, nil)
	var mu sync.Mutex // the two deliveries run concurrently
	attempts := map[string]int{}
	queues := map[string]string{}
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) error {
			mu.Lock()
			defer mu.Unlock()
			attempts[in.Domain]++
			if in.Domain == "b.test" && (in.TLS != "enforced" || in.ReturnPath != "bounces+e1@send.shop.test") {
				return errors.New("the sender domain's TLS mode and return path must reach Deliver")
			}
			if in.Domain == "a.test" && attempts[in.Domain] < 3 {
				return errors.New("451 4.7.1 greylisted")
			}
			return nil
		})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == contract.DeliverName {
			mu.Lock()
			queues[info.ActivityID] = info.TaskQueue
			mu.Unlock()
		}
	})
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 3, attempts["a.test"], "greylisted twice, then delivered")
	require.Equal(t, 1, attempts["b.test"])
	require.Empty(t, *events, "Deliver records its own outcomes")
	var qs []string
	for _, q := range queues {
		qs = append(qs, q)
	}
	require.ElementsMatch(t, []string{DeliverTaskQueue("us-east-1", ""), DeliverTaskQueue("eu-west-1", "")}, qs)
}

func TestSendEmailBouncesRecipientsWhenDeliveryExpires(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{{Domain: "a.test", Region: "us-east-1", Recipients: []string{"x@a.test"}}},
	}, nil)
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(errors.New("451 4.7.1 try later"))
	var details []map[string]any
	env.OnActivity(contract.RecordEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordEventsInput) error {
			for _, e := range in.Events {
				require.Equal(t, "bounced:x@a.test", e.Type+":"+e.Recipient)
				details = append(details, e.Detail)
			}
			return nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, details, 1)
	require.Equal(t, map[string]any{"type": "Transient", "subType": "General",
		"message":        "Delivery did not succeed before the retry period ended: 451 4.7.1 try later",
		"diagnosticCode": []string{}}, details[0], "Resend's bounce object, without the activity error's framing")
}

func TestSandboxBounceIsANoSuchUserReply(t *testing.T) {
	ev := sandboxEvent("bounced+x@posthaste.test", contract.EventBounced)
	require.Equal(t, contract.EventInput{Type: contract.EventBounced, Recipient: "bounced+x@posthaste.test",
		Detail: map[string]any{"type": "Permanent", "subType": "General",
			"message":        "The recipient's address does not exist: 550 5.1.1 The sandbox address bounced@posthaste.test always bounces.",
			"diagnosticCode": []string{"smtp; 550 5.1.1 The sandbox address bounced@posthaste.test always bounces."}}}, ev)
}

// A permanent error of Deliver itself (not an MX's answer, which Deliver
// records) ends the recipients it held failed, not bounced.
func TestSendEmailFailsRecipientsWhenDeliverFailsPermanently(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", Recipients: []string{"x@a.test"}},
			{Domain: "b.test", Region: "us-east-1", Recipients: []string{"y@b.test"}},
		},
	}, nil)
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) error {
			if in.Domain == "a.test" {
				return temporal.NewNonRetryableApplicationError("the message is gone", contract.ErrTypePermanent, nil)
			}
			return nil
		})
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"failed:x@a.test"}, *events)
}

// A message that cannot be built or signed ends the email failed, with
// the reason, and the workflow completes: nothing is left in `sent`.
func TestSendEmailFailsWhenPrepareFailsPermanently(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{},
		temporal.NewNonRetryableApplicationError("building message: bad header", contract.ErrTypePermanent, nil))
	var failed []contract.FailEmailInput
	env.OnActivity(contract.FailEmailName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.FailEmailInput) error {
			failed = append(failed, in)
			return nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []contract.FailEmailInput{{EmailID: "e1", Reason: "building message: bad header"}}, failed)
	env.AssertNotCalled(t, contract.DeliverName, mock.Anything, mock.Anything)
}

// A database outage longer than one attempt's timeout (the old retry
// window) is outlasted: Prepare keeps retrying, with capped backoff, until
// the database is back, and the email is then sent.
func TestSendEmailStepsOutlastADatabaseOutage(t *testing.T) {
	env := newEnv(t)
	start := env.Now()
	outage := 3 * time.Hour
	tries := 0
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ contract.PrepareInput) (contract.PrepareResult, error) {
			tries++
			if env.Now().Sub(start) < outage {
				return contract.PrepareResult{}, errors.New("dial tcp 127.0.0.1:5432: connection refused")
			}
			return contract.PrepareResult{Sandbox: []contract.SandboxRecipient{
				{Address: "delivered@posthaste.test", Events: []string{"delivered"}}}}, nil
		})
	events := recorded(env)
	policy := fastPolicy
	policy.Steps = StepPolicy{Window: 6 * time.Hour, MaxInterval: 5 * time.Minute}
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: policy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"delivered:delivered@posthaste.test"}, *events)
	// Backoff doubles from a second and is capped at five minutes: about
	// 10 quick tries, then one every five minutes for the rest.
	require.Greater(t, tries, 30)
	require.Less(t, tries, 60)
}

// Past its window a step gives up and the workflow fails, leaving the
// email to the reconciler; the zero policy is the default day.
func TestSendEmailStepsGiveUpAfterTheWindow(t *testing.T) {
	env := newEnv(t)
	start := env.Now()
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
		contract.PrepareResult{}, errors.New("connection refused"))
	policy := fastPolicy
	policy.Steps = StepPolicy{Window: time.Hour, MaxInterval: time.Minute}
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: policy})
	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	took := env.Now().Sub(start)
	require.GreaterOrEqual(t, took, 59*time.Minute)
	require.LessOrEqual(t, took, 61*time.Minute)
	require.Equal(t, 24*time.Hour, StepPolicy{}.localOptions(time.Second).ScheduleToCloseTimeout)
}

// A group whose region the workflow's worker serves (Local) is delivered
// by a local first attempt, and no regular activity runs for it; a group
// of another region goes to that region's queue and is never delivered
// locally.
func TestSendEmailDeliversLocallyOnlyForServedRegions(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", Local: true, Recipients: []string{"x@a.test"}},
			{Domain: "b.test", Region: "eu-west-1", Recipients: []string{"y@b.test"}},
		}}, nil)
	var (
		mu      sync.Mutex
		local   []string
		regular []string
	)
	env.OnActivity(contract.DeliverLocalName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) (contract.DeliverLocalResult, error) {
			mu.Lock()
			defer mu.Unlock()
			local = append(local, in.Domain+"@"+in.Region)
			return contract.DeliverLocalResult{Done: true}, nil
		})
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) error {
			mu.Lock()
			defer mu.Unlock()
			regular = append(regular, in.Domain+"@"+activity.GetInfo(ctx).TaskQueue)
			return nil
		})
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"a.test@us-east-1"}, local)
	require.Equal(t, []string{"b.test@" + DeliverTaskQueue("eu-west-1", "")}, regular)
	require.Empty(t, *events)
}

// A group that leaves from an IP pool other than the default goes to that
// pool's queue in its region, carrying the pool; one of the default pool
// keeps the region's queue of before pools. A local first attempt
// carries the pool too, and its fallback goes to the pool's queue.
func TestSendEmailDeliversOnThePoolsQueue(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", Pool: "acme", Recipients: []string{"x@a.test"}},
			{Domain: "b.test", Region: "eu-west-1", Recipients: []string{"y@b.test"}},
			{Domain: "c.test", Region: "us-east-1", Pool: "acme", Local: true, Recipients: []string{"z@c.test"}},
		}}, nil)
	var (
		mu      sync.Mutex
		local   []string
		regular []string
	)
	env.OnActivity(contract.DeliverLocalName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) (contract.DeliverLocalResult, error) {
			mu.Lock()
			defer mu.Unlock()
			local = append(local, in.Domain+" from "+in.Pool)
			return contract.DeliverLocalResult{Retry: "deferred"}, nil
		})
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) error {
			mu.Lock()
			defer mu.Unlock()
			regular = append(regular, in.Domain+" from "+in.Pool+" on "+activity.GetInfo(ctx).TaskQueue)
			return nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"c.test from acme"}, local)
	require.ElementsMatch(t, []string{
		"a.test from acme on posthaste-deliver-us-east-1/acme",
		"b.test from  on posthaste-deliver-eu-west-1",
		"c.test from acme on posthaste-deliver-us-east-1/acme",
	}, regular)
	require.Equal(t, "posthaste-deliver-us-east-1", DeliverTaskQueue("us-east-1", ""),
		"the default pool's queues keep their names: running histories name them")
}

// A local attempt that does not finish (here a deferral, after the MX
// answered some recipients) hands the group to the regular Deliver on the
// region's queue, after the policy's first interval, with the answers it
// got; the regular activity then retries on the delivery policy.
func TestSendEmailLocalDeferralFallsBackToTheRegionQueue(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", Local: true, Recipients: []string{"x@a.test", "y@a.test"}},
		}}, nil)
	answered := []contract.DeliverOutcome{{Rcpt: "x@a.test", Status: "delivered", Code: 250}}
	var localAt time.Time
	env.OnActivity(contract.DeliverLocalName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) (contract.DeliverLocalResult, error) {
			localAt = env.Now()
			require.Equal(t, "us-east-1", in.Region)
			return contract.DeliverLocalResult{Retry: "1 of 2 recipients deferred: 451 4.7.1 greylisted",
				Answered: answered}, nil
		})
	var (
		attempts []time.Time
		inputs   []contract.DeliverInput
		queue    string
	)
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) error {
			attempts = append(attempts, env.Now())
			inputs = append(inputs, in)
			queue = activity.GetInfo(ctx).TaskQueue
			if len(attempts) < 2 {
				return errors.New("1 of 1 recipients deferred: 451 4.7.1 greylisted")
			}
			return nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, attempts, 2, "the regular Deliver retried on the delivery policy")
	require.GreaterOrEqual(t, attempts[0].Sub(localAt), fastPolicy.Initial, "a deferral is not retried at once")
	require.Equal(t, DeliverTaskQueue("us-east-1", ""), queue)
	for _, in := range inputs {
		require.Equal(t, answered, in.Answered, "the local attempt's answers reach every regular attempt")
		require.Equal(t, []string{"x@a.test", "y@a.test"}, in.Recipients)
	}
}

// A local attempt that fails permanently ends its recipients failed, as
// Deliver's permanent error does, and no regular attempt follows; one that
// errs otherwise (its timeout) falls back to the regular Deliver.
func TestSendEmailLocalAttemptErrors(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", Local: true, Recipients: []string{"x@a.test"}},
			{Domain: "b.test", Region: "us-east-1", Local: true, Recipients: []string{"y@b.test"}},
		}}, nil)
	env.OnActivity(contract.DeliverLocalName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) (contract.DeliverLocalResult, error) {
			if in.Domain == "a.test" {
				return contract.DeliverLocalResult{},
					temporal.NewNonRetryableApplicationError("MX refused by the egress policy", contract.ErrTypePermanent, nil)
			}
			return contract.DeliverLocalResult{}, errors.New("context deadline exceeded")
		})
	var regular []string
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) error {
			regular = append(regular, in.Domain)
			return nil
		})
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"failed:x@a.test"}, *events)
	require.Equal(t, []string{"b.test"}, regular)
}

// When the retry period ends before any regular attempt did (a timeout,
// no reply of an MX), the bounce names the local attempt's reason.
func TestSendEmailExpiryAfterALocalAttemptNamesItsReason(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(contract.PrepareResult{
		Groups: []contract.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", Local: true, Recipients: []string{"x@a.test"}},
		}}, nil)
	const reason = "1 of 1 recipients deferred: 451 4.7.5 MTA-STS policy of a.test: certificate of mx.a.test not valid"
	env.OnActivity(contract.DeliverLocalName, mock.Anything, mock.Anything).Return(
		contract.DeliverLocalResult{Retry: reason}, nil)
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil))
	var details []map[string]any
	env.OnActivity(contract.RecordEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordEventsInput) error {
			for _, e := range in.Events {
				details = append(details, e.Detail)
			}
			return nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, details, 1)
	require.Equal(t, "Delivery did not succeed before the retry period ended: "+reason, details[0]["message"])
}

// When Prepare made a group's first attempt itself (DeliveryGroup.First),
// no DeliverLocal runs: a finished attempt ends the group, a permanent
// failure ends its recipients failed, and one that did not finish hands
// the group to the regular Deliver after the policy's first interval with
// the answers it got. A Local group without First (a history from before)
// still gets its DeliverLocal.
func TestSendEmailTakesPreparesFirstAttempt(t *testing.T) {
	env := newEnv(t)
	answered := []contract.DeliverOutcome{{Rcpt: "w@c.test", Status: "delivered", Code: 250}}
	var preparedAt time.Time
	env.OnActivity(contract.PrepareName, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.PrepareInput) (contract.PrepareResult, error) {
			preparedAt = env.Now()
			return contract.PrepareResult{Groups: []contract.DeliveryGroup{
				{Domain: "a.test", Region: "us-east-1", Local: true, Recipients: []string{"x@a.test"},
					First: &contract.DeliverLocalResult{Done: true}},
				{Domain: "b.test", Region: "us-east-1", Local: true, Recipients: []string{"y@b.test"},
					First: &contract.DeliverLocalResult{Permanent: "MX refused by the egress policy"}},
				{Domain: "c.test", Region: "us-east-1", Local: true, Recipients: []string{"w@c.test", "v@c.test"},
					First: &contract.DeliverLocalResult{Retry: "1 of 2 recipients deferred: 451 4.7.1 greylisted",
						Answered: answered}},
				{Domain: "d.test", Region: "us-east-1", Local: true, Recipients: []string{"u@d.test"}},
			}}, nil
		})
	var (
		mu      sync.Mutex
		local   []string
		regular []contract.DeliverInput
		regAt   time.Time
	)
	env.OnActivity(contract.DeliverLocalName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) (contract.DeliverLocalResult, error) {
			mu.Lock()
			defer mu.Unlock()
			local = append(local, in.Domain)
			return contract.DeliverLocalResult{Done: true}, nil
		})
	env.OnActivity(contract.DeliverName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverInput) error {
			mu.Lock()
			defer mu.Unlock()
			regular, regAt = append(regular, in), env.Now()
			return nil
		})
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"d.test"}, local, "only the group without Prepare's attempt ran DeliverLocal")
	require.Equal(t, []string{"failed:y@b.test"}, *events)
	require.Len(t, regular, 1)
	require.Equal(t, "c.test", regular[0].Domain)
	require.Equal(t, answered, regular[0].Answered, "the first attempt's answers reach the regular Deliver")
	require.GreaterOrEqual(t, regAt.Sub(preparedAt), fastPolicy.Initial, "a deferral is not retried at once")
}
