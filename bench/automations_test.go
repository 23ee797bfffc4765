package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestChooseAutomationDelay(t *testing.T) {
	// 10,000 runs at a pilot rate of 200/s: 2 x 50 s, + 10 s + 20 s.
	require.Equal(t, 130*time.Second, chooseAutomationDelay(10000, rate{n: 1000, elapsed: 5 * time.Second}))
	// Rounded up to whole seconds.
	require.Equal(t, 122*time.Second, chooseAutomationDelay(10000, rate{n: 1000, elapsed: 4559 * time.Millisecond}))
	// A small, fast run: the margin, 10 s and 2 ms a run.
	require.Equal(t, 11*time.Second, chooseAutomationDelay(10, rate{n: 10, elapsed: time.Millisecond}))
	// No pilot rate: no delay.
	require.Zero(t, chooseAutomationDelay(10000, rate{}))
	require.Zero(t, chooseAutomationDelay(0, rate{n: 1, elapsed: time.Second}))

	// The delay covers the sends at the pilot's rate twice over.
	for _, per := range []float64{20, 150, 1000} {
		pilot := rate{n: 1000, elapsed: time.Duration(1000 / per * float64(time.Second))}
		d := chooseAutomationDelay(10000, pilot)
		require.GreaterOrEqual(t, d.Seconds(), 2*10000/per, "at %.0f/s", per)
		require.Zero(t, d%time.Second)
	}
}

func TestDelayWords(t *testing.T) {
	require.Equal(t, "1 second", delayWords(time.Second))
	require.Equal(t, "130 seconds", delayWords(130*time.Second))
	require.Equal(t, "2 seconds", delayWords(1500*time.Millisecond), "rounded up")
}

func TestAutomationPilot(t *testing.T) {
	require.Equal(t, 50, automationPilotSize(100))
	require.Equal(t, 50, automationPilotSize(1000))
	require.Equal(t, 100, automationPilotSize(2000))
	require.Equal(t, 500, automationPilotSize(10000))
	require.Equal(t, 500, automationPilotSize(100000))

	require.Equal(t, 7*time.Second, automationPilotDelay(50))
	require.Equal(t, 25*time.Second, automationPilotDelay(500))
	require.Equal(t, 6*time.Second, automationPilotDelay(1), "rounded up")
}

func TestSummarizeRuns(t *testing.T) {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	d := 100 * time.Second
	// Runs wait 1, 2 and 3 s after the first event; their emails are
	// accepted 50 ms, 10 ms and 300 ms after their due times.
	runs := []runTiming{
		{id: "b", delayStarted: start.Add(2 * time.Second), accepted: start.Add(102*time.Second + 10*time.Millisecond)},
		{id: "a", delayStarted: start.Add(time.Second), accepted: start.Add(101*time.Second + 50*time.Millisecond)},
		{id: "c", delayStarted: start.Add(3 * time.Second), accepted: start.Add(103*time.Second + 300*time.Millisecond)},
	}
	got := summarizeRuns(start, d, runs)
	require.Equal(t, rate{n: 3, elapsed: 3 * time.Second}, got.started)
	require.Equal(t, start.Add(101*time.Second), got.firstDue)
	require.Equal(t, start.Add(103*time.Second), got.lastDue)
	require.Equal(t, start.Add(103*time.Second+300*time.Millisecond), got.lastAccepted)
	require.Equal(t, "c", got.lastRun)
	require.Equal(t, []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond}, got.lags)
	require.Equal(t, 2*time.Second+300*time.Millisecond, got.finish)
	require.Equal(t, start.Add(3*time.Second), got.lastWaiting(start))

	require.Zero(t, summarizeRuns(start, d, nil).started.n)
}

func TestAutomationLagPercentiles(t *testing.T) {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	runs := make([]runTiming, 1000)
	for i := range runs {
		// Lags of 1..1000 ms, in reverse order.
		runs[i] = runTiming{delayStarted: start, accepted: start.Add(time.Second + time.Duration(1000-i)*time.Millisecond)}
	}
	got := summarizeRuns(start, time.Second, runs)
	require.Equal(t, 500*time.Millisecond, got.lag(0.5))
	require.Equal(t, 990*time.Millisecond, got.lag(0.99))
	require.Equal(t, 1000*time.Millisecond, got.lag(1))
	require.Zero(t, automationTimes{}.lag(0.5))
}

func TestAutomationTargets(t *testing.T) {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	res := automationResult{n: 1000, rssIdle: 300 << 20, rssWaiting: 700 << 20,
		times: automationTimes{lags: []time.Duration{time.Millisecond}, firstDue: start, finish: 15 * time.Second},
		e2e:   rate{n: 1000, elapsed: 10 * time.Second}, // 100/s: 1000 emails in 10 s
	}
	got := automationTargets(res)
	require.Len(t, got, 2)
	require.Equal(t, "automations 1000 waiting: RSS - idle < 500 MB", got[0].name)
	require.Equal(t, "+400 MB (700 vs 300 MB)", got[0].measured)
	require.Equal(t, "met", got[0].verdict())
	require.Equal(t, "automations 1000 finish / e2e time <= 1.50", got[1].name)
	require.Equal(t, "1.50 (15s vs 10s)", got[1].measured)
	require.Equal(t, "met", got[1].verdict(), "the bound is inclusive")

	res.rssWaiting = 800 << 20
	res.times.finish = 15100 * time.Millisecond
	got = automationTargets(res)
	require.Equal(t, "not met", got[0].verdict(), "500 MB more is not under 500 MB more")
	require.Equal(t, "not met", got[1].verdict())

	got = automationTargets(automationResult{n: 1000, rssIdle: 1, rssWaiting: 2, times: res.times})
	require.Equal(t, "skipped: no sandbox end-to-end run", got[1].verdict())
	for _, tg := range automationTargets(automationResult{n: 1000}) {
		require.Contains(t, tg.verdict(), "skipped: ", tg.name)
	}
}

