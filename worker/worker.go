// Package worker registers Posthaste's workflows and activities on their
// task queues and runs the Temporal workers. It also starts workflows for
// the outbox dispatcher and the reconciler (Starter), since it owns the
// start options that make a repeated start harmless, and keeps the
// retention and reconcile Schedules.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/health/notices"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/outbox"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/webhook"
	"github.com/posthaste/posthaste/workflows"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Config chooses what a Worker runs.
type Config struct {
	// Regions whose delivery queues this worker polls; empty → all.
	Regions []string
	// Pools are the IP pools whose delivery queues this worker polls in
	// each of Regions, "" standing for the default pool; empty → the
	// default pool only. The sending activities must have a Sender for
	// each (delivery.NewWithSenders).
	Pools []string
	// Workflows makes the worker run workflows and local activities
	// (the main task queue). Delivery-only workers leave it false.
	Workflows bool
	// StopTimeout is how long Stop lets running activities finish before
	// it cancels them; 0 → DefaultStopTimeout.
	StopTimeout time.Duration
	// Health is the account health activity, run by a worker that runs
	// workflows (the AccountHealth workflow is registered there in any
	// case); nil: none.
	Health *notices.Activities
	// InboundSlots bounds how many received messages a worker that runs
	// workflows processes at once (workflows.InboundTaskQueue); 0 →
	// DefaultInboundSlots.
	InboundSlots int
}

// DefaultInboundSlots is Config.InboundSlots when unset.
const DefaultInboundSlots = 4

// DefaultStopTimeout lets a delivery that is under way when the process
// is asked to stop read the MX's answer and record it: canceled between
// the end of its data and the answer, it could not know the message had
// been accepted, and its retry would send it again.
const DefaultStopTimeout = 8 * time.Second

// Activities are the activities a worker registers, each workflow's from
// the package of its area, every one built once in cmd (each with its own
// config) and assembled here. The AccountHealth activity is Config.Health.
type Activities struct {
	Sending      *delivery.Sending       // SendEmail, SendBatch
	Reconciler   *delivery.Reconciler    // Reconcile
	Retention    *datareq.Retention      // Retention
	Inbound      *receiving.Activities   // ProcessInbound
	Domains      *domains.Activities     // VerifyDomain
	Imports      *imports.Activities     // ContactImport
	Broadcasts   *broadcast.Activities   // Broadcast
	DataRequests *datareq.Activities     // DataRequest
	Webhooks     *webhook.Activities     // DeliverWebhook
	Automations  *automations.Activities // AutomationRun
}

// StickyTimeout is how long a workflow task waits for the worker that
// holds its workflow in memory before any worker may take it (and replay
// the workflow). The SDK's 5 s turned most wakes of a backlog of due
// timers into a timed-out task and a replay, which made the backlog
// longer still: at 10,000 automation runs falling due, 60 s took the
// emails accepted a second while they fell due from 81.8 to 104.8 (go
// run ./bench -automations). A worker that crashed leaves the tasks
// queued for it waiting this long; once it has not polled for 10 s, the
// server sends later ones to any worker at once.
const StickyTimeout = 30 * time.Second

// SizeWorkflowCache sets how many workflows the process keeps in memory
// between their tasks: the SDK's sticky cache, one per process, shared
// by every SDK worker in it (an embedded Temporal server's own included)
// and sized when the first of them is built. Call it before: in `dev`,
// before the embedded server starts.
func SizeWorkflowCache(n int) {
	if n > 0 {
		sdkworker.SetStickyWorkflowCacheSize(n)
	}
}

// Worker is a set of Temporal workers sharing one client.
type Worker struct {
	workers []sdkworker.Worker
}

