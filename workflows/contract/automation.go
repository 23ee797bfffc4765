package contract

import (
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/workflows/automation"
)

// Registered names of the activities of AutomationRun.
const (
	LoadAutomationRunName   = "LoadAutomationRun"
	RunAutomationStepName   = "RunAutomationStep"
	FinishAutomationRunName = "FinishAutomationRun"
)

// Automation run statuses (Resend's AutomationRunStatus).
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// Phases of RunAutomationStep.
const (
	// PhaseRun performs an immediate step (trigger, send_email, condition,
	// contact_update, contact_delete, add_to_segment) and records it.
	PhaseRun = "run"
	// PhaseWait records a delay or wait_for_event step as waiting (and,
	// for wait_for_event, the event it awaits); called again on a wake,
	// it only tells whether the run was cancelled.
	PhaseWait = "wait"
	// PhaseCheck looks for an event that a waiting wait_for_event step
	// accepts, sent for the contact since the step began waiting; found,
	// the step is recorded completed.
	PhaseCheck = "check"
	// PhaseDone records a delay that ran out, or a wait_for_event that
	// timed out, as completed.
	PhaseDone = "done"
)

// AutomationRunRef names a run.
type AutomationRunRef struct {
	RunID uuid.UUID
}

// AutomationRunPlan is what a run interprets: the definition of the
// version it started with, and whether it is still running. Histories
// carry ids and the definition only: event payloads and contact data stay
// in the database, read by the steps that need them.
type AutomationRunPlan struct {
	TeamID       uuid.UUID
	AutomationID uuid.UUID
	Version      int
	Status       string // a Run… status; not RunRunning: nothing to do
	Definition   automation.Definition
}

// AutomationStepInput asks RunAutomationStep for one phase of one visit
// of a step: Iteration counts the visits of the step in the run (a loop
// through a wait visits it again), Seq the steps the run has taken.
type AutomationStepInput struct {
	RunID     uuid.UUID
	Key       string
	Iteration int
	Seq       int
	Phase     string
	// Outcome is the connection PhaseDone records (automation.Default for
	// a delay, automation.Timeout for a wait_for_event).
	Outcome string `json:",omitempty"`
	// Done, when set, is a step the run completed without a call of its
	// own (a trigger, a wait that ran out), recorded first.
	Done *AutomationStepDone `json:",omitempty"`
	// EndRun asks the call to end the run when the step completes with an
	// outcome that no connection follows (automation.Definition.Follow),
	// or fails: the run is then recorded completed, or failed with the
	// step's error, with the step, and the result says Finished.
	EndRun bool `json:",omitempty"`
}

// AutomationStepDone is a step a run completed without calling
// RunAutomationStep for it: a trigger (it does nothing but start the
// run), or a delay or wait_for_event whose timer ran out (by Outcome).
// The run's next call records it, so a run that waits on a delay and
// then sends an email takes one call at each end of its wait.
type AutomationStepDone struct {
	Key       string
	Iteration int
	Seq       int
	Outcome   string
}

// AutomationStepResult is what became of a step phase.
type AutomationStepResult struct {
	// Cancelled: the run was stopped, its automation deleted or its
	// contact deleted; it ends now.
	Cancelled bool `json:",omitempty"`
	// Outcome is the connection to follow when the step completed: a
	// connection type of package automation, "" while it is not done (a
	// wait phase, a check that found no event).
	Outcome string `json:",omitempty"`
	// Error, when set, failed the step (and so the run) with this reason.
	Error string `json:",omitempty"`
	// Paused, when set, says why the step cannot go on yet (the team's
	// sending is paused): the run retries it later.
	Paused string `json:",omitempty"`
	// Finished: the call ended the run (AutomationStepInput.EndRun).
	Finished bool `json:",omitempty"`
}

// AutomationFinishInput ends a run with a status (RunCompleted or
// RunFailed) and, when failed, the reason.
type AutomationFinishInput struct {
	RunID  uuid.UUID
	Status string
	Error  string `json:",omitempty"`
	// Done, when set, is a step completed without a call of its own,
	// recorded with the end (AutomationStepInput.Done).
	Done *AutomationStepDone `json:",omitempty"`
}
