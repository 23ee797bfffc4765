package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		err  string
	}{{
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// busy is 100+20+30+4+5 ticks of 10 ms; idle, iowait, steal and
		// the guest times (inside user and nice already) are not.
		name: "busy fields only",
		in:   "cpu  100 20 30 5000 70 4 5 600 50 10\ncpu0 50 10 15 2500 35 2 2 300 25 5\nintr 1\n",
		want: 1590 * time.Millisecond,
	}, {
		name: "kernels without guest fields",
		in:   "cpu 1 2 3 4 5 6 7\n",
		want: (1 + 2 + 3 + 6 + 7) * 10 * time.Millisecond,
	}, {
		name: "no aggregate line first",
		in:   "cpu0 1 2 3 4 5 6 7 8\n",
		err:  "no aggregate cpu line",
	}, {
		name: "too few fields",
		in:   "cpu 1 2 3\n",
		err:  "no aggregate cpu line",
	}, {
		name: "not a number",
		in:   "cpu 1 x 3 4 5 6 7 8\n",
		err:  "field 2",
	}, {
		name: "empty",
		in:   "",
		err:  "no aggregate cpu line",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMachineCPUOfARun(t *testing.T) {
	r := rate{n: 200, elapsed: 2 * time.Second, busy: 3 * time.Second}
	require.Equal(t, 15*time.Millisecond, r.perItem())
	require.InDelta(t, 1.5, r.coresBusy(), 1e-9)
	require.Contains(t, r.cpuText("email"), "machine CPU 15ms per email, 1.5 of ")

	require.Zero(t, rate{n: 200, elapsed: time.Second}.perItem(), "not measured")
	require.Empty(t, rate{n: 200, elapsed: time.Second}.cpuText("email"))
	require.Zero(t, rate{busy: time.Second}.perItem(), "no items")

	// On Linux the meter sees the machine's CPUs work.
	m := startCPU()
	if !m.ok {
		require.NotEqual(t, "linux", runtime.GOOS, "/proc/stat must be readable on Linux")
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.used() == 0 && time.Now().Before(deadline) {
		for i := 0; i < 1e6; i++ {
			sink += i
		}
	}
	require.Positive(t, m.used(), "busy time grows while this test computes")
}

var sink int

func TestBudget(t *testing.T) {
	c := counts{conc: 16}
	res := &results{
		accept: []loadResult{
			{conc: 1, ok: 100, elapsed: time.Second},
			{conc: 16, ok: 1000, elapsed: 2 * time.Second}, // 500/s
		},
		e2e: rate{n: 1000, elapsed: 5 * time.Second, busy: 10 * time.Second}, // 10 ms per email
		pairs: []pair{
			{bare: rate{n: 100, elapsed: time.Second}, real: rate{n: 100, elapsed: time.Second, busy: 1200 * time.Millisecond}},
			{bare: rate{n: 100, elapsed: 2 * time.Second}, real: rate{n: 100, elapsed: time.Second, busy: 1400 * time.Millisecond}},
			{bare: rate{n: 100, elapsed: time.Second}, real: rate{n: 100, elapsed: time.Second, busy: 1300 * time.Millisecond}},
		},
	}
	sr := smtpResult{runs: []smtpRun{
		{conns: 1, durable: rate{n: 900, elapsed: time.Second}},
		{conns: 16, durable: rate{n: 1500, elapsed: time.Second}},
	}}
	rows := budgetRows(c, res, sr)
	require.Len(t, rows, 4)
	// Median bare 100/s: 2x is 200/s, at the median real cost of 13 ms.
	require.Equal(t, "real delivery at 2.00 x median bare", rows[0].name)
	require.InDelta(t, 200, rows[0].rate, 1e-9)
	require.Equal(t, 13*time.Millisecond, rows[0].perItem)
	require.Equal(t, "smtp c=16 at 0.80 x postfix durable", rows[1].name)
	require.InDelta(t, 1200, rows[1].rate, 1e-9)
	require.Equal(t, 10*time.Millisecond, rows[1].perItem)
	require.Equal(t, "smtp c=1 at 0.50 x postfix durable", rows[2].name)
	require.InDelta(t, 450, rows[2].rate, 1e-9)
	require.Equal(t, "api accept c=16, at the rate it ran", rows[3].name)
	require.InDelta(t, 500, rows[3].rate, 1e-9)

	var out strings.Builder
	printBudget(func(f string, a ...any) { out.WriteString(strings.TrimSpace(fmt.Sprintf(f, a...)) + "\n") }, rows, 2)
	require.Contains(t, out.String(), "(2 on this machine)")
	require.Contains(t, out.String(), "= 12.00 cores", "1200/s at 10 ms")
	require.Contains(t, out.String(), "=  2.60 cores", "200/s at 13 ms")

	// Without the durable reference or a measured cost a row says so.
	rows = budgetRows(c, &results{}, smtpResult{})
	require.Len(t, rows, 1)
	out.Reset()
	printBudget(func(f string, a ...any) { out.WriteString(fmt.Sprintf(f, a...) + "\n") }, rows, 2)
	require.Contains(t, out.String(), "skipped: no measurement")
}