func TestCheckWaitedBeforeDue(t *testing.T) {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	r := automationResult{sendStart: start, delay: 60 * time.Second, memoryRead: start.Add(50 * time.Second),
		times: automationTimes{started: rate{n: 10, elapsed: 40 * time.Second}, firstDue: start.Add(61 * time.Second)}}
	require.NoError(t, checkWaitedBeforeDue(r))
	late := r
	late.memoryRead = start.Add(62 * time.Second)
	require.ErrorContains(t, checkWaitedBeforeDue(late), "the memory was read 1s after the first timer fell due")
	late = r
	late.times.started.elapsed = 61 * time.Second
	require.ErrorContains(t, checkWaitedBeforeDue(late), "the last run began to wait 0s after the first timer fell due")
}

func TestRunDetailTiming(t *testing.T) {
	raw := `{"object":"automation_run","id":"r1","status":"completed","steps":[
		{"key":"start","type":"trigger","status":"completed","output":{"event_id":"e"},"started_at":"2025-01-01T12:00:00.000000Z"},
		{"key":"wait","type":"delay","status":"completed","output":{},"started_at":"2025-01-01T12:00:01.250000Z"},
		{"key":"welcome","type":"send_email","status":"completed","output":{"email_id":"m1"},"started_at":"2025-01-01T12:01:41.300000Z"}]}`
	var r runDetail
	require.NoError(t, json.Unmarshal([]byte(raw), &r))
	got, err := r.timing()
	require.NoError(t, err)
	require.Equal(t, "r1", got.id)
	require.Equal(t, "m1", got.emailID)
	require.True(t, got.delayStarted.Equal(time.Date(2025, 1, 1, 12, 0, 1, 250_000_000, time.UTC)), got.delayStarted)

	status, _, _ := r.step("delay")
	require.Equal(t, "completed", status)
	status, _, started := r.step("wait_for_event")
	require.Empty(t, status)
	require.Nil(t, started)

	// Still waiting, or sent by an earlier attempt (no email id): no timing.
	waiting := `{"id":"r2","status":"running","steps":[{"type":"delay","status":"waiting","started_at":"2025-01-01T12:00:01Z"}]}`
	require.NoError(t, json.Unmarshal([]byte(waiting), &r))
	_, err = r.timing()
	require.ErrorContains(t, err, `its delay step is "waiting"`)
	noID := `{"id":"r3","status":"completed","steps":[{"type":"delay","status":"completed","started_at":"2025-01-01T12:00:01Z"},
		{"type":"send_email","status":"completed","output":{"email_id":null,"note":"sent by an earlier attempt"}}]}`
	r = runDetail{}
	require.NoError(t, json.Unmarshal([]byte(noID), &r))
	_, err = r.timing()
	require.ErrorContains(t, err, "send_email step")
}

func TestAutomationBody(t *testing.T) {
	b, err := automationBody("bench", "bench.signed_up", 90*time.Second, "tpl-1")
	require.NoError(t, err)
	var got struct {
		Status string
		Steps  []struct {
			Key, Type string
			Config    map[string]any
		}
		Connections []struct{ From, To string }
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, "enabled", got.Status)
	require.Len(t, got.Steps, 3)
	require.Equal(t, "trigger", got.Steps[0].Type)
	require.Equal(t, "bench.signed_up", got.Steps[0].Config["event_name"])
	require.Equal(t, "delay", got.Steps[1].Type)
	require.Equal(t, "90 seconds", got.Steps[1].Config["duration"])
	require.Equal(t, "send_email", got.Steps[2].Type)
	require.Equal(t, "tpl-1", got.Steps[2].Config["template"].(map[string]any)["id"])
	require.Len(t, got.Connections, 2)
}

func TestForEach(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	require.NoError(t, forEach(context.Background(), 100, 7, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	}))
	require.Len(t, seen, 100)
	for i, k := range seen {
		require.Equal(t, 1, k, i)
	}
	require.NoError(t, forEach(context.Background(), 0, 4, func(context.Context, int) error { return errors.New("called") }))

	// The first error stops the calls not yet made and is returned.
	boom := errors.New("boom")
	var calls int
	err := forEach(context.Background(), 1000, 1, func(_ context.Context, i int) error {
		calls++
		if i == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 4, calls)
}

func TestTypeCounts(t *testing.T) {
	require.Equal(t, "WORKFLOW_EXECUTION_STARTED 1, MARKER_RECORDED 2, TIMER_STARTED 1",
		typeCounts([]string{"EVENT_TYPE_WORKFLOW_EXECUTION_STARTED", "EVENT_TYPE_MARKER_RECORDED", "EVENT_TYPE_TIMER_STARTED",
			"EVENT_TYPE_MARKER_RECORDED"}))
	require.Empty(t, typeCounts(nil))
}
