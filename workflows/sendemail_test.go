package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/activities"
)

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(SendEmail, workflow.RegisterOptions{Name: SendEmailName})
	env.RegisterActivityWithOptions(a.Prepare, activity.RegisterOptions{Name: activities.PrepareName})
	env.RegisterActivityWithOptions(a.RecordEvents, activity.RegisterOptions{Name: activities.RecordEventsName})
	env.RegisterActivityWithOptions(a.Deliver, activity.RegisterOptions{Name: activities.DeliverName})
	return env
}

var fastPolicy = DeliveryPolicy{Initial: time.Second, Backoff: 2, Max: 10 * time.Second, Expire: time.Hour}

// recorded collects the events the workflow records, in order.
func recorded(env *testsuite.TestWorkflowEnvironment) *[]string {
	var out []string
	env.OnActivity(activities.RecordEventsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecordEventsInput) error {
			for _, e := range in.Events {
				out = append(out, e.Type+":"+e.Recipient)
			}
			return nil
		})
	return &out
}

func TestSendEmailSandboxOutcomes(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.PrepareName, mock.Anything, activities.PrepareInput{EmailID: "e1"}).Return(
		activities.PrepareResult{Sandbox: []activities.SandboxRecipient{
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
	env.OnActivity(activities.PrepareName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ activities.PrepareInput) (activities.PrepareResult, error) {
			preparedAt = env.Now()
			return activities.PrepareResult{Skip: true}, nil
		})
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", ScheduledAt: &at, Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.False(t, preparedAt.Before(at), "prepared at %v, scheduled for %v", preparedAt, at)
}

func TestSendEmailSkipsCanceledEmail(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.PrepareName, mock.Anything, mock.Anything).Return(activities.PrepareResult{Skip: true}, nil)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	env.AssertNotCalled(t, activities.RecordEventsName, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, activities.DeliverName, mock.Anything, mock.Anything)
}

func TestSendEmailDeliversPerDomainAndRetries(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.PrepareName, mock.Anything, mock.Anything).Return(activities.PrepareResult{
		Groups: []activities.DeliveryGroup{
			{Domain: "a.test", Region: "us-east-1", TLS: "opportunistic", Recipients: []string{"x@a.test"}},
			{Domain: "b.test", Region: "eu-west-1", TLS: "opportunistic", Recipients: []string{"y@b.test", "z@b.test"}},
		}}, nil)
	var mu sync.Mutex // the two deliveries run concurrently
	attempts := map[string]int{}
	queues := map[string]string{}
	env.OnActivity(activities.DeliverName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeliverInput) error {
			mu.Lock()
			defer mu.Unlock()
			attempts[in.Domain]++
			if in.Domain == "a.test" && attempts[in.Domain] < 3 {
				return errors.New("451 4.7.1 greylisted")
			}
			return nil
		})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.DeliverName {
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
	require.ElementsMatch(t, []string{DeliverTaskQueue("us-east-1"), DeliverTaskQueue("eu-west-1")}, qs)
}

func TestSendEmailBouncesRecipientsWhenDeliveryExpiresOrFailsPermanently(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.PrepareName, mock.Anything, mock.Anything).Return(activities.PrepareResult{
		Groups: []activities.DeliveryGroup{{Domain: "a.test", Region: "us-east-1", Recipients: []string{"x@a.test"}}},
	}, nil)
	env.OnActivity(activities.DeliverName, mock.Anything, mock.Anything).Return(
		temporal.NewNonRetryableApplicationError("null MX", activities.ErrTypePermanent, nil))
	events := recorded(env)
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"bounced:x@a.test"}, *events)
}

func TestSendEmailFailsWhenPrepareFailsPermanently(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.PrepareName, mock.Anything, mock.Anything).Return(activities.PrepareResult{},
		temporal.NewNonRetryableApplicationError("bad", activities.ErrTypePermanent, nil))
	env.ExecuteWorkflow(SendEmailName, SendEmailInput{EmailID: "e1", Delivery: fastPolicy})
	require.Error(t, env.GetWorkflowError())
}
