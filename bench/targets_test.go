package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTargets(t *testing.T) {
	c := counts{conc: 16}
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond // p99 = 99 ms
	}
	res := &results{
		accept: []loadResult{{conc: 1, latencies: []time.Duration{time.Millisecond}}, {conc: 16, latencies: lat}},
		pairs: []pair{{
			bare: rate{n: 100, elapsed: 2 * time.Second}, // 50/s
			real: rate{n: 200, elapsed: 2 * time.Second}, // 100/s
		}},
	}
	sr := smtpResult{runs: []smtpRun{
		{conns: 1, alone: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: 500 * time.Millisecond}},
		{conns: 16, alone: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: time.Second}},
	}}
	ir := inboundResult{runs: []inboundRun{
		{conns: 1, ours: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: 500 * time.Millisecond}},
		{conns: 16, ours: rate{n: 100, elapsed: 2 * time.Second}, durable: rate{n: 100, elapsed: time.Second}},
	}}
	got := targets(c, res, sr, ir)
	require.Len(t, got, 5)
	require.Equal(t, "real delivery / bare one activity >= 2.00", got[0].name)
	require.Equal(t, "2.00 (median of 1 pair)", got[0].measured)
	require.Equal(t, "met", got[0].verdict(), "the bound is inclusive")
	require.Equal(t, "smtp c=16, dev stopped / postfix durable >= 0.80", got[1].name)
	require.Equal(t, "met", got[1].verdict())
	require.Equal(t, "smtp c=1, dev stopped / postfix durable >= 0.50", got[2].name)
	require.Equal(t, "0.50 (100.0 vs 200.0 msg/s)", got[2].measured)
	require.Equal(t, "met", got[2].verdict())
	require.Equal(t, "inbound c=16 / postfix durable c=16 >= 0.50", got[3].name)
	require.Equal(t, "0.50 (50.0 vs 100.0 msg/s)", got[3].measured)
	require.Equal(t, "met", got[3].verdict(), "the bound is inclusive")
	require.Equal(t, "api accept p99 at c=16 < 50ms", got[4].name)
	require.Equal(t, "99ms", got[4].measured)
	require.Equal(t, "not met", got[4].verdict())

	ir.runs[1].ours = rate{n: 100, elapsed: 3 * time.Second}
	got = targets(c, res, sr, ir)
	require.Equal(t, "0.33 (33.3 vs 100.0 msg/s)", got[3].measured)
	require.Equal(t, "not met", got[3].verdict())

	// Three pairs: judged on the median ratio, not on the first pair.
	res.pairs = []pair{
		{bare: rate{n: 100, elapsed: time.Second}, real: rate{n: 100, elapsed: time.Second}},                // 1.00
		{bare: rate{n: 100, elapsed: 4 * time.Second}, real: rate{n: 100, elapsed: time.Second}},            // 4.00
		{bare: rate{n: 100, elapsed: 2 * time.Second}, real: rate{n: 100, elapsed: 800 * time.Millisecond}}, // 2.50
	}
	got = targets(c, res, sr, ir)
	require.Equal(t, "2.50 (median of 3 pairs)", got[0].measured)
	require.Equal(t, "met", got[0].verdict())
	res.pairs[2].real = rate{n: 100, elapsed: 2 * time.Second} // 1.00
	got = targets(c, res, sr, ir)
	require.Equal(t, "1.00 (median of 3 pairs)", got[0].measured)
	require.Equal(t, "not met", got[0].verdict(), "one pair above the bound is not enough")
	res.pairs[1].bare = rate{}
	require.Equal(t, "skipped: no bare run", targets(c, res, sr, ir)[0].verdict())

	// Slower real delivery, no Postfix.
	res.pairs = []pair{{bare: rate{n: 100, elapsed: 2 * time.Second}, real: rate{n: 100, elapsed: 2 * time.Second}}}
	sr.durableSkip = "postfix not found"
	for i := range sr.runs {
		sr.runs[i].durable = rate{}
	}
	for i := range ir.runs {
		ir.runs[i].durable = rate{}
	}
	got = targets(c, res, sr, ir)
	require.Equal(t, "not met", got[0].verdict())
	require.Equal(t, "skipped: no durable Postfix reference: postfix not found", got[1].verdict())
	require.Equal(t, "skipped: no durable Postfix reference: postfix not found", got[2].verdict())
	require.Empty(t, got[1].measured)
	require.Equal(t, "skipped: no durable Postfix reference: postfix not found", got[3].verdict())

	got = targets(c, &results{}, smtpResult{}, inboundResult{skip: "dev runs no inbound MX"})
	require.Equal(t, "skipped: no inbound run: dev runs no inbound MX", got[3].verdict())
	for _, tg := range got {
		require.Contains(t, tg.verdict(), "skipped: ", tg.name)
	}
}

