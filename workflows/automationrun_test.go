package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/posthaste/posthaste/workflows/automation"
	"github.com/posthaste/posthaste/workflows/contract"
)

var automationRunID = uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000a1")

// autoStepCall is one RunAutomationStep call the fake answered, and when.
type autoStepCall struct {
	Key       string
	Iteration int
	Seq       int
	Phase     string
	Outcome   string
	At        time.Time
}

// autoFake plays the three local activities of AutomationRun: it loads
// plan, answers RunAutomationStep per script (by "key/phase", in order;
// once a queue is empty, a run completes by "default", a done by the
// outcome asked and the other phases with nothing) and records the calls.
type autoFake struct {
	env *testsuite.TestWorkflowEnvironment

	mu     sync.Mutex
	plan   contract.AutomationRunPlan
	script map[string][]contract.AutomationStepResult
	loads  []contract.AutomationRunRef
	steps  []autoStepCall
	finish []contract.AutomationFinishInput
	bad    []string // inputs the fake did not expect
	// invoked counts the local activities the run called.
	invoked int
}

func newAutoEnv(t *testing.T, def automation.Definition) (*testsuite.TestWorkflowEnvironment, *autoFake) {
	t.Helper()
	env := testEnv()
	f := &autoFake{env: env, script: map[string][]contract.AutomationStepResult{}, plan: contract.AutomationRunPlan{
		TeamID: broadcastTeam, AutomationID: uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000a2"),
		Version: 3, Status: contract.RunRunning, Definition: def,
	}}
	env.RegisterWorkflowWithOptions(AutomationRun, workflow.RegisterOptions{Name: AutomationRunName})
	env.RegisterActivityWithOptions(f.load, activity.RegisterOptions{Name: contract.LoadAutomationRunName})
	env.RegisterActivityWithOptions(f.step, activity.RegisterOptions{Name: contract.RunAutomationStepName})
	env.RegisterActivityWithOptions(f.finishRun, activity.RegisterOptions{Name: contract.FinishAutomationRunName})
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		require.Empty(t, f.bad)
	})
	return env, f
}

// answer queues the results of the next calls of a phase of a step.
func (f *autoFake) answer(key, phase string, res ...contract.AutomationStepResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[key+"/"+phase] = append(f.script[key+"/"+phase], res...)
}

func (f *autoFake) load(_ context.Context, ref contract.AutomationRunRef) (contract.AutomationRunPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads = append(f.loads, ref)
	f.invoked++
	return f.plan, nil
}

func (f *autoFake) step(_ context.Context, in contract.AutomationStepInput) (contract.AutomationStepResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.RunID != automationRunID {
		f.bad = append(f.bad, fmt.Sprintf("step of run %s", in.RunID))
	}
	if in.Phase != contract.PhaseDone && in.Outcome != "" {
		f.bad = append(f.bad, fmt.Sprintf("%s/%s with outcome %q", in.Key, in.Phase, in.Outcome))
	}
	f.invoked++
	f.recordDone(in.Done)
	f.steps = append(f.steps, autoStepCall{Key: in.Key, Iteration: in.Iteration, Seq: in.Seq, Phase: in.Phase,
		Outcome: in.Outcome, At: f.env.Now()})
	res := f.result(in)
	// Like the activity, a call asked to end the run does so when its
	// step completed (an outcome, an error or a step run) and no
	// connection follows, or it failed.
	final := !res.Cancelled && res.Paused == "" && (res.Outcome != "" || res.Error != "" || in.Phase == contract.PhaseRun)
	if _, follows := f.plan.Definition.Follow(in.Key, res.Outcome); in.EndRun && final && (res.Error != "" || !follows) {
		end := contract.AutomationFinishInput{RunID: in.RunID, Status: contract.RunCompleted}
		if res.Error != "" {
			end.Status, end.Error = contract.RunFailed, res.Error
		}
		f.finish = append(f.finish, end)
		res.Finished = true
	}
	return res, nil
}

// result is the scripted answer to a call.
func (f *autoFake) result(in contract.AutomationStepInput) contract.AutomationStepResult {
	k := in.Key + "/" + in.Phase
	if q := f.script[k]; len(q) > 0 {
		f.script[k] = q[1:]
		return q[0]
	}
	switch in.Phase {
	case contract.PhaseRun:
		return contract.AutomationStepResult{Outcome: automation.Default}
	case contract.PhaseDone:
		return contract.AutomationStepResult{Outcome: in.Outcome}
	}
	return contract.AutomationStepResult{}
}

