package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// DefaultFirstAttempt bounds the first delivery attempt Prepare makes
// itself (Config.FirstAttempt). Nearly every MX answers within a second
// or two; one slower than this is left to the regular Deliver, whose
// attempts heartbeat and take up to thirty minutes, after the workflow's
// first retry interval. It leaves Prepare's own attempt time (thirty
// seconds) room for its database steps.
const DefaultFirstAttempt = 15 * time.Second

// firstAttempts makes the first delivery attempt of each Local group of
// a prepared email, the groups at once, and sets its result in the
// group's First: the message Prepare just stored goes to the MX without
// a local activity of its own, another load of the email, or a round trip
// through the workflow. Answers are recorded as DeliverLocal records them,
// so a retried Prepare (a crash after the MX answered) sends only to the
// recipients still without an outcome, which it finds as DeliverLocal
// would.
func (a *Sending) firstAttempts(ctx context.Context, load store.EmailToSend, groups []contract.DeliveryGroup) {
	var wg sync.WaitGroup
	for i := range groups {
		g := &groups[i]
		if !g.Local {
			continue
		}
		wg.Go(func() { g.First = a.firstAttempt(ctx, load, *g) })
	}
	wg.Wait()
}

// firstAttempt delivers one group within the first attempt's time.
func (a *Sending) firstAttempt(ctx context.Context, load store.EmailToSend, g contract.DeliveryGroup) *contract.DeliverLocalResult {
	in := contract.DeliverInput{EmailID: load.Email.ID.String(), TeamID: load.Email.TeamID, Domain: g.Domain,
		Recipients: g.Recipients, TLS: g.TLS, ReturnPath: g.ReturnPath, Region: g.Region, Pool: g.Pool}
	ctx, cancel := context.WithTimeout(ctx, a.firstWithin)
	defer cancel()
	prog, err := a.deliverLoaded(ctx, load, in, contract.DeliverProgress{TeamID: in.TeamID})
	res, err := localResult(in, prog, err)
	if reason, ok := contract.PermanentReason(err); ok {
		res.Permanent = reason
	}
	return &res
}