// New registers everything on its queues. The client stays owned by the caller.
func New(c client.Client, acts Activities, cfg Config, logger *slog.Logger) (*Worker, error) {
	w := &Worker{}
	stop := cfg.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	regions := cfg.Regions
	if len(regions) == 0 {
		regions = domains.Regions
	}
	for _, r := range regions {
		if !domains.ValidRegion(r) {
			return nil, fmt.Errorf("unknown region %q (known: %v)", r, domains.Regions)
		}
	}
	pools := cfg.Pools
	if len(pools) == 0 {
		pools = []string{""}
	}
	for _, p := range pools {
		if p == "" {
			continue
		}
		if err := ippool.ValidName(p); err != nil {
			return nil, err
		}
	}
	if cfg.Workflows {
		main := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{
			MaxConcurrentWorkflowTaskPollers:        4,
			MaxConcurrentLocalActivityExecutionSize: 256,
			WorkerStopTimeout:                       stop,
			StickyScheduleToStartTimeout:            StickyTimeout,
		})
		// This worker serves the delivery queues of regions and pools
		// too: its workflows make the first delivery attempt of those
		// regions' groups, from those pools, a local activity
		// (delivery.DeliverLocal).
		local := acts
		local.Sending = acts.Sending.WithLocalDelivery(regions)
		Register(main, local)
		RegisterHealth(main, cfg.Health)
		w.workers = append(w.workers, main)

		// Received mail is processed on a queue and slots of its own
		// (issue 33 point 1): the messages of a flood wait there, each
		// loaded whole by its local activity, at most InboundSlots at
		// a time, while the main queue serves sending as usual.
		slots := cfg.InboundSlots
		if slots <= 0 {
			slots = DefaultInboundSlots
		}
		iw := sdkworker.New(c, workflows.InboundTaskQueue, sdkworker.Options{
			MaxConcurrentWorkflowTaskExecutionSize:  max(slots, 2),
			MaxConcurrentLocalActivityExecutionSize: slots,
			MaxConcurrentActivityExecutionSize:      slots,
			MaxConcurrentWorkflowTaskPollers:        2,
			WorkerStopTimeout:                       stop,
		})
		RegisterInbound(iw, acts)
		w.workers = append(w.workers, iw)
	}
	for _, r := range regions {
		for _, p := range pools {
			dw := sdkworker.New(c, workflows.DeliverTaskQueue(r, p), sdkworker.Options{
				MaxConcurrentActivityExecutionSize: 64,
				WorkerStopTimeout:                  stop,
			})
			dw.RegisterActivityWithOptions(acts.Sending.Deliver, activity.RegisterOptions{Name: contract.DeliverName})
			w.workers = append(w.workers, dw)
		}
	}
	return w, nil
}

