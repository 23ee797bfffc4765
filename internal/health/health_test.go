package health

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRatesAndJudgement(t *testing.T) {
	for _, tc := range []struct {
		name             string
		c                Counts
		bounce, complain float64
		bJudged, cJudged bool
		bOver, cOver     bool
	}{
		{name: "no volume", c: Counts{}},
		{name: "few sends: not judged", c: Counts{Delivered: 50, Bounced: 49},
			bounce: 49.0 / 99},
		{name: "bounces at the threshold", c: Counts{Delivered: 96, Bounced: 4}, bounce: 0.04, bJudged: true},
		{name: "bounces above", c: Counts{Delivered: 95, Bounced: 5}, bounce: 0.05, bJudged: true, bOver: true},
		{name: "one complaint in 1000 is not judged", c: Counts{Delivered: 1000, Complained: 1},
			complain: 0.001, bJudged: true},
		{name: "complaints above at 1250", c: Counts{Delivered: 1250, Complained: 2},
			complain: 2.0 / 1250, bJudged: true, cJudged: true, cOver: true},
		{name: "complaints at the threshold", c: Counts{Delivered: 2500, Complained: 2},
			complain: 0.0008, bJudged: true, cJudged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.bounce, tc.c.BounceRate(), 1e-12)
			require.InDelta(t, tc.complain, tc.c.ComplaintRate(), 1e-12)
			require.Equal(t, tc.bJudged, tc.c.Judged(Bounce))
			require.Equal(t, tc.cJudged, tc.c.Judged(Complaint))
			require.Equal(t, tc.bOver, tc.c.Over(Bounce))
			require.Equal(t, tc.cOver, tc.c.Over(Complaint))
		})
	}
}

func TestEvaluateOncePerCrossing(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	bad := Counts{Delivered: 90, Bounced: 10}
	good := Counts{Delivered: 100}

	st, x := Evaluate(State{}, bad, t0, DefaultWindow, false)
	require.Equal(t, []Crossing{{Metric: Bounce, Rate: 0.1, Threshold: 0.04}}, x)
	require.Nil(t, st.Paused, "without pause, a crossing only warns")
	require.Equal(t, t0, st.Warned[Bounce])

	st, x = Evaluate(st, bad, t0.Add(time.Minute), DefaultWindow, false)
	require.Empty(t, x, "still above: no second notice")
	require.Equal(t, t0, st.Warned[Bounce])

	st, x = Evaluate(st, good, t0.Add(2*time.Minute), DefaultWindow, false)
	require.Empty(t, x)
	require.Empty(t, st.Warned)

	t3 := t0.Add(3 * time.Minute)
	st, x = Evaluate(st, bad, t3, DefaultWindow, true)
	require.Equal(t, []Crossing{{Metric: Bounce, Rate: 0.1, Threshold: 0.04, Paused: true}}, x)
	require.Equal(t, &Pause{Metric: Bounce, Rate: 0.1, Threshold: 0.04, Window: DefaultWindow, At: t3}, st.Paused)

	st, x = Evaluate(st, good, t0.Add(4*time.Minute), DefaultWindow, true)
	require.Empty(t, x)
	require.NotNil(t, st.Paused, "only an operator lifts a pause")

	// Resumed (Paused cleared by the operator) while still warned: no new
	// pause until the rate goes under and crosses again.
	st = State{Warned: map[Metric]time.Time{Bounce: t3}}
	st, x = Evaluate(st, bad, t0.Add(5*time.Minute), DefaultWindow, true)
	require.Empty(t, x)
	require.Nil(t, st.Paused)
}

func TestPauseMessage(t *testing.T) {
	p := Pause{Metric: Complaint, Rate: 0.0016, Threshold: 0.0008, Window: DefaultWindow}
	require.Equal(t, "Sending is paused for this team: its complaint rate over the last 30 days was 0.16 %, "+
		"above the 0.08 % threshold. Clean the addresses that reported your mail as spam from your lists, "+
		"then ask the operator of this server to resume sending.", p.Message())
}