// recordDone records a step completed without a call of its own as the
// call it takes without folding: a trigger's run, a wait's done.
func (f *autoFake) recordDone(d *contract.AutomationStepDone) {
	if d == nil {
		return
	}
	c := autoStepCall{Key: d.Key, Iteration: d.Iteration, Seq: d.Seq, Phase: contract.PhaseDone, Outcome: d.Outcome,
		At: f.env.Now()}
	if step, _ := f.plan.Definition.Step(d.Key); step.Type == automation.Trigger {
		c.Phase, c.Outcome = contract.PhaseRun, ""
	}
	f.steps = append(f.steps, c)
}

func (f *autoFake) finishRun(_ context.Context, in contract.AutomationFinishInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.invoked++
	f.recordDone(in.Done)
	in.Done = nil
	f.finish = append(f.finish, in)
	return nil
}

// invocations returns how many local activities the run called.
func (f *autoFake) invocations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.invoked
}

// calls returns the step calls as "key#iteration@seq:phase" (and
// "=outcome" for a done).
func (f *autoFake) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []string{}
	for _, c := range f.steps {
		s := fmt.Sprintf("%s#%d@%d:%s", c.Key, c.Iteration, c.Seq, c.Phase)
		if c.Outcome != "" {
			s += "=" + c.Outcome
		}
		out = append(out, s)
	}
	return out
}

// at returns when the n-th call of a phase of a step came (n from 1).
func (f *autoFake) at(t *testing.T, key, phase string, n int) time.Time {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.steps {
		if c.Key == key && c.Phase == phase {
			if n--; n == 0 {
				return c.At
			}
		}
	}
	t.Fatalf("no call %d of %s/%s", n, key, phase)
	return time.Time{}
}

func (f *autoFake) loaded() []contract.AutomationRunRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]contract.AutomationRunRef(nil), f.loads...)
}

func (f *autoFake) finished() []contract.AutomationFinishInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]contract.AutomationFinishInput(nil), f.finish...)
}

func completed() []contract.AutomationFinishInput {
	return []contract.AutomationFinishInput{{RunID: automationRunID, Status: contract.RunCompleted}}
}

func failed(reason string) []contract.AutomationFinishInput {
	return []contract.AutomationFinishInput{{RunID: automationRunID, Status: contract.RunFailed, Error: reason}}
}

// Steps and graphs of the tests.
func autoStep(key, typ, config string) automation.Step {
	return automation.Step{Key: key, Type: typ, Config: json.RawMessage(config)}
}

func autoConn(from, to, typ string) automation.Connection {
	return automation.Connection{From: from, To: to, Type: typ}
}

var (
	autoTrigger = autoStep("start", automation.Trigger, `{"event_name":"user.created"}`)
	autoWelcome = autoStep("welcome", automation.SendEmail, `{"template":{"id":"tpl_welcome"}}`)
	autoNudge   = autoStep("nudge", automation.SendEmail, `{"template":{"id":"tpl_nudge"}}`)
	autoPaid    = autoStep("paid", automation.WaitForEvent, `{"event_name":"payment.completed","timeout":"3 days"}`)
	autoPlan    = autoStep("plan", automation.Condition, `{"type":"rule","field":"event.plan","operator":"eq","value":"pro"}`)
)

func autoDelay(key, d string) automation.Step {
	return autoStep(key, automation.Delay, `{"duration":"`+d+`"}`)
}

// autoDef is a definition that Validate accepts.
func autoDef(t *testing.T, steps []automation.Step, conns ...automation.Connection) automation.Definition {
	t.Helper()
	d := automation.Definition{Steps: steps, Connections: conns}
	require.NoError(t, d.Validate())
	return d
}

func runAutomation(env *testsuite.TestWorkflowEnvironment, in AutomationRunInput) {
	in.RunID = automationRunID
	env.ExecuteWorkflow(AutomationRunName, in)
}