// Register puts the workflows and the activities they run locally on a
// worker (also used by replay tests).
func Register(r sdkworker.Registry, acts Activities) {
	r.RegisterWorkflowWithOptions(workflows.SendEmail, workflow.RegisterOptions{Name: workflows.SendEmailName})
	r.RegisterWorkflowWithOptions(workflows.SendBatch, workflow.RegisterOptions{Name: workflows.SendBatchName})
	r.RegisterActivityWithOptions(acts.Sending.Prepare, activity.RegisterOptions{Name: contract.PrepareName})
	r.RegisterActivityWithOptions(acts.Sending.LoadBatch, activity.RegisterOptions{Name: contract.LoadBatchName})
	r.RegisterActivityWithOptions(acts.Sending.PrepareBatch, activity.RegisterOptions{Name: contract.PrepareBatchName})
	r.RegisterActivityWithOptions(acts.Sending.RecordBatchEvents, activity.RegisterOptions{Name: contract.RecordBatchEventsName})
	r.RegisterActivityWithOptions(acts.Sending.RecordEvents, activity.RegisterOptions{Name: contract.RecordEventsName})
	r.RegisterActivityWithOptions(acts.Sending.FailEmail, activity.RegisterOptions{Name: contract.FailEmailName})
	r.RegisterActivityWithOptions(acts.Sending.DeliverLocal, activity.RegisterOptions{Name: contract.DeliverLocalName})
	r.RegisterWorkflowWithOptions(workflows.VerifyDomain, workflow.RegisterOptions{Name: workflows.VerifyDomainName})
	r.RegisterActivityWithOptions(acts.Domains.CheckDomain, activity.RegisterOptions{Name: contract.CheckDomainName})
	r.RegisterActivityWithOptions(acts.Domains.SetDomainStatus, activity.RegisterOptions{Name: contract.SetDomainStatusName})
	r.RegisterWorkflowWithOptions(workflows.Retention, workflow.RegisterOptions{Name: workflows.RetentionName})
	r.RegisterActivityWithOptions(acts.Retention.PurgeEmails, activity.RegisterOptions{Name: contract.PurgeEmailsName})
	r.RegisterActivityWithOptions(acts.Retention.PurgeRequestLogs, activity.RegisterOptions{Name: contract.PurgeRequestLogsName})
	r.RegisterActivityWithOptions(acts.Retention.PurgeAudit, activity.RegisterOptions{Name: contract.PurgeAuditName})
	r.RegisterActivityWithOptions(acts.Retention.PurgeExpired, activity.RegisterOptions{Name: contract.PurgeExpiredName})
	r.RegisterWorkflowWithOptions(workflows.DeliverWebhook, workflow.RegisterOptions{Name: workflows.DeliverWebhookName})
	r.RegisterActivityWithOptions(acts.Webhooks.DeliverWebhooks, activity.RegisterOptions{Name: contract.DeliverWebhooksName})
	r.RegisterWorkflowWithOptions(workflows.Reconcile, workflow.RegisterOptions{Name: workflows.ReconcileName})
	r.RegisterActivityWithOptions(acts.Reconciler.ReconcileEmails, activity.RegisterOptions{Name: contract.ReconcileEmailsName})
	r.RegisterWorkflowWithOptions(workflows.ContactImport, workflow.RegisterOptions{Name: workflows.ContactImportName})
	r.RegisterActivityWithOptions(acts.Imports.StartContactImport, activity.RegisterOptions{Name: contract.StartContactImportName})
	r.RegisterActivityWithOptions(acts.Imports.ApplyImportChunk, activity.RegisterOptions{Name: contract.ApplyImportChunkName})
	r.RegisterActivityWithOptions(acts.Imports.FinishContactImport, activity.RegisterOptions{Name: contract.FinishContactImportName})
	r.RegisterWorkflowWithOptions(workflows.Broadcast, workflow.RegisterOptions{Name: workflows.BroadcastName})
	r.RegisterActivityWithOptions(acts.Broadcasts.StartBroadcast, activity.RegisterOptions{Name: contract.StartBroadcastName})
	r.RegisterActivityWithOptions(acts.Broadcasts.ReserveBroadcastPace, activity.RegisterOptions{Name: contract.ReserveBroadcastPaceName})
	r.RegisterActivityWithOptions(acts.Broadcasts.HandOffBroadcastChunk, activity.RegisterOptions{Name: contract.HandOffBroadcastChunkName})
	r.RegisterActivityWithOptions(acts.Broadcasts.FinishBroadcast, activity.RegisterOptions{Name: contract.FinishBroadcastName})
	r.RegisterWorkflowWithOptions(workflows.DataRequest, workflow.RegisterOptions{Name: workflows.DataRequestName})
	r.RegisterActivityWithOptions(acts.DataRequests.StartDataRequest, activity.RegisterOptions{Name: contract.StartDataRequestName})
	r.RegisterActivityWithOptions(acts.DataRequests.ExportDataRequest, activity.RegisterOptions{Name: contract.ExportDataRequestName})
	r.RegisterActivityWithOptions(acts.DataRequests.EraseDataRequest, activity.RegisterOptions{Name: contract.EraseDataRequestName})
	r.RegisterActivityWithOptions(acts.DataRequests.EraseSubjectHistory, activity.RegisterOptions{Name: contract.EraseSubjectHistoryName})
	r.RegisterActivityWithOptions(acts.DataRequests.FinishDataRequest, activity.RegisterOptions{Name: contract.FinishDataRequestName})
	r.RegisterWorkflowWithOptions(workflows.AutomationRun, workflow.RegisterOptions{Name: workflows.AutomationRunName})
	r.RegisterActivityWithOptions(acts.Automations.LoadAutomationRun, activity.RegisterOptions{Name: contract.LoadAutomationRunName})
	r.RegisterActivityWithOptions(acts.Automations.RunAutomationStep, activity.RegisterOptions{Name: contract.RunAutomationStepName})
	r.RegisterActivityWithOptions(acts.Automations.FinishAutomationRun, activity.RegisterOptions{Name: contract.FinishAutomationRunName})
	// ProcessInbound runs on workflows.InboundTaskQueue (RegisterInbound);
	// it stays here for the workflows started on this queue before.
	RegisterInbound(r, acts)
}

