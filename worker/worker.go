// Package worker registers Posthaste's workflows and activities on their
// task queues and runs the Temporal workers. It also starts workflows for
// the outbox dispatcher (Starter), since it owns the start options that
// make a repeated start harmless.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/activities"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows"
)

// Regions are the delivery regions a domain can choose.
var Regions = []string{"us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"}

// Config chooses what a Worker runs.
type Config struct {
	// Regions whose delivery queues this worker polls; empty → all.
	Regions []string
	// Workflows makes the worker run workflows and local activities
	// (the main task queue). Delivery-only workers leave it false.
	Workflows bool
}

// Worker is a set of Temporal workers sharing one client.
type Worker struct {
	workers []sdkworker.Worker
}

// New registers everything on its queues. The client stays owned by the caller.
func New(c client.Client, acts *activities.Activities, cfg Config, logger *slog.Logger) (*Worker, error) {
	w := &Worker{}
	if cfg.Workflows {
		main := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{
			MaxConcurrentWorkflowTaskPollers:        4,
			MaxConcurrentLocalActivityExecutionSize: 256,
		})
		Register(main, acts)
		w.workers = append(w.workers, main)
	}
	regions := cfg.Regions
	if len(regions) == 0 {
		regions = Regions
	}
	for _, r := range regions {
		if !validRegion(r) {
			return nil, fmt.Errorf("unknown region %q (known: %v)", r, Regions)
		}
		dw := sdkworker.New(c, workflows.DeliverTaskQueue(r), sdkworker.Options{
			MaxConcurrentActivityExecutionSize: 64,
		})
		dw.RegisterActivityWithOptions(acts.Deliver, activity.RegisterOptions{Name: activities.DeliverName})
		w.workers = append(w.workers, dw)
	}
	return w, nil
}

func validRegion(r string) bool {
	for _, k := range Regions {
		if k == r {
			return true
		}
	}
	return false
}

// Register puts the workflows and the activities they run locally on a
// worker (also used by replay tests).
func Register(r sdkworker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.SendEmail, workflow.RegisterOptions{Name: workflows.SendEmailName})
	r.RegisterActivityWithOptions(acts.Prepare, activity.RegisterOptions{Name: activities.PrepareName})
	r.RegisterActivityWithOptions(acts.RecordEvents, activity.RegisterOptions{Name: activities.RecordEventsName})
	r.RegisterWorkflowWithOptions(workflows.VerifyDomain, workflow.RegisterOptions{Name: workflows.VerifyDomainName})
	r.RegisterActivityWithOptions(acts.CheckDomain, activity.RegisterOptions{Name: activities.CheckDomainName})
	r.RegisterActivityWithOptions(acts.SetDomainStatus, activity.RegisterOptions{Name: activities.SetDomainStatusName})
	r.RegisterWorkflowWithOptions(workflows.DeliverWebhook, workflow.RegisterOptions{Name: workflows.DeliverWebhookName})
	r.RegisterActivityWithOptions(acts.DeliverWebhooks, activity.RegisterOptions{Name: activities.DeliverWebhooksName})
}

// WakeWebhook makes the endpoint's DeliverWebhook workflow look for due
// messages: it signals the running workflow or starts one with the signal.
func WakeWebhook(ctx context.Context, c client.Client, webhookID string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := c.SignalWithStartWorkflow(ctx, workflows.WebhookWorkflowID(webhookID),
		workflows.WebhookWakeSignal, nil, client.StartWorkflowOptions{
			TaskQueue:             workflows.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.DeliverWebhookName, workflows.DeliverWebhookInput{WebhookID: webhookID})
	if err != nil {
		return fmt.Errorf("waking delivery of webhook %s: %w", webhookID, err)
	}
	return nil
}

// Waker wakes DeliverWebhook workflows for the API.
type Waker struct{ client client.Client }

// NewWaker returns a Waker.
func NewWaker(c client.Client) *Waker { return &Waker{client: c} }

// Wake makes the endpoint's delivery look for due messages.
func (w *Waker) Wake(ctx context.Context, webhookID string) error {
	return WakeWebhook(ctx, w.client, webhookID)
}

// Verifier starts and nudges VerifyDomain workflows for the API.
type Verifier struct {
	client   client.Client
	schedule workflows.VerifySchedule
}

// NewVerifier returns a Verifier whose new runs use schedule.
func NewVerifier(c client.Client, schedule workflows.VerifySchedule) *Verifier {
	return &Verifier{client: c, schedule: schedule}
}

// Verify makes the domain's verification check its records at once:
// it signals the running VerifyDomain workflow, or starts one (a domain
// never verified, or one whose verification failed) with the signal.
func (v *Verifier) Verify(ctx context.Context, domainID string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := v.client.SignalWithStartWorkflow(ctx, workflows.DomainVerifyWorkflowID(domainID),
		workflows.VerifySignalName, nil, client.StartWorkflowOptions{
			TaskQueue:             workflows.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.VerifyDomainName, workflows.VerifyDomainInput{DomainID: domainID, Schedule: v.schedule})
	if err != nil {
		return fmt.Errorf("starting verification of domain %s: %w", domainID, err)
	}
	return nil
}

// Forget stops the verification of a deleted domain. A domain without a
// running verification is not an error.
func (v *Verifier) Forget(ctx context.Context, domainID string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := v.client.CancelWorkflow(ctx, workflows.DomainVerifyWorkflowID(domainID), "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("stopping verification of domain %s: %w", domainID, err)
	}
	return nil
}

// Start starts every worker; on error the ones started are stopped.
func (w *Worker) Start() error {
	for i, x := range w.workers {
		if err := x.Start(); err != nil {
			for _, y := range w.workers[:i] {
				y.Stop()
			}
			return fmt.Errorf("starting worker: %w", err)
		}
	}
	return nil
}

// Stop stops every worker, waiting for running tasks.
func (w *Worker) Stop() {
	for _, x := range w.workers {
		x.Stop()
	}
}

// Starter starts SendEmail workflows and wakes DeliverWebhook workflows
// for outbox entries.
type Starter struct {
	client   client.Client
	delivery workflows.DeliveryPolicy
}

// NewStarter returns a Starter using the given delivery retry policy.
func NewStarter(c client.Client, delivery workflows.DeliveryPolicy) *Starter {
	return &Starter{client: c, delivery: delivery}
}

// Start starts the workflow of one outbox entry. A workflow ID that was
// already used (running or finished) is not started again and is not an
// error: the entry's work exists.
func (s *Starter) Start(ctx context.Context, it store.OutboxItem) error {
	if it.Kind == store.OutboxWebhook {
		return WakeWebhook(ctx, s.client, it.Ref.String())
	}
	if it.Kind != "send_email" {
		return fmt.Errorf("unknown outbox kind %q", it.Kind)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       workflows.EmailWorkflowID(it.Ref.String()),
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		EnableEagerStart:                         true,
	}, workflows.SendEmailName, workflows.SendEmailInput{
		EmailID: it.Ref.String(), ScheduledAt: it.ScheduledAt, Delivery: s.delivery,
	})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("starting workflow of email %s: %w", it.Ref, err)
	}
	return nil
}