// trigger → send_email → end: each step once, then the run completes.
func TestAutomationRunLinearCompletes(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome},
		autoConn("start", "welcome", "")))
	start := env.Now()
	runAutomation(env, AutomationRunInput{})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "welcome#1@2:run"}, f.calls())
	require.Equal(t, completed(), f.finished())
	require.Equal(t, []contract.AutomationRunRef{{RunID: automationRunID}}, f.loaded())
	require.Less(t, env.Now().Sub(start), time.Minute)
}

// A delay of "2 days" is a durable timer: the step is recorded waiting,
// then done two days later, and the next step comes after it.
func TestAutomationRunDelayWaitsOnItsTimer(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoDelay("wait", "2 days"), autoWelcome},
		autoConn("start", "wait", ""), autoConn("wait", "welcome", "")))
	start := env.Now()
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "wait#1@2:wait", "wait#1@2:done=default", "welcome#1@3:run"}, f.calls())
	require.Equal(t, completed(), f.finished())
	require.GreaterOrEqual(t, env.Now().Sub(start), 48*time.Hour)
	require.Less(t, f.at(t, "wait", contract.PhaseWait, 1).Sub(start), time.Minute, "the wait is recorded at once")
	require.GreaterOrEqual(t, f.at(t, "wait", contract.PhaseDone, 1).Sub(start), 48*time.Hour)
	require.GreaterOrEqual(t, f.at(t, "welcome", contract.PhaseRun, 1).Sub(start), 48*time.Hour)
	// Folded (interpreterFolded): the load, the delay's wait (with the
	// trigger) and the email (with the delay's end and the run's end).
	require.Equal(t, 3, f.invocations())
}

// A run whose last step is a delay records the delay's end with the
// run's: no call of its own.
func TestAutomationRunEndingInADelay(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome, autoDelay("wait", "1 hour")},
		autoConn("start", "welcome", ""), autoConn("welcome", "wait", "")))
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "welcome#1@2:run", "wait#1@3:wait", "wait#1@3:done=default"}, f.calls())
	require.Equal(t, completed(), f.finished())
	require.Equal(t, 4, f.invocations(), "load, welcome, wait, finish")
}

// A wake during a delay asks whether the run was cancelled (PhaseWait
// again) and, when it was not, keeps waiting out the whole delay.
func TestAutomationRunDelayWokenKeepsWaiting(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoDelay("wait", "2 days"), autoWelcome},
		autoConn("start", "wait", ""), autoConn("wait", "welcome", "")))
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Hour)
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "wait#1@2:wait", "wait#1@2:wait", "wait#1@2:done=default", "welcome#1@3:run"},
		f.calls())
	require.GreaterOrEqual(t, f.at(t, "wait", contract.PhaseWait, 2).Sub(start), time.Hour)
	require.Less(t, f.at(t, "wait", contract.PhaseWait, 2).Sub(start), 2*time.Hour)
	require.GreaterOrEqual(t, f.at(t, "welcome", contract.PhaseRun, 1).Sub(start), 48*time.Hour)
	require.Equal(t, completed(), f.finished())
}

// A stop wakes a run in a delay, which ends at once, without finishing:
// whoever stopped it recorded its end.
func TestAutomationRunDelayCancelledByWake(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoDelay("wait", "2 days"), autoWelcome},
		autoConn("start", "wait", ""), autoConn("wait", "welcome", "")))
	f.answer("wait", contract.PhaseWait, contract.AutomationStepResult{}, contract.AutomationStepResult{Cancelled: true})
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Hour)
	runAutomation(env, AutomationRunInput{})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "wait#1@2:wait", "wait#1@2:wait"}, f.calls())
	require.Empty(t, f.finished())
	require.Less(t, env.Now().Sub(start), 2*time.Hour, "the run waited for its timer instead of the wake")
}

// A condition's outcome picks the connection.
func TestAutomationRunConditionBranches(t *testing.T) {
	for outcome, want := range map[string]string{
		automation.ConditionMet:    "welcome",
		automation.ConditionNotMet: "nudge",
	} {
		t.Run(outcome, func(t *testing.T) {
			env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoPlan, autoWelcome, autoNudge},
				autoConn("start", "plan", ""), autoConn("plan", "welcome", automation.ConditionMet),
				autoConn("plan", "nudge", automation.ConditionNotMet)))
			f.answer("plan", contract.PhaseRun, contract.AutomationStepResult{Outcome: outcome})
			runAutomation(env, AutomationRunInput{})
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, []string{"start#1@1:run", "plan#1@2:run", want + "#1@3:run"}, f.calls())
			require.Equal(t, completed(), f.finished())
		})
	}
}

