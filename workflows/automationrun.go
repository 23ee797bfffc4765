package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/automation"
	"github.com/posthaste/posthaste/workflows/contract"
)

// AutomationRunName is the registered name of the AutomationRun workflow.
const AutomationRunName = "AutomationRun"

// AutomationRunWorkflowID is the ID of the workflow of an automation run.
// The run's id is derived from its automation, its contact and the event
// that started it (store.AutomationRunID), so a retried dispatch of one
// event never starts a second run.
func AutomationRunWorkflowID(runID string) string { return "automation-run/" + runID }

// AutomationRunInput starts, or continues, the run of an automation.
type AutomationRunInput struct {
	RunID uuid.UUID
	// Steps is how long each database step retries (an outage).
	Steps StepPolicy
	// PauseRecheck is how often a send_email step of a team whose sending
	// is paused tries again; 0 → DefaultAutomationPauseRecheck.
	PauseRecheck time.Duration
	// MaxSteps caps the steps one run takes in all, loops included;
	// 0 → DefaultAutomationMaxSteps.
	MaxSteps int
	// StepsPerHistory is how many steps one workflow run takes before it
	// continues as new; 0 → DefaultAutomationStepsPerHistory.
	StepsPerHistory int
	// WaitWakes is how many wakes one wait takes before it continues as
	// new; 0 → DefaultAutomationWaitWakes.
	WaitWakes int `json:",omitempty"`
	// At, when set, is where a continued run goes on: the step to visit
	// next, the visits of each step so far and the steps taken.
	At *AutomationCursor `json:",omitempty"`
}

// AutomationCursor is the position a run continued as new from.
type AutomationCursor struct {
	Key    string
	Visits map[string]int
	Seq    int
	// Waiting, when set, is a wait of step Key (its visit Visits[Key],
	// its step Seq) that goes on until Due: a wait woken so often that its
	// history grew (WaitWakes wakes) continues as new where it was.
	Waiting *AutomationWaiting `json:",omitempty"`
	// Done, when set, is a completed step the run had yet to record
	// (contract.AutomationStepDone): the next call records it.
	Done *contract.AutomationStepDone `json:",omitempty"`
}

// AutomationWaiting is a wait carried over by a continue-as-new.
type AutomationWaiting struct {
	Due time.Time
}

// DefaultAutomationWaitWakes is how many wakes (events for the contact
// that did not end the wait) one wait takes before it continues as new,
// so a run waiting for months keeps a bounded history however many
// events arrive: a wake adds about eight events to the history.
const DefaultAutomationWaitWakes = 200

// errContinueWait asks AutomationRun to continue a wait as new.
type errContinueWait struct{ due time.Time }

func (e errContinueWait) Error() string { return "the wait continues as new" }

// Defaults of AutomationRunInput.
const (
	DefaultAutomationPauseRecheck    = time.Hour
	DefaultAutomationMaxSteps        = 1000
	DefaultAutomationStepsPerHistory = 100
)

// automationStepAttempt bounds one try of a step: a send_email step
// renders and accepts one email.
const automationStepAttempt = time.Minute

// automationInterpreter is the change marker of the interpreter
// (workflow.GetVersion): a change to how runs walk their graph adds a
// version, so that runs waiting for months replay the path they took.
const automationInterpreter = "automation-interpreter"

// Versions of the interpreter (automationInterpreter).
const (
	// interpreterCalls takes a call for every step and phase: the
	// trigger, a wait's start and its end, and the run's end.
	interpreterCalls workflow.Version = 1
	// interpreterFolded records a trigger, and a wait that ran out, with
	// the run's next call (contract.AutomationStepDone), and ends the run
	// in the call of its last step (contract.AutomationStepInput.EndRun):
	// trigger -> delay -> send_email takes three calls, not six.
	interpreterFolded workflow.Version = 2
)