// RegisterInbound puts the ProcessInbound workflow and its local activity
// on a worker.
func RegisterInbound(r sdkworker.Registry, acts Activities) {
	r.RegisterWorkflowWithOptions(workflows.ProcessInbound, workflow.RegisterOptions{Name: workflows.ProcessInboundName})
	r.RegisterActivityWithOptions(acts.Inbound.ProcessInboundMessage, activity.RegisterOptions{Name: contract.ProcessInboundMessageName})
}

// RetentionCron is when the retention sweep runs: daily at 03:17 UTC.
const RetentionCron = "17 3 * * *"

// EnsureRetentionSchedule creates the Schedule that runs the Retention
// workflow daily, or, when it exists (every worker calls this at start),
// brings its workflow input up to date. Calling it again is harmless.
func EnsureRetentionSchedule(ctx context.Context, c client.Client, in workflows.RetentionInput) error {
	return ensureSchedule(ctx, c, "retention", client.ScheduleSpec{CronExpressions: []string{RetentionCron}, TimeZoneName: "UTC"},
		&client.ScheduleWorkflowAction{
			ID:        workflows.RetentionScheduleID,
			Workflow:  workflows.RetentionName,
			Args:      []any{in},
			TaskQueue: workflows.TaskQueue,
		})
}

// ensureSchedule creates the Schedule whose ID is action.ID, or, when it
// exists, brings its spec and action up to date. Overlapping runs are
// skipped. what names the schedule in errors.
func ensureSchedule(ctx context.Context, c client.Client, what string, spec client.ScheduleSpec,
	action *client.ScheduleWorkflowAction) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      action.ID,
		Spec:    spec,
		Action:  action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("creating the %s schedule: %w", what, err)
	}
	h := c.ScheduleClient().GetHandle(ctx, action.ID)
	err = h.Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(u client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			sch := u.Description.Schedule
			sch.Action = action
			sch.Spec = &spec
			return &client.ScheduleUpdate{Schedule: &sch}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("updating the %s schedule: %w", what, err)
	}
	return nil
}

// WakeWebhook makes the endpoint's DeliverWebhook workflow look for due
// messages: it signals the running workflow or starts one with the signal,
// whose failing passes retry on steps.
func WakeWebhook(ctx context.Context, c client.Client, webhookID string, steps workflows.StepPolicy) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := c.SignalWithStartWorkflow(ctx, workflows.WebhookWorkflowID(webhookID),
		workflows.WebhookWakeSignal, nil, client.StartWorkflowOptions{
			TaskQueue:             workflows.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.DeliverWebhookName, workflows.DeliverWebhookInput{WebhookID: webhookID, Steps: steps})
	if err != nil {
		return fmt.Errorf("waking delivery of webhook %s: %w", webhookID, err)
	}
	return nil
}

// WebhookWaker wakes DeliverWebhook workflows for the API.
type WebhookWaker struct {
	client client.Client
	steps  workflows.StepPolicy
}

// NewWebhookWaker returns a WebhookWaker whose new workflows retry failing
// passes on steps.
func NewWebhookWaker(c client.Client, steps workflows.StepPolicy) *WebhookWaker {
	return &WebhookWaker{client: c, steps: steps}
}

