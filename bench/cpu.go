package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

// What a run costs the machine: the busy time of all its CPUs over the run,
// read from Linux's /proc/stat, so every process counts (dev, its
// PostgreSQL, the bench's own clients and MX). Divided by the emails of
// the run it is the machine time an email takes, and multiplied by a rate
// it is how many cores that rate needs at that cost (budget).

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every
// architecture Linux and Go share.
const userHZ = 100

// cpuMeter is the machine's busy CPU time at the start of a run.
type cpuMeter struct {
	busy time.Duration
	ok   bool
}

// startCPU reads the machine's busy CPU time; a meter that could not read
// it (not Linux) measures nothing.
func startCPU() cpuMeter {
	busy, err := machineBusy()
	return cpuMeter{busy: busy, ok: err == nil}
}

// used returns the busy CPU time since m started; 0 when unknown.
func (m cpuMeter) used() time.Duration {
	if !m.ok {
		return 0
	}
	busy, err := machineBusy()
	if err != nil || busy < m.busy {
		return 0
	}
	return busy - m.busy
}

// machineBusy returns the busy CPU time of all CPUs since boot.
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(data)
}

// parseProcStat returns the busy time of the aggregate "cpu" line of
// /proc/stat: user, nice, system, irq and softirq. Not idle and iowait,
// not steal (time the hypervisor gave to other guests) and not guest and
// guest_nice, which user and nice already include.
func parseProcStat(data []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) < 8 || string(fields[0]) != "cpu" {
		return 0, errors.New("/proc/stat: no aggregate cpu line")
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		v, err := strconv.ParseUint(string(fields[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d: %w", i, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// perItem returns the machine's busy CPU time per thing of r (email,
// workflow); 0 when unknown.
func (r rate) perItem() time.Duration {
	if r.n == 0 || r.busy == 0 {
		return 0
	}
	return r.busy / time.Duration(r.n)
}

// coresBusy returns how many of the machine's cores were busy on average
// during r; 0 when unknown.
func (r rate) coresBusy() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return r.busy.Seconds() / r.elapsed.Seconds()
}

// cpuText describes the machine time of r for a result line: "" when
// unknown.
func (r rate) cpuText(unit string) string {
	if r.perItem() == 0 {
		return ""
	}
	return fmt.Sprintf("machine CPU %s per %s, %.1f of %d cores busy", fmtDur(r.perItem()), unit, r.coresBusy(), runtime.NumCPU())
}

// budgetRow is a rate a target asks for and the machine time per email
// that rate is priced at.
type budgetRow struct {
	name    string        // e.g. "smtp c=16 at 0.80 x postfix durable"
	rate    float64       // per second
	perItem time.Duration // machine CPU per email, measured in this run
	costOf  string        // which run perItem is from
}

// printBudget prints how many cores each row's rate needs at its measured cost
// beside the cores the machine has: a target whose rate needs more than
// the machine has cannot be met while the same machine processes the mail
// it accepts at that cost.
func printBudget(p func(string, ...any), rows []budgetRow, cores int) {
	p("")
	p("cpu budget: cores a target's rate needs at the machine CPU per email measured above (%d on this machine)", cores)
	for _, r := range rows {
		if r.perItem == 0 || r.rate == 0 {
			p("  %-44s skipped: no measurement", r.name)
			continue
		}
		p("  %-44s %8.1f/s x %-8s (%s) = %5.2f cores", r.name, r.rate, fmtDur(r.perItem), r.costOf,
			r.rate*r.perItem.Seconds())
	}
}