func TestDKIMDomainSigned(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"DKIM-Signature: v=1; a=rsa-sha256; d=sender.test; s=ph;\r\n b=abc\r\nSubject: x\r\n\r\nbody", true},
		{"Dkim-Signature: v=1;d=SENDER.test;s=ph\r\n\r\n", true},
		{"DKIM-Signature: v=1; d=other.test; s=ph\r\nDKIM-Signature: v=1; d=sender.test; s=x\r\n\r\n", true},
		{"DKIM-Signature: v=1; d=other.test; s=sender.test\r\n\r\n", false},
		{"DKIM-Signature: v=1; d=sub.sender.test\r\n\r\n", false},
		{"Subject: unsigned\r\n\r\nDKIM-Signature: d=sender.test\r\n", false},
	} {
		require.Equal(t, tc.want, dkimDomainSigned([]byte(tc.msg), "sender.test"), tc.msg)
	}
}

// TestSMTPTargetsJudgeTheGatewayWithDevStopped: the SMTP targets judge
// the gateway process with dev stopped (accepting, the processing
// elsewhere), not the runs with the processing on the same cores; without
// that run they are skipped.
func TestSMTPTargetsJudgeTheGatewayWithDevStopped(t *testing.T) {
	c := counts{conc: 16}
	sr := smtpResult{runs: []smtpRun{
		{conns: 1, ours: rate{n: 100, elapsed: 4 * time.Second}, standalone: rate{n: 100, elapsed: 4 * time.Second},
			alone: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: time.Second}},
		{conns: 16, ours: rate{n: 100, elapsed: time.Second}, standalone: rate{n: 100, elapsed: time.Second},
			alone: rate{n: 100, elapsed: 2 * time.Second}, durable: rate{n: 100, elapsed: time.Second}},
	}}
	got := targets(c, &results{}, sr, inboundResult{})
	require.Equal(t, "smtp c=16, dev stopped / postfix durable >= 0.80", got[1].name)
	require.Equal(t, "0.50 (50.0 vs 100.0 msg/s)", got[1].measured)
	require.Equal(t, "not met", got[1].verdict(), "the faster runs with dev processing are not judged")
	require.Equal(t, "smtp c=1, dev stopped / postfix durable >= 0.50", got[2].name)
	require.Equal(t, "1.00 (100.0 vs 100.0 msg/s)", got[2].measured)
	require.Equal(t, "met", got[2].verdict(), "the slower runs with dev processing are not judged")

	for i := range sr.runs {
		sr.runs[i].alone = rate{}
	}
	got = targets(c, &results{}, sr, inboundResult{})
	require.Equal(t, "skipped: no SMTP run with dev stopped", got[1].verdict())
	require.Equal(t, "skipped: no SMTP run with dev stopped", got[2].verdict())
}

// rowOf is a latency row whose latencies are ms milliseconds each.
func rowOf(ms ...int) latencyRow {
	lat := make([]time.Duration, len(ms))
	for i, m := range ms {
		lat[i] = time.Duration(m) * time.Millisecond
	}
	return latencyRow{stats: statsOf(lat)}
}

// flatRow is a latency row of 100 latencies: p50 and p99 as given (nearest
// rank: the 50th and the 99th).
func flatRow(p50, p99 int) latencyRow {
	ms := make([]int, 100)
	for i := range ms {
		switch {
		case i < 50:
			ms[i] = p50
		case i < 99:
			ms[i] = p99
		default:
			ms[i] = 2 * p99
		}
	}
	return rowOf(ms...)
}