// Wake makes the endpoint's delivery look for due messages.
func (w *WebhookWaker) Wake(ctx context.Context, webhookID string) error {
	return WakeWebhook(ctx, w.client, webhookID, w.steps)
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

// Stop stops every worker at once, each letting its running activities
// finish within the stop timeout.
func (w *Worker) Stop() {
	var wg sync.WaitGroup
	for _, x := range w.workers {
		wg.Go(x.Stop)
	}
	wg.Wait()
}

// Starter starts SendEmail, SendBatch, ContactImport, ProcessInbound,
// Broadcast, DataRequest and AutomationRun workflows and wakes
// DeliverWebhook and AutomationRun workflows for outbox entries.
type Starter struct {
	client   client.Client
	delivery workflows.DeliveryPolicy
	// BroadcastRecheck is how often a paused broadcast looks whether it
	// may go on (workflows.BroadcastInput.PauseRecheck); 0 → the default.
	BroadcastRecheck time.Duration
	// EraseWait is how long an erasure waits out the payload codec's key
	// cache (workflows.DataRequestInput.EraseWait); 0 → the default.
	EraseWait time.Duration
	// AutomationRecheck is how often a run's send_email step of a team
	// whose sending is paused tries again
	// (workflows.AutomationRunInput.PauseRecheck); 0 → the default.
	AutomationRecheck time.Duration
}

// NewStarter returns a Starter using the given delivery retry policy.
func NewStarter(c client.Client, delivery workflows.DeliveryPolicy) *Starter {
	return &Starter{client: c, delivery: delivery}
}

// WorkflowID is the ID of the workflow that sends an outbox entry's work:
// `email/<id>` or `batch/<id>`, with the team and the idempotency key (as
// workflows.KeyInID shows it) in between when the request carried one. An
// unknown kind is an error wrapping outbox.ErrUnstartable.
func WorkflowID(it store.OutboxItem) (string, error) {
	ref := it.Ref.String()
	switch it.Kind {
	case store.OutboxSendEmail:
		if it.IdempotencyKey != nil {
			return workflows.KeyedEmailWorkflowID(it.TeamID.String(), *it.IdempotencyKey, ref), nil
		}
		return workflows.EmailWorkflowID(ref), nil
	case store.OutboxSendBatch:
		if it.IdempotencyKey != nil {
			return workflows.KeyedBatchWorkflowID(it.TeamID.String(), *it.IdempotencyKey, ref), nil
		}
		return workflows.BatchWorkflowID(ref), nil
	case store.OutboxContactImport:
		return workflows.ContactImportWorkflowID(ref), nil
	case store.OutboxInbound:
		return workflows.InboundWorkflowID(ref), nil
	case store.OutboxBroadcast:
		return workflows.BroadcastWorkflowID(ref), nil
	case store.OutboxDataRequest:
		return workflows.DataRequestWorkflowID(ref), nil
	case store.OutboxAutomationRun, store.OutboxAutomationWake:
		return workflows.AutomationRunWorkflowID(ref), nil
	}
	return "", fmt.Errorf("%w: unknown outbox kind %q", outbox.ErrUnstartable, it.Kind)
}

// EmailWorkflowID is the ID of the workflow that sends an email: its own
// SendEmail, the SendBatch of its batch, or, once the reconciler restarted
// it, its latest restart.
func EmailWorkflowID(ref store.EmailRef) string {
	if ref.Restarts > 0 {
		return workflows.RestartEmailWorkflowID(ref.ID.String(), ref.Restarts)
	}
	if ref.BatchID != nil {
		id, _ := WorkflowID(store.OutboxItem{Kind: store.OutboxSendBatch, TeamID: ref.TeamID, Ref: *ref.BatchID,
			IdempotencyKey: ref.IdempotencyKey})
		return id
	}
	id, _ := WorkflowID(store.OutboxItem{Kind: store.OutboxSendEmail, TeamID: ref.TeamID, Ref: ref.ID,
		IdempotencyKey: ref.IdempotencyKey})
	return id
}

// Start starts the workflow of one outbox entry. A workflow ID that was
// already used (running or finished) is not started again and is not an
// error: the entry's work exists. A start Temporal refuses as invalid (the
// ID or the input) can never succeed: its error wraps
// outbox.ErrUnstartable.
func (s *Starter) Start(ctx context.Context, it store.OutboxItem) error {
	if it.Kind == store.OutboxWebhook {
		return WakeWebhook(ctx, s.client, it.Ref.String(), s.delivery.Steps)
	}
	if it.Kind == store.OutboxAutomationWake {
		return s.wakeRun(ctx, it.Ref)
	}
	id, err := WorkflowID(it)
	if err != nil {
		return err
	}
	name, input := workflows.SendEmailName, any(workflows.SendEmailInput{
		EmailID: it.Ref.String(), ScheduledAt: it.ScheduledAt, Delivery: s.delivery,
	})
	switch it.Kind {
	case store.OutboxSendBatch:
		name, input = workflows.SendBatchName, workflows.SendBatchInput{BatchID: it.Ref.String(), Delivery: s.delivery}
	case store.OutboxContactImport:
		name, input = workflows.ContactImportName, workflows.ContactImportInput{ImportID: it.Ref, Steps: s.delivery.Steps}
	case store.OutboxInbound:
		name, input = workflows.ProcessInboundName, workflows.ProcessInboundInput{InboundID: it.Ref, Steps: s.delivery.Steps}
	case store.OutboxBroadcast:
		name, input = workflows.BroadcastName, workflows.BroadcastInput{BroadcastID: it.Ref, Steps: s.delivery.Steps,
			PauseRecheck: s.BroadcastRecheck}
	case store.OutboxDataRequest:
		name, input = workflows.DataRequestName, workflows.DataRequestInput{RequestID: it.Ref, Steps: s.delivery.Steps,
			EraseWait: s.EraseWait}
	case store.OutboxAutomationRun:
		name, input = workflows.AutomationRunName, workflows.AutomationRunInput{RunID: it.Ref, Steps: s.delivery.Steps,
			PauseRecheck: s.AutomationRecheck}
	}
	queue := workflows.TaskQueue
	if it.Kind == store.OutboxInbound {
		queue = workflows.InboundTaskQueue
	}
	return s.startOnce(ctx, id, queue, name, input)
}

// wakeRun sends WakeSignal to a run's workflow: an event it may wait for
// was sent, or the run was cancelled. A workflow that does not exist
// (ended, or not started yet: it reads the run's state when it starts)
// needs no waking.
func (s *Starter) wakeRun(ctx context.Context, runID uuid.UUID) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.client.SignalWorkflow(ctx, workflows.AutomationRunWorkflowID(runID.String()), "", workflows.WakeSignal, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

// startOnce starts a workflow on a task queue under an ID that was never
// used; an ID already used is not an error.
func (s *Starter) startOnce(ctx context.Context, id, queue, name string, input any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                queue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		EnableEagerStart:                         true,
	}, name, input)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil
	}
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) {
		return fmt.Errorf("starting workflow %s: %w: %w", id, outbox.ErrUnstartable, err)
	}
	if err != nil {
		return fmt.Errorf("starting workflow %s: %w", id, err)
	}
	return nil
}