// A condition whose outcome has no connection ends the run, completed.
func TestAutomationRunConditionWithoutThatBranchCompletes(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoPlan, autoWelcome},
		autoConn("start", "plan", ""), autoConn("plan", "welcome", automation.ConditionMet)))
	f.answer("plan", contract.PhaseRun, contract.AutomationStepResult{Outcome: automation.ConditionNotMet})
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "plan#1@2:run"}, f.calls())
	require.Equal(t, completed(), f.finished())
}

// paymentGraph waits for payment.completed for 3 days: paid → welcome,
// timed out → nudge.
func paymentGraph(t *testing.T) automation.Definition {
	return autoDef(t, []automation.Step{autoTrigger, autoPaid, autoWelcome, autoNudge},
		autoConn("start", "paid", ""), autoConn("paid", "welcome", automation.EventReceived),
		autoConn("paid", "nudge", automation.Timeout))
}

// An event sent for the contact wakes the wait; its check finds it and the
// run follows event_received.
func TestAutomationRunWaitForEventReceived(t *testing.T) {
	env, f := newAutoEnv(t, paymentGraph(t))
	f.answer("paid", contract.PhaseCheck, contract.AutomationStepResult{},
		contract.AutomationStepResult{Outcome: automation.EventReceived})
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Hour)
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait", "paid#1@2:check", "paid#1@2:check", "welcome#1@3:run"},
		f.calls())
	require.Equal(t, completed(), f.finished())
	got := f.at(t, "welcome", contract.PhaseRun, 1).Sub(start)
	require.GreaterOrEqual(t, got, time.Hour)
	require.Less(t, got, 2*time.Hour, "the run waited for its timeout instead of the event")
}

// An event that arrived between the wait's start and its first check is
// found by that check: no waiting.
func TestAutomationRunWaitForEventAlreadyThere(t *testing.T) {
	env, f := newAutoEnv(t, paymentGraph(t))
	f.answer("paid", contract.PhaseCheck, contract.AutomationStepResult{Outcome: automation.EventReceived})
	start := env.Now()
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait", "paid#1@2:check", "welcome#1@3:run"}, f.calls())
	require.Less(t, env.Now().Sub(start), time.Minute)
}

// No event: the wait times out after its timeout (a wake whose check finds
// nothing does not end it) and the run follows timeout.
func TestAutomationRunWaitForEventTimesOut(t *testing.T) {
	env, f := newAutoEnv(t, paymentGraph(t))
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Hour)
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait", "paid#1@2:check", "paid#1@2:check",
		"paid#1@2:done=timeout", "nudge#1@3:run"}, f.calls())
	require.Equal(t, completed(), f.finished())
	require.GreaterOrEqual(t, f.at(t, "paid", contract.PhaseDone, 1).Sub(start), 72*time.Hour)
	require.GreaterOrEqual(t, f.at(t, "nudge", contract.PhaseRun, 1).Sub(start), 72*time.Hour)
}

// A wait_for_event left by "default" follows it on the event; timed out,
// it has nowhere to go and the run completes.
func TestAutomationRunWaitForEventByDefault(t *testing.T) {
	graph := func(t *testing.T) automation.Definition {
		return autoDef(t, []automation.Step{autoTrigger, autoPaid, autoWelcome},
			autoConn("start", "paid", ""), autoConn("paid", "welcome", ""))
	}
	t.Run("received", func(t *testing.T) {
		env, f := newAutoEnv(t, graph(t))
		f.answer("paid", contract.PhaseCheck, contract.AutomationStepResult{Outcome: automation.EventReceived})
		runAutomation(env, AutomationRunInput{})
		require.NoError(t, env.GetWorkflowError())
		require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait", "paid#1@2:check", "welcome#1@3:run"}, f.calls())
		require.Equal(t, completed(), f.finished())
	})
	t.Run("timed out", func(t *testing.T) {
		env, f := newAutoEnv(t, graph(t))
		runAutomation(env, AutomationRunInput{})
		require.NoError(t, env.GetWorkflowError())
		require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait", "paid#1@2:check", "paid#1@2:done=timeout"}, f.calls())
		require.Equal(t, completed(), f.finished())
	})
}