func TestLatencyTargets(t *testing.T) {
	res := latencyResult{
		apiIdle:     flatRow(10, 30),
		apiLoad:     [2]latencyRow{flatRow(10, 40), flatRow(12, 100)},
		postfixIdle: flatRow(2, 5),
		postfixLoad: [2]latencyRow{flatRow(3, 10), flatRow(4, 20)},
		bare:        flatRow(8, 20),
		smtpIdle:    flatRow(13, 30),
	}
	got := latencyTargets(res)
	want := []struct{ name, measured, verdict string }{
		{"latency api p50 / postfix p50, idle <= 5.00", "5.00 (10ms vs 2ms)", "met"},
		{"latency api p50, idle / at 25 % load <= 1.00", "1.00 (10ms vs 10ms)", "met"},
		{"latency api p50, idle / at 50 % load <= 1.00", "0.83 (10ms vs 12ms)", "met"},
		{"latency api p99 / postfix p99, 50 % load <= 5.00", "5.00 (100ms vs 20ms)", "met"},
		{"latency api p50 / bare eager p50, idle <= 1.50", "1.25 (10ms vs 8ms)", "met"},
		{"latency smtp p50 / postfix p50, idle <= 5.00", "6.50 (13ms vs 2ms)", "not met"},
		{"latency smtp p50 / bare eager p50, idle <= 1.50", "1.62 (13ms vs 8ms)", "not met"},
	}
	require.Len(t, got, len(want))
	for i, w := range want {
		require.Equal(t, w.name, got[i].name)
		require.Equal(t, w.measured, got[i].measured, w.name)
		require.Equal(t, w.verdict, got[i].verdict(), w.name)
	}

	// Idle above a loaded p50; a p99 above 5 x Postfix's.
	res.apiLoad = [2]latencyRow{flatRow(9, 40), flatRow(12, 101)}
	got = latencyTargets(res)
	require.Equal(t, "not met", got[1].verdict())
	require.Equal(t, "1.11 (10ms vs 9ms)", got[1].measured)
	require.Equal(t, "met", got[2].verdict())
	require.Equal(t, "not met", got[3].verdict())

	// Without Postfix: its targets are skipped, saying why; the others stand.
	res.postfixIdle, res.postfixLoad, res.postfixSkip = latencyRow{}, [2]latencyRow{}, "postfix not found"
	got = latencyTargets(res)
	for _, i := range []int{0, 3, 5} {
		require.Equal(t, "skipped: no Postfix reference: postfix not found", got[i].verdict(), got[i].name)
		require.Empty(t, got[i].measured)
	}
	for _, i := range []int{1, 2, 4, 6} {
		require.NotContains(t, got[i].verdict(), "skipped", got[i].name)
	}

	// Nothing measured: every target skipped.
	for _, tg := range latencyTargets(latencyResult{}) {
		require.Contains(t, tg.verdict(), "skipped: ", tg.name)
	}
}

// pairOf is a pair whose ratio real / bare is r: 100 workflows in a second
// and 100·r emails in a second.
func pairOf(r float64) pair {
	return pair{bare: rate{n: 100, elapsed: time.Second}, real: rate{n: int(100 * r), elapsed: time.Second}}
}

func TestMedianPairRatio(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratios []float64
		want   float64
	}{
		{"none", nil, 0},
		{"one pair", []float64{1.5}, 1.5},
		{"odd count, unsorted", []float64{3, 0.5, 2}, 2},
		{"odd count, one outlier", []float64{2.1, 9, 2.2, 0.1, 2}, 2.1},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"two pairs", []float64{1, 2}, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := make([]pair, len(tc.ratios))
			for i, r := range tc.ratios {
				ps[i] = pairOf(r)
			}
			require.InDelta(t, tc.want, medianPairRatio(ps), 1e-9)
			for i, r := range tc.ratios {
				require.InDelta(t, r, ps[i].ratio(), 1e-9, "the pairs are left in their order")
			}
		})
	}
}

func TestMedianRates(t *testing.T) {
	bare, real := medianRates([]pair{
		{bare: rate{n: 100, elapsed: 2 * time.Second}, real: rate{n: 200, elapsed: time.Second}},     // 50/s, 200/s
		{bare: rate{n: 100, elapsed: time.Second}, real: rate{n: 200, elapsed: 4 * time.Second}},     // 100/s, 50/s
		{bare: rate{n: 100, elapsed: 4 * time.Second}, real: rate{n: 200, elapsed: 2 * time.Second}}, // 25/s, 100/s
	})
	require.Equal(t, rate{n: 100, elapsed: 2 * time.Second}, bare)
	require.Equal(t, rate{n: 200, elapsed: 2 * time.Second}, real)
	bare, real = medianRates([]pair{
		{bare: rate{n: 100, elapsed: time.Second}, real: rate{n: 100, elapsed: time.Second}},
		{bare: rate{n: 100, elapsed: 500 * time.Millisecond}, real: rate{n: 100, elapsed: time.Second}},
	})
	require.InDelta(t, 150, bare.perSecond(), 1e-6, "an even count: the mean of the middle two rates")
	require.Equal(t, 100, bare.n)
	require.InDelta(t, 100, real.perSecond(), 1e-6)
	bare, real = medianRates(nil)
	require.Zero(t, bare)
	require.Zero(t, real)
}

func TestDeliveryRound(t *testing.T) {
	rcpt, key := deliveryRound(1)
	require.Equal(t, deliveryRcpt, rcpt)
	require.Equal(t, deliveryKey, key)
	seen := map[string]bool{rcpt: true, key: true}
	for round := 2; round <= 5; round++ {
		rcpt, key := deliveryRound(round)
		require.True(t, strings.HasSuffix(rcpt, "@"+deliveryRcptDomain), rcpt)
		require.False(t, seen[rcpt] || seen[key], "round %d reuses %s or %s", round, rcpt, key)
		seen[rcpt], seen[key] = true, true
	}
}