// AutomationRun interprets one run of an automation: it loads the
// definition the run started with (LoadAutomationRun) and walks it from
// the trigger, one step at a time, along the connection each step's
// outcome names, until no connection leads on. Immediate steps are
// RunAutomationStep calls; a delay is a durable timer; a wait_for_event
// waits for a WakeSignal (an event sent for the contact, or a stop) with
// a timer for its timeout, and asks RunAutomationStep whether an event it
// accepts arrived. Every step is recorded by its run, step key and visit,
// so a retried activity never sends an email twice. A stopped automation,
// a deleted one or a deleted contact cancel the run at its next step (a
// WakeSignal makes that now). A run takes at most MaxSteps steps and
// continues as new every StepsPerHistory, so a loop through a wait keeps
// a bounded history.
func AutomationRun(ctx workflow.Context, in AutomationRunInput) error {
	version := workflow.GetVersion(ctx, automationInterpreter, workflow.DefaultVersion, interpreterFolded)
	lctx := workflow.WithLocalActivityOptions(ctx, in.Steps.localOptions(automationStepAttempt))
	wake := workflow.GetSignalChannel(ctx, WakeSignal)
	ref := contract.AutomationRunRef{RunID: in.RunID}
	var plan contract.AutomationRunPlan
	if err := workflow.ExecuteLocalActivity(lctx, contract.LoadAutomationRunName, ref).Get(ctx, &plan); err != nil {
		return err
	}
	if plan.Status != contract.RunRunning {
		return nil
	}
	maxSteps, perHistory := in.MaxSteps, in.StepsPerHistory
	if maxSteps <= 0 {
		maxSteps = DefaultAutomationMaxSteps
	}
	if perHistory <= 0 {
		perHistory = DefaultAutomationStepsPerHistory
	}
	r := &runner{ctx: ctx, lctx: lctx, wake: wake, in: in, def: plan.Definition, folded: version >= interpreterFolded}
	at := AutomationCursor{Visits: map[string]int{}}
	if in.At != nil {
		at = *in.At
		if at.Visits == nil {
			at.Visits = map[string]int{}
		}
		r.pending, at.Done = at.Done, nil
	} else {
		t, ok := plan.Definition.TriggerStep()
		if !ok {
			return r.finish(contract.RunFailed, "the automation has no trigger")
		}
		at.Key = t.Key
	}
	for taken := 0; ; taken++ {
		if at.Seq >= maxSteps {
			return r.finish(contract.RunFailed, fmt.Sprintf("the run took %d steps, the most one run may take", maxSteps))
		}
		if taken >= perHistory {
			next := in
			cur := at
			cur.Done = r.pending
			next.At = &cur
			return workflow.NewContinueAsNewError(ctx, AutomationRun, next)
		}
		step, ok := plan.Definition.Step(at.Key)
		if !ok {
			return r.finish(contract.RunFailed, fmt.Sprintf("the step %q does not exist", at.Key))
		}
		var resume *time.Time
		if at.Waiting != nil {
			// The same visit of a wait, carried over: not a new step.
			resume, at.Waiting = &at.Waiting.Due, nil
		} else {
			at.Visits[step.Key]++
			at.Seq++
		}
		res, err := r.visit(step, at.Visits[step.Key], at.Seq, resume)
		var more errContinueWait
		if errors.As(err, &more) {
			next, cur := in, at
			cur.Waiting = &AutomationWaiting{Due: more.due}
			next.At = &cur
			return workflow.NewContinueAsNewError(ctx, AutomationRun, next)
		}
		if err != nil {
			return err
		}
		if res.Cancelled || res.Finished {
			return nil
		}
		if res.Error != "" {
			return r.finish(contract.RunFailed, res.Error)
		}
		next, ok := plan.Definition.Follow(step.Key, res.Outcome)
		if !ok {
			return r.finish(contract.RunCompleted, "")
		}
		at.Key = next
	}
}

// runner visits the steps of one run.
type runner struct {
	ctx  workflow.Context
	lctx workflow.Context
	wake workflow.ReceiveChannel
	in   AutomationRunInput
	def  automation.Definition
	// folded: the run interprets by interpreterFolded; pending is then a
	// completed step its next call records.
	folded  bool
	pending *contract.AutomationStepDone
}

func (r *runner) call(step automation.Step, visit, seq int, phase, outcome string) (contract.AutomationStepResult, error) {
	var res contract.AutomationStepResult
	err := workflow.ExecuteLocalActivity(r.lctx, contract.RunAutomationStepName, contract.AutomationStepInput{
		RunID: r.in.RunID, Key: step.Key, Iteration: visit, Seq: seq, Phase: phase, Outcome: outcome,
		Done: r.pending, EndRun: r.folded,
	}).Get(r.ctx, &res)
	if err == nil {
		r.pending = nil
	}
	return res, err
}

// done completes a step without a call of its own: folded, the run's
// next call records it; otherwise a PhaseDone call does now.
func (r *runner) done(step automation.Step, visit, seq int, outcome string) (contract.AutomationStepResult, error) {
	if !r.folded {
		return r.call(step, visit, seq, contract.PhaseDone, outcome)
	}
	r.pending = &contract.AutomationStepDone{Key: step.Key, Iteration: visit, Seq: seq, Outcome: outcome}
	return contract.AutomationStepResult{Outcome: outcome}, nil
}

