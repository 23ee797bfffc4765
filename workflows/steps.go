package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/contract"
)

// StepPolicy is how long the short database steps of a workflow (Prepare,
// RecordEvents, LoadBatch, FailEmail, a webhook pass, a domain check) keep
// retrying: with a backoff doubling from a second up to MaxInterval, for
// Window in all. A step that fails only because PostgreSQL is down
// therefore outlasts an outage as long as Window, and resumes within
// MaxInterval of its end. It travels in the workflow input so a run keeps
// the policy it started with; the zero value means DefaultStepPolicy
// (histories from before the policy existed).
type StepPolicy struct {
	Window      time.Duration
	MaxInterval time.Duration
}

// DefaultStepPolicy outlasts a day-long database outage and resumes within
// a minute of its end.
var DefaultStepPolicy = StepPolicy{Window: 24 * time.Hour, MaxInterval: time.Minute}

// orDefault fills the fields left zero from DefaultStepPolicy.
func (p StepPolicy) orDefault() StepPolicy {
	if p.Window <= 0 {
		p.Window = DefaultStepPolicy.Window
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = DefaultStepPolicy.MaxInterval
	}
	return p
}

// localOptions are the options of the local activity steps: attempt is
// the longest one try may take. Without ScheduleToCloseTimeout the SDK
// would stop retrying once one attempt's time had passed in all.
func (p StepPolicy) localOptions(attempt time.Duration) workflow.LocalActivityOptions {
	p = p.orDefault()
	return workflow.LocalActivityOptions{
		StartToCloseTimeout:    attempt,
		ScheduleToCloseTimeout: p.Window,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        p.MaxInterval,
			NonRetryableErrorTypes: []string{contract.ErrTypePermanent},
		},
	}
}

// stepAttempt bounds one try of a short database step.
const stepAttempt = 30 * time.Second