// A wait_for_event without a timeout waits the longest wait, 30 days.
func TestAutomationRunWaitForEventWithoutTimeout(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger,
		autoStep("paid", automation.WaitForEvent, `{"event_name":"payment.completed"}`), autoNudge},
		autoConn("start", "paid", ""), autoConn("paid", "nudge", automation.Timeout)))
	start := env.Now()
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait", "paid#1@2:check", "paid#1@2:done=timeout", "nudge#1@3:run"},
		f.calls())
	done := f.at(t, "paid", contract.PhaseDone, 1).Sub(start)
	require.GreaterOrEqual(t, done, automation.MaxWait)
	require.Less(t, done, automation.MaxWait+time.Hour)
}

// A step that fails fails the run with its reason; nothing after it runs.
func TestAutomationRunStepErrorFailsTheRun(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome, autoNudge},
		autoConn("start", "welcome", ""), autoConn("welcome", "nudge", "")))
	f.answer("welcome", contract.PhaseRun, contract.AutomationStepResult{Error: "the template tpl_welcome is not published"})
	runAutomation(env, AutomationRunInput{})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "a failed run is a completed workflow")
	require.Equal(t, []string{"start#1@1:run", "welcome#1@2:run"}, f.calls())
	require.Equal(t, failed("the template tpl_welcome is not published"), f.finished())
}

// A wait whose PhaseWait fails fails the run too.
func TestAutomationRunWaitErrorFailsTheRun(t *testing.T) {
	env, f := newAutoEnv(t, paymentGraph(t))
	f.answer("paid", contract.PhaseWait, contract.AutomationStepResult{Error: "boom"})
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "paid#1@2:wait"}, f.calls())
	require.Equal(t, failed("boom"), f.finished())
}

// A cancelled step ends the run at once, without FinishAutomationRun.
func TestAutomationRunCancelledEnds(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome, autoNudge},
		autoConn("start", "welcome", ""), autoConn("welcome", "nudge", "")))
	f.answer("welcome", contract.PhaseRun, contract.AutomationStepResult{Cancelled: true})
	runAutomation(env, AutomationRunInput{})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "welcome#1@2:run"}, f.calls())
	require.Empty(t, f.finished())
}

// A send_email of a team whose sending is paused tries again every
// PauseRecheck, as the same visit, until it goes.
func TestAutomationRunPausedRetries(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome, autoNudge},
		autoConn("start", "welcome", ""), autoConn("welcome", "nudge", "")))
	f.answer("welcome", contract.PhaseRun, contract.AutomationStepResult{Paused: "the team's sending is paused"},
		contract.AutomationStepResult{Paused: "the team's sending is paused"})
	start := env.Now()
	runAutomation(env, AutomationRunInput{PauseRecheck: 6 * time.Hour})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "welcome#1@2:run", "welcome#1@2:run", "welcome#1@2:run", "nudge#1@3:run"},
		f.calls())
	require.Equal(t, completed(), f.finished())
	for n := 2; n <= 3; n++ {
		gap := f.at(t, "welcome", contract.PhaseRun, n).Sub(f.at(t, "welcome", contract.PhaseRun, n-1))
		require.GreaterOrEqual(t, gap, 6*time.Hour, "try %d", n)
		require.Less(t, gap, 7*time.Hour, "try %d", n)
	}
	require.GreaterOrEqual(t, env.Now().Sub(start), 12*time.Hour)
}

// A paused step tries again at once when woken (sending resumed), and a
// paused step with no PauseRecheck waits the default.
func TestAutomationRunPausedWokenRetriesNow(t *testing.T) {
	env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome},
		autoConn("start", "welcome", "")))
	f.answer("welcome", contract.PhaseRun, contract.AutomationStepResult{Paused: "paused"},
		contract.AutomationStepResult{Paused: "paused"})
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Minute)
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "welcome#1@2:run", "welcome#1@2:run", "welcome#1@2:run"}, f.calls())
	second := f.at(t, "welcome", contract.PhaseRun, 2).Sub(start)
	require.GreaterOrEqual(t, second, time.Minute)
	require.Less(t, second, time.Hour, "the wake retried the step")
	third := f.at(t, "welcome", contract.PhaseRun, 3).Sub(f.at(t, "welcome", contract.PhaseRun, 2))
	require.GreaterOrEqual(t, third, DefaultAutomationPauseRecheck)
	require.Equal(t, completed(), f.finished())
}