// Waker signals the workflows of rescheduled and canceled emails
// (submit.Waker, which cmd hands it to; worker itself accepts no mail).
type Waker struct{ client client.Client }

// NewWaker returns a Waker.
func NewWaker(c client.Client) *Waker { return &Waker{client: c} }

// BroadcastWaker wakes Broadcast workflows (broadcast.Waker).
type BroadcastWaker struct{ client client.Client }

var _ broadcast.Waker = (*BroadcastWaker)(nil)

// NewBroadcastWaker returns a BroadcastWaker.
func NewBroadcastWaker(c client.Client) *BroadcastWaker { return &BroadcastWaker{client: c} }

// WakeBroadcast sends WakeSignal to the broadcast's workflow, which then
// looks at the broadcast's status at once. A workflow that does not exist
// (not started yet, or finished) needs no waking.
func (w *BroadcastWaker) WakeBroadcast(ctx context.Context, id uuid.UUID) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := w.client.SignalWorkflow(ctx, workflows.BroadcastWorkflowID(id.String()), "", workflows.WakeSignal, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

// Wake sends WakeSignal to the workflow that sends the email. A workflow
// that does not exist (finished) needs no waking.
func (w *Waker) Wake(ctx context.Context, ref store.EmailRef, at *time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := w.client.SignalWorkflow(ctx, EmailWorkflowID(ref), "", workflows.WakeSignal,
		workflows.Wake{EmailID: ref.ID.String(), ScheduledAt: at})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return err
}