// finish records the end of the run, with the step it had yet to record.
func (r *runner) finish(status, reason string) error {
	return workflow.ExecuteLocalActivity(r.lctx, contract.FinishAutomationRunName, contract.AutomationFinishInput{
		RunID: r.in.RunID, Status: status, Error: reason, Done: r.pending,
	}).Get(r.ctx, nil)
}

// visit takes one step: at once, after a delay, or when an event arrives
// or its wait times out. resume, when set, goes on with a wait carried
// over by a continue-as-new, due then.
func (r *runner) visit(step automation.Step, visit, seq int, resume *time.Time) (contract.AutomationStepResult, error) {
	switch step.Type {
	case automation.Trigger:
		if r.folded {
			return r.done(step, visit, seq, automation.Default)
		}
	case automation.Delay:
		var c automation.DelayConfig
		_ = json.Unmarshal(step.Config, &c)
		d, err := automation.ParseDuration(c.Duration)
		if err != nil {
			return contract.AutomationStepResult{Error: fmt.Sprintf("step %q: %v", step.Key, err)}, nil
		}
		return r.wait(step, visit, seq, d, automation.Default, false, resume)
	case automation.WaitForEvent:
		var c automation.WaitForEventConfig
		_ = json.Unmarshal(step.Config, &c)
		d := automation.MaxWait
		if c.Timeout != "" {
			var err error
			if d, err = automation.ParseDuration(c.Timeout); err != nil {
				return contract.AutomationStepResult{Error: fmt.Sprintf("step %q: %v", step.Key, err)}, nil
			}
		}
		return r.wait(step, visit, seq, d, automation.Timeout, true, resume)
	}
	for {
		res, err := r.call(step, visit, seq, contract.PhaseRun, "")
		if err != nil || res.Paused == "" {
			return res, err
		}
		// The team's sending is paused: try again later, or when woken.
		due := workflow.Now(r.ctx).Add(r.pauseRecheck())
		if err := sleepOrWake(r.ctx, r.wake, &due); err != nil {
			return res, err
		}
	}
}

func (r *runner) pauseRecheck() time.Duration {
	if r.in.PauseRecheck > 0 {
		return r.in.PauseRecheck
	}
	return DefaultAutomationPauseRecheck
}

// wait records the step as waiting, then waits for d on a durable timer.
// A wake (an event for the contact, a stop) asks whether the run was
// cancelled and, for an event step, whether an event it accepts arrived.
// Run out, the step completes by outcome. A wait carried over (resume)
// keeps its due time. A wait woken WaitWakes times returns
// errContinueWait.
func (r *runner) wait(step automation.Step, visit, seq int, d time.Duration, outcome string,
	forEvent bool, resume *time.Time) (contract.AutomationStepResult, error) {
	due := workflow.Now(r.ctx).Add(d)
	if resume != nil {
		due = *resume
	}
	drain(r.wake)
	wakes := 0
	res, err := r.call(step, visit, seq, contract.PhaseWait, "")
	if err != nil || res.Cancelled || res.Error != "" {
		return res, err
	}
	if forEvent {
		// An event sent between the run's start and this step's wait
		// does not count; one sent since its wait began does.
		if res, err = r.call(step, visit, seq, contract.PhaseCheck, ""); err != nil || res.Cancelled ||
			res.Outcome != "" || res.Error != "" {
			return res, err
		}
	}
	for workflow.Now(r.ctx).Before(due) {
		woken := false
		if r.wake.ReceiveAsync(nil) {
			woken = true
		} else {
			sel := workflow.NewSelector(r.ctx)
			tctx, cancel := workflow.WithCancel(r.ctx)
			timer := workflow.NewTimer(tctx, due.Sub(workflow.Now(r.ctx)))
			sel.AddReceive(r.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); woken = true })
			sel.AddFuture(timer, func(workflow.Future) {})
			sel.Select(r.ctx)
			cancel()
			if err := r.ctx.Err(); err != nil {
				return res, err
			}
		}
		if !woken {
			break
		}
		drain(r.wake)
		phase := contract.PhaseWait
		if forEvent {
			phase = contract.PhaseCheck
		}
		if res, err = r.call(step, visit, seq, phase, ""); err != nil || res.Cancelled || res.Outcome != "" ||
			res.Error != "" {
			return res, err
		}
		wakes++
		limit := r.in.WaitWakes
		if limit <= 0 {
			limit = DefaultAutomationWaitWakes
		}
		if wakes >= limit {
			return res, errContinueWait{due: due}
		}
	}
	return r.done(step, visit, seq, outcome)
}