// A run that is no longer running (stopped before its workflow started, or
// replayed after its end) does nothing.
func TestAutomationRunNotRunningDoesNothing(t *testing.T) {
	for _, status := range []string{contract.RunCompleted, contract.RunFailed, contract.RunCancelled, ""} {
		t.Run(status, func(t *testing.T) {
			env, f := newAutoEnv(t, autoDef(t, []automation.Step{autoTrigger, autoWelcome},
				autoConn("start", "welcome", "")))
			f.plan.Status = status
			runAutomation(env, AutomationRunInput{})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			require.Empty(t, f.calls())
			require.Empty(t, f.finished())
			require.Len(t, f.loaded(), 1)
		})
	}
}

// loopGraph loops start → wait → welcome → wait → … (the loop waits a
// minute a round).
func loopGraph(t *testing.T) automation.Definition {
	return autoDef(t, []automation.Step{autoTrigger, autoDelay("wait", "1 minute"), autoWelcome},
		autoConn("start", "wait", ""), autoConn("wait", "welcome", ""), autoConn("welcome", "wait", ""))
}

// A loop takes at most MaxSteps steps, then fails; each step's visits are
// counted, so its second visit is iteration 2.
func TestAutomationRunLoopHitsMaxSteps(t *testing.T) {
	env, f := newAutoEnv(t, loopGraph(t))
	start := env.Now()
	runAutomation(env, AutomationRunInput{MaxSteps: 7})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{
		"start#1@1:run",
		"wait#1@2:wait", "wait#1@2:done=default",
		"welcome#1@3:run",
		"wait#2@4:wait", "wait#2@4:done=default",
		"welcome#2@5:run",
		"wait#3@6:wait", "wait#3@6:done=default",
		"welcome#3@7:run",
	}, f.calls())
	require.Equal(t, failed("the run took 7 steps, the most one run may take"), f.finished())
	require.GreaterOrEqual(t, env.Now().Sub(start), 3*time.Minute, "each round waited its minute")
}

// The default cap ends a loop too.
func TestAutomationRunLoopHitsDefaultMaxSteps(t *testing.T) {
	env, f := newAutoEnv(t, loopGraph(t))
	runAutomation(env, AutomationRunInput{StepsPerHistory: DefaultAutomationMaxSteps + 1})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, failed(fmt.Sprintf("the run took %d steps, the most one run may take", DefaultAutomationMaxSteps)),
		f.finished())
	calls := f.calls()
	require.Len(t, calls, DefaultAutomationMaxSteps*3/2)
	require.Equal(t, fmt.Sprintf("wait#%d@%d:done=default", DefaultAutomationMaxSteps/2, DefaultAutomationMaxSteps),
		calls[len(calls)-1])
}

