// Package faults crashes a process at a named point of the send path, so
// tests and the chaos benchmark can prove that an accepted email reaches
// one outcome, and each recipient's MX receives it once, whatever dies
// where. A process crashes only when POSTHASTE_TEST_CRASH_AT names a point
// (see Parse); production configurations never set it.
package faults

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Point is a place on the send path where a process can be made to crash.
type Point string

// The crash points, in the order an email passes them.
const (
	// AfterAccept: the accepting transaction committed (the client is
	// about to get its 200 or 250), the dispatcher was not told.
	AfterAccept Point = "after-accept"
	// InPrepare: Prepare claimed the email (`sent` is recorded), its
	// message is not built or stored yet.
	InPrepare Point = "prepare"
	// BeforeData: Deliver is about to hand the message to the MX.
	BeforeData Point = "deliver-before-data"
	// AfterData: the MX answered the message's data; the outcome is in
	// the activity's heartbeat but not yet recorded in PostgreSQL. A
	// local first attempt (delivery.DeliverLocal) has no heartbeat: it
	// passes the point once PostgreSQL holds the outcome, before the
	// workflow has the attempt's result.
	AfterData Point = "deliver-after-data"
)

// Points lists every crash point of the send path.
var Points = []Point{AfterAccept, InPrepare, BeforeData, AfterData}

// AfterBroadcastChunk: a broadcast's chunk was handed to the send path
// (its transaction committed), the workflow does not know yet.
const AfterBroadcastChunk Point = "after-broadcast-chunk"

// known lists every point Parse accepts.
var known = append(slices.Clone(Points), AfterBroadcastChunk)

// Crasher kills its process the nth time execution passes its point. A
// nil *Crasher never crashes; methods are safe for concurrent use.
type Crasher struct {
	point Point
	nth   int64
	seen  atomic.Int64
	kill  func()
}

// Parse reads a crash specification, "point" or "point:n" (crash the nth
// time the point is passed, from 1). "" returns nil: no crash.
func Parse(spec string) (*Crasher, error) {
	if spec == "" {
		return nil, nil
	}
	name, count, hasCount := strings.Cut(spec, ":")
	p := Point(name)
	if !slices.Contains(known, p) {
		return nil, fmt.Errorf("unknown crash point %q (known: %v)", name, known)
	}
	nth := int64(1)
	if hasCount {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("crash count %q must be a whole number from 1", count)
		}
		nth = n
	}
	return &Crasher{point: p, nth: nth, kill: killSelf}, nil
}

// At crashes the process if p is the configured point and this is the nth
// time it is passed.
func (c *Crasher) At(p Point) {
	if c == nil || p != c.point {
		return
	}
	if c.seen.Add(1) == c.nth {
		c.kill()
	}
}

// killSelf dies as abruptly as a power cut allows a process to: SIGKILL
// runs no deferred functions, flushes nothing and closes connections
// without a goodbye.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is delivered asynchronously; never go on
}
