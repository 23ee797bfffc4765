package main

import (
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
		accept:  []loadResult{{conc: 1, latencies: []time.Duration{time.Millisecond}}, {conc: 16, latencies: lat}},
		bareAct: rate{n: 100, elapsed: 2 * time.Second}, // 50/s
		real:    rate{n: 200, elapsed: 2 * time.Second}, // 100/s
	}
	sr := smtpResult{runs: []smtpRun{
		{conns: 1, ours: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: 500 * time.Millisecond}},
		{conns: 16, ours: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: time.Second}},
	}}
	ir := inboundResult{runs: []inboundRun{
		{conns: 1, ours: rate{n: 100, elapsed: time.Second}, durable: rate{n: 100, elapsed: 500 * time.Millisecond}},
		{conns: 16, ours: rate{n: 100, elapsed: 2 * time.Second}, durable: rate{n: 100, elapsed: time.Second}},
	}}
	got := targets(c, res, sr, ir)
	require.Len(t, got, 5)
	require.Equal(t, "real delivery / bare one activity >= 2.00", got[0].name)
	require.Equal(t, "2.00 (100.0 vs 50.0 emails/s)", got[0].measured)
	require.Equal(t, "met", got[0].verdict(), "the bound is inclusive")
	require.Equal(t, "smtp c=16 / postfix durable c=16 >= 0.80", got[1].name)
	require.Equal(t, "met", got[1].verdict())
	require.Equal(t, "smtp c=1 / postfix durable c=1 >= 0.50", got[2].name)
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

	// Slower real delivery, no Postfix.
	res.real = rate{n: 100, elapsed: 2 * time.Second}
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

// TestSMTPTargetsJudgeTheStandaloneGateway: when `posthaste smtp` ran, its
// rate is the one judged, not that of the gateway inside dev.
func TestSMTPTargetsJudgeTheStandaloneGateway(t *testing.T) {
	c := counts{conc: 16}
	sr := smtpResult{runs: []smtpRun{
		{conns: 1, ours: rate{n: 100, elapsed: 4 * time.Second}, standalone: rate{n: 100, elapsed: time.Second},
			durable: rate{n: 100, elapsed: time.Second}},
		{conns: 16, ours: rate{n: 100, elapsed: time.Second}, standalone: rate{n: 100, elapsed: 2 * time.Second},
			durable: rate{n: 100, elapsed: time.Second}},
	}}
	got := targets(c, &results{}, sr, inboundResult{})
	require.Equal(t, "smtp c=16 / postfix durable c=16 >= 0.80", got[1].name)
	require.Equal(t, "0.50 (50.0 vs 100.0 msg/s)", got[1].measured)
	require.Equal(t, "not met", got[1].verdict())
	require.Equal(t, "smtp c=1 / postfix durable c=1 >= 0.50", got[2].name)
	require.Equal(t, "1.00 (100.0 vs 100.0 msg/s)", got[2].measured)
	require.Equal(t, "met", got[2].verdict())
}