// Every StepsPerHistory steps the run continues as new from where it is:
// the step to visit next, the visits so far and the steps taken; the next
// workflow run goes on from there, without the trigger. A wait that ran
// out just before is carried in the cursor and recorded by the continued
// run's first call.
func TestAutomationRunContinuesAsNew(t *testing.T) {
	env, f := newAutoEnv(t, loopGraph(t))
	in := AutomationRunInput{StepsPerHistory: 4, PauseRecheck: 2 * time.Hour, Steps: StepPolicy{Window: time.Hour}}
	runAutomation(env, in)
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.True(t, workflow.IsContinueAsNewError(err), "%v", err)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can))
	require.Equal(t, AutomationRunName, can.WorkflowType.Name)
	var next AutomationRunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.At)
	require.Equal(t, AutomationCursor{Key: "welcome", Visits: map[string]int{"start": 1, "wait": 2, "welcome": 1}, Seq: 4,
		Done: &contract.AutomationStepDone{Key: "wait", Iteration: 2, Seq: 4, Outcome: automation.Default}}, *next.At)
	require.Equal(t, automationRunID, next.RunID)
	require.Equal(t, in.StepsPerHistory, next.StepsPerHistory)
	require.Equal(t, in.PauseRecheck, next.PauseRecheck)
	require.Equal(t, in.Steps, next.Steps)
	require.Equal(t, []string{"start#1@1:run", "wait#1@2:wait", "wait#1@2:done=default", "welcome#1@3:run",
		"wait#2@4:wait"}, f.calls())
	require.Empty(t, f.finished(), "continuing is no end")

	// The continued run.
	env2, f2 := newAutoEnv(t, loopGraph(t))
	env2.ExecuteWorkflow(AutomationRunName, next)
	err = env2.GetWorkflowError()
	require.True(t, workflow.IsContinueAsNewError(err), "%v", err)
	require.True(t, errors.As(err, &can))
	var third AutomationRunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &third))
	require.Equal(t, AutomationCursor{Key: "welcome", Visits: map[string]int{"start": 1, "wait": 4, "welcome": 3}, Seq: 8,
		Done: &contract.AutomationStepDone{Key: "wait", Iteration: 4, Seq: 8, Outcome: automation.Default}}, *third.At)
	require.Equal(t, []string{"wait#2@4:done=default", "welcome#2@5:run", "wait#3@6:wait", "wait#3@6:done=default", "welcome#3@7:run",
		"wait#4@8:wait"}, f2.calls())
	require.Len(t, f2.loaded(), 1, "a continued run loads its plan again")
	require.Empty(t, f2.finished())
}

// MaxSteps counts the steps of every workflow run of a run.
func TestAutomationRunMaxStepsSpansContinuedRuns(t *testing.T) {
	env, f := newAutoEnv(t, loopGraph(t))
	env.ExecuteWorkflow(AutomationRunName, AutomationRunInput{RunID: automationRunID, MaxSteps: 6, StepsPerHistory: 4,
		At: &AutomationCursor{Key: "welcome", Visits: map[string]int{"start": 1, "wait": 2, "welcome": 1}, Seq: 4}})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"welcome#2@5:run", "wait#3@6:wait", "wait#3@6:done=default"}, f.calls())
	require.Equal(t, failed("the run took 6 steps, the most one run may take"), f.finished())
}

// A continued run's cursor without visits (an older history) starts them
// from zero.
func TestAutomationRunContinuedWithoutVisits(t *testing.T) {
	env, f := newAutoEnv(t, loopGraph(t))
	env.ExecuteWorkflow(AutomationRunName, AutomationRunInput{RunID: automationRunID, MaxSteps: 3,
		At: &AutomationCursor{Key: "welcome", Seq: 1}})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"welcome#1@2:run", "wait#1@3:wait", "wait#1@3:done=default"}, f.calls())
	require.Equal(t, failed("the run took 3 steps, the most one run may take"), f.finished())
}

// Definitions that Validate would refuse, loaded anyway, fail the run.
func TestAutomationRunBrokenDefinitionFails(t *testing.T) {
	for name, c := range map[string]struct {
		def    automation.Definition
		calls  []string
		reason string
	}{
		"no trigger": {
			def:    automation.Definition{Steps: []automation.Step{autoWelcome}},
			calls:  []string{},
			reason: "the automation has no trigger",
		},
		"a connection to no step": {
			def: automation.Definition{Steps: []automation.Step{autoTrigger},
				Connections: []automation.Connection{autoConn("start", "ghost", "")}},
			calls:  []string{"start#1@1:run"},
			reason: `the step "ghost" does not exist`,
		},
		"a delay in no words": {
			def: automation.Definition{Steps: []automation.Step{autoTrigger, autoDelay("wait", "soon")},
				Connections: []automation.Connection{autoConn("start", "wait", "")}},
			calls:  []string{"start#1@1:run"},
			reason: `step "wait": "soon" is not a duration such as "30 minutes", "2 hours", "3 days" or "1 week"`,
		},
		"a timeout in no words": {
			def: automation.Definition{Steps: []automation.Step{autoTrigger,
				autoStep("paid", automation.WaitForEvent, `{"event_name":"x","timeout":"40 days"}`)},
				Connections: []automation.Connection{autoConn("start", "paid", "")}},
			calls:  []string{"start#1@1:run"},
			reason: `step "paid": "40 days" is longer than the maximum of 30 days`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			env, f := newAutoEnv(t, c.def)
			runAutomation(env, AutomationRunInput{})
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, c.calls, f.calls())
			require.Equal(t, failed(c.reason), f.finished())
		})
	}
}

// A step of every type: the immediate ones run, the waits wait.
func TestAutomationRunEveryStepType(t *testing.T) {
	def := autoDef(t, []automation.Step{
		autoTrigger, autoPlan, autoWelcome, autoDelay("wait", "30m"), autoPaid,
		autoStep("update", automation.ContactUpdate, `{"properties":{"plan":{"var":"event.plan"}}}`),
		autoStep("segment", automation.AddToSegment, `{"segment_id":"seg_1"}`),
		autoStep("remove", automation.ContactDelete, `{}`),
	},
		autoConn("start", "plan", ""),
		autoConn("plan", "welcome", automation.ConditionMet),
		autoConn("plan", "remove", automation.ConditionNotMet),
		autoConn("welcome", "wait", ""),
		autoConn("wait", "paid", ""),
		autoConn("paid", "update", automation.EventReceived),
		autoConn("paid", "remove", automation.Timeout),
		autoConn("update", "segment", ""),
	)
	env, f := newAutoEnv(t, def)
	f.answer("plan", contract.PhaseRun, contract.AutomationStepResult{Outcome: automation.ConditionMet})
	f.answer("paid", contract.PhaseCheck, contract.AutomationStepResult{},
		contract.AutomationStepResult{Outcome: automation.EventReceived})
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, 2*time.Hour)
	runAutomation(env, AutomationRunInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"start#1@1:run", "plan#1@2:run", "welcome#1@3:run", "wait#1@4:wait",
		"wait#1@4:done=default", "paid#1@5:wait", "paid#1@5:check", "paid#1@5:check", "update#1@6:run",
		"segment#1@7:run"}, f.calls())
	require.Equal(t, completed(), f.finished())
	require.GreaterOrEqual(t, f.at(t, "paid", contract.PhaseWait, 1).Sub(start), 30*time.Minute)
}

// A wait woken WaitWakes times (its history growing) continues as
// new where it was: the same visit of the same step, due at the same
// time, which the continued run waits out without recording a new visit.
func TestAutomationRunWokenWaitContinuesAsNew(t *testing.T) {
	def := autoDef(t, []automation.Step{autoTrigger, autoDelay("wait", "2 days"), autoWelcome},
		autoConn("start", "wait", ""), autoConn("wait", "welcome", ""))
	env, f := newAutoEnv(t, def)
	start := env.Now()
	for i := 1; i <= 40; i++ {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, nil) }, time.Duration(i)*time.Minute)
	}
	runAutomation(env, AutomationRunInput{WaitWakes: 30})
	err := env.GetWorkflowError()
	require.True(t, workflow.IsContinueAsNewError(err), "%v", err)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can))
	var next AutomationRunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.At)
	require.NotNil(t, next.At.Waiting)
	require.Equal(t, start.Add(48*time.Hour).UTC(), next.At.Waiting.Due.UTC())
	require.Equal(t, "wait", next.At.Key)
	require.Equal(t, 2, next.At.Seq)
	require.Equal(t, map[string]int{"start": 1, "wait": 1}, next.At.Visits)
	require.Less(t, env.Now().Sub(start), 2*time.Hour, "it continued while woken, long before the delay ran out")
	require.Empty(t, f.finished())

	env2, f2 := newAutoEnv(t, def)
	env2.SetStartTime(env.Now())
	env2.ExecuteWorkflow(AutomationRunName, next)
	require.NoError(t, env2.GetWorkflowError())
	require.Equal(t, []string{"wait#1@2:wait", "wait#1@2:done=default", "welcome#1@3:run"}, f2.calls())
	require.GreaterOrEqual(t, f2.at(t, "wait", contract.PhaseDone, 1).Sub(start), 48*time.Hour-time.Second)
	require.Less(t, f2.at(t, "wait", contract.PhaseDone, 1).Sub(start), 49*time.Hour)
	require.Equal(t, completed(), f2.finished())
}
