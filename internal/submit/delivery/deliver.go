package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/bounce"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

func outcomeOf(r mta.Result, at time.Time) contract.DeliverOutcome {
	return contract.DeliverOutcome{Rcpt: r.Rcpt, Status: r.Status.String(), Code: r.Code, EnhancedCode: r.EnhancedCode,
		Message: r.Message, RemoteServer: r.RemoteServer, SourceIP: r.SourceIP, At: at}
}

// resultOf is the mta.Result an outcome records.
func resultOf(o contract.DeliverOutcome) mta.Result {
	r := mta.Result{Rcpt: o.Rcpt, Status: mta.Deferred, Code: o.Code, EnhancedCode: o.EnhancedCode,
		Message: o.Message, RemoteServer: o.RemoteServer, SourceIP: o.SourceIP}
	switch o.Status {
	case mta.Delivered.String():
		r.Status = mta.Delivered
	case mta.Bounced.String():
		r.Status = mta.Bounced
	}
	return r
}

// Deliver hands the stored message to the domain's MX hosts, one
// transaction per recipient, each with the recipient's own return path
// (recipientReturnPaths; mail sent with a topic or tracked: each
// recipient's own message, see BuildForRecipient), and records
// each outcome at once: delivered; bounced, classified by
// bounce.Classify, for a permanent reply, which puts the address on
// the team's suppression list only when the reply says the address itself
// is bad; delivery_delayed (recorded once) for a deferral. Deferred
// recipients make the activity fail with a retryable error, so Temporal
// retries them on the workflow's delivery policy; recipients that already
// reached a final state are skipped on a retry. A domain whose MX hosts
// the egress policy refuses (mta.Refused) makes it fail with a permanent
// error, which the workflow records as `failed` with the reason.
//
// Traffic shaping (package shaping, applied by the mta client) holds a
// delivery to a provider that is at its limits for at most
// POSTHASTE_SHAPING_WAIT, then defers its recipients (451 4.4.5, no host
// reached) like any other deferral: the attempt ends and the workflow's
// retry policy tries again later, so a held delivery never keeps the
// worker's activity slot for long.
//
// Final outcomes are first recorded in the activity's heartbeat details
// (contract.DeliverProgress), then in PostgreSQL; a retry records the outcomes it
// finds there, and those a local first attempt passed on
// (contract.DeliverInput.Answered), and does not send to those recipients again. With a
// heartbeat timeout, Deliver also heartbeats while a delivery runs long, so
// that a crashed worker's attempt is retried within that timeout.
func (a *Sending) Deliver(ctx context.Context, in contract.DeliverInput) error {
	id, err := uuid.Parse(in.EmailID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("bad email id", contract.ErrTypePermanent, err)
	}
	var prog contract.DeliverProgress
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &prog); err != nil {
			a.logger.Warn("unreadable heartbeat details: delivering to every pending recipient",
				"email_id", in.EmailID, "rcpt_domain", in.Domain, "err", err)
			prog = contract.DeliverProgress{}
		}
	}
	// The heartbeat details of a later attempt carry the answers given to
	// the local attempt again (they started the first attempt's progress).
	prog.Outcomes = mergeOutcomes(prog.Outcomes, in.Answered)
	prog.TeamID = in.TeamID
	_, err = a.deliver(ctx, id, in, prog)
	return err
}

// mergeOutcomes adds to outcomes those of more whose recipient has none
// there.
func mergeOutcomes(outcomes, more []contract.DeliverOutcome) []contract.DeliverOutcome {
	have := make(map[string]bool, len(outcomes))
	for _, o := range outcomes {
		have[o.Rcpt] = true
	}
	for _, o := range more {
		if !have[o.Rcpt] {
			outcomes = append(slices.Clip(outcomes), o)
			have[o.Rcpt] = true
		}
	}
	return outcomes
}

// deliver is one attempt of Deliver or DeliverLocal, starting from the
// final outcomes of earlier attempts (prog). It returns prog with the
// final outcomes this attempt got added, recorded in PostgreSQL or not.
func (a *Sending) deliver(ctx context.Context, id uuid.UUID, in contract.DeliverInput, prog contract.DeliverProgress) (contract.DeliverProgress, error) {
	if a.mta == nil {
		return prog, fmt.Errorf("this process does not deliver mail")
	}
	// One round trip: the email without its attachments, its domain and
	// the message Prepare stored. Attachments are read only to build a
	// message per recipient.
	load, err := a.emails.EmailForSending(ctx, id, false)
	if err != nil {
		return prog, err
	}
	return a.deliverLoaded(ctx, load, in, prog)
}

// deliverLoaded is deliver once the email is loaded: Prepare's first
// attempt (firstAttempt) hands over what it loaded and stored.
func (a *Sending) deliverLoaded(ctx context.Context, load store.EmailToSend, in contract.DeliverInput,
	prog contract.DeliverProgress) (contract.DeliverProgress, error) {
	started := a.now()
	if a.mta == nil {
		return prog, fmt.Errorf("this process does not deliver mail")
	}
	sender, ok := a.mta.Sender(in.Pool)
	if !ok {
		// Only workers that own the pool poll its queue: a worker whose
		// pools changed since. Another may take the retry.
		return prog, fmt.Errorf("this worker does not deliver from IP pool %q", in.Pool)
	}
	id := load.Email.ID
	e := load.Email
	var err error
	answered := make(map[string]bool, len(prog.Outcomes))
	if len(prog.Outcomes) > 0 {
		// An earlier attempt got these answers and may not have recorded
		// them; recording is idempotent.
		if err := a.recordOutcomes(ctx, e, prog.Outcomes); err != nil {
			return prog, err
		}
		for _, o := range prog.Outcomes {
			answered[o.Rcpt] = true
		}
	}
	var pending []string
	for _, r := range pendingRecipients(e.Recipients, in.Recipients) {
		if !answered[r] {
			pending = append(pending, r)
		}
	}
	if len(pending) == 0 {
		return prog, nil
	}
	data := load.Message
	if data == nil {
		return prog, fmt.Errorf("loading message of %s: %w", id, store.ErrNotFound)
	}
	if e.DomainID != nil && load.Domain == nil {
		return prog, classify(fmt.Errorf("loading domain of %s: %w", id, store.ErrNotFound))
	}
	from := in.ReturnPath
	if from == "" {
		from = returnPath(e, a.hostname)
	}
	env := mta.Envelope{
		From: from,
		To:   pending,
		Data: data,
		TLS:  mta.TLSMode(in.TLS),
	}
	var msgs map[string][]byte // per recipient, for mail sent with a topic or tracked
	if perRecipient(e) {
		if msgs, err = a.recipientMessages(ctx, e, load.Domain, data, pending); err != nil {
			return prog, err
		}
	} else if msgs, err = a.trackedMessages(ctx, e, load.Domain, data, pending); err != nil {
		return prog, err
	}
	froms, err := a.recipientReturnPaths(e, load.Domain, pending)
	if err != nil {
		return prog, err
	}
	hb := newHeartbeats(ctx, activity.GetInfo(ctx).HeartbeatTimeout, prog)
	stop := hb.keepAlive()
	a.crash.At(faults.BeforeData)
	var results []mta.Result
	// recorded holds the recipients whose outcome is in PostgreSQL
	// already, so that the end of the attempt records it (and counts
	// its event) once.
	recorded := map[string]bool{}
	if msgs != nil || froms != nil {
		results = a.deliverEach(ctx, sender, in.Domain, env, msgs, froms, func(r mta.Result) {
			o := outcomeOf(r, a.now())
			hb.progress(o)
			// Recorded at once, not after the last recipient: a retry
			// after a crash skips the recipients that have their
			// outcome.
			if err := a.recordOutcomes(ctx, e, []contract.DeliverOutcome{o}); err != nil {
				a.logger.Warn("recording an outcome: kept for the end of the attempt",
					"email_id", in.EmailID, "rcpt_domain", in.Domain, "err", err)
				return
			}
			recorded[r.Rcpt] = true
		})
	} else {
		results = sender.Deliver(ctx, in.Domain, env)
	}
	stop()
	a.trace(ctx, "delivery attempt", e, started, "rcpt_domain", in.Domain, "rcpts", len(results),
		"first_status", firstStatus(results))

	now := a.now()
	outcomes := make([]contract.DeliverOutcome, 0, len(results))
	var deferred, refused []mta.Result
	final := false
	for _, r := range results {
		switch r.Status {
		case mta.Refused:
			// Nothing was sent: the email fails below, no event here.
			refused = append(refused, r)
			continue
		case mta.Deferred:
			deferred = append(deferred, r)
		default:
			prog.Outcomes = append(prog.Outcomes, outcomeOf(r, now))
			final = true
			if recorded[r.Rcpt] {
				continue
			}
		}
		outcomes = append(outcomes, outcomeOf(r, now))
	}
	if a.metrics != nil {
		for _, r := range results {
			a.metrics.Deliveries.WithLabelValues(r.Status.String()).Inc()
		}
	}
	if final {
		// The resend window closes here, before PostgreSQL is written.
		if err := hb.record(prog); err != nil {
			return prog, err
		}
	}
	// A local attempt has no heartbeat: PostgreSQL is the first place
	// that holds its answers, so its crash point comes after it.
	local := activity.GetInfo(ctx).IsLocalActivity
	if !local {
		a.crash.At(faults.AfterData)
	}
	if err := a.recordOutcomes(ctx, e, outcomes); err != nil {
		return prog, err
	}
	if local {
		a.crash.At(faults.AfterData)
	}
	if len(deferred) > 0 {
		a.logger.Info("delivery deferred", "email_id", in.EmailID, "rcpt_domain", in.Domain,
			"attempt", activity.GetInfo(ctx).Attempt, "smtp_code", deferred[0].Code)
		// The error reaches the history in the clear (a failure's
		// message is not a payload the codec encrypts): the MX's reply
		// names the recipient without the address.
		return prog, fmt.Errorf("%d of %d recipients deferred: %s", len(deferred), len(results),
			withoutAddresses(replyText(deferred[0]), in.Recipients))
	}
	if len(refused) > 0 {
		// Every recipient of a domain takes the same route: they are all
		// refused. The workflow ends them failed with this reason.
		return prog, classify(&refusedError{refused[0].Message})
	}
	return prog, nil
}

// localMargin is how long before its timeout DeliverLocal stops delivering.
const localMargin = 20 * time.Second

// DeliverLocal is the first attempt of a delivery, run as a local activity
// by a workflow worker that also serves the sender domain's region (see
// contract.DeliveryGroup.Local): it saves the regular activity's round trip through
// the Temporal server. It delivers as Deliver does, except that a local
// activity has no heartbeat (the SDK drops RecordHeartbeat and offers no
// details): the MX's final answers first reach PostgreSQL, and when an
// attempt cannot finish (a deferral, a database error) they come back in
// the result, which the workflow records in its history and hands to the
// regular Deliver that retries the group. Only a permanent error is
// returned as an error; the workflow then handles it as Deliver's.
func (a *Sending) DeliverLocal(ctx context.Context, in contract.DeliverInput) (contract.DeliverLocalResult, error) {
	id, err := uuid.Parse(in.EmailID)
	if err != nil {
		return contract.DeliverLocalResult{}, temporal.NewNonRetryableApplicationError("bad email id", contract.ErrTypePermanent, err)
	}
	if !slices.Contains(a.localRegions, in.Region) {
		// Prepare ran on a worker that serves the region, and this one,
		// which took the workflow over, does not: the regular Deliver
		// delivers on the region's queue.
		return contract.DeliverLocalResult{Retry: fmt.Sprintf("this worker does not serve region %q", in.Region)}, nil
	}
	if !a.sends(in.Pool) {
		return contract.DeliverLocalResult{Retry: fmt.Sprintf("this worker does not deliver from IP pool %q", in.Pool)}, nil
	}
	// The attempt ends localMargin before its timeout, so that answers it
	// got come back in its result: an attempt that times out returns only
	// the timeout.
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-localMargin))
		defer cancel()
	}
	prog, err := a.deliver(ctx, id, in, contract.DeliverProgress{TeamID: in.TeamID, Outcomes: in.Answered})
	return localResult(in, prog, err)
}

// localResult is the result of a local attempt that ended with prog and
// err: done, or why not and the answers it got. A permanent failure is
// the returned error.
func localResult(in contract.DeliverInput, prog contract.DeliverProgress, err error) (contract.DeliverLocalResult, error) {
	if err == nil {
		return contract.DeliverLocalResult{Done: true}, nil
	}
	if _, ok := contract.PermanentReason(err); ok {
		return contract.DeliverLocalResult{}, err
	}
	return contract.DeliverLocalResult{Retry: err.Error(), Answered: prog.Outcomes, TeamID: in.TeamID, Rcpts: in.Recipients}, nil
}

// recordOutcomes records the events of outcomes and suppresses the
// addresses whose bounce says so.
func (a *Sending) recordOutcomes(ctx context.Context, e store.Email, outcomes []contract.DeliverOutcome) error {
	evs := make([]store.Event, 0, len(outcomes))
	var suppress []string
	for _, o := range outcomes {
		r := resultOf(o)
		switch r.Status {
		case mta.Delivered:
			detail := map[string]any{"remote_server": r.RemoteServer, "smtp_code": r.Code}
			if o.SourceIP != "" {
				detail["source_ip"] = o.SourceIP
			}
			evs = append(evs, store.Event{Type: store.EventDelivered, Recipient: r.Rcpt, CreatedAt: o.At,
				Detail: detail})
		case mta.Bounced:
			class := r.Bounce()
			evs = append(evs, store.Event{Type: store.EventBounced, Recipient: r.Rcpt, CreatedAt: o.At,
				Detail: contract.BounceDetail(class.Type, class.SubType, bounceMessage(class, r), r.Diagnostic())})
			if class.Suppress {
				suppress = append(suppress, r.Rcpt)
			}
		default:
			evs = append(evs, store.Event{Type: store.EventDeliveryDelayed, Recipient: r.Rcpt, CreatedAt: o.At,
				Detail: map[string]any{"message": replyText(r)}})
		}
	}
	if err := a.record(ctx, e.ID, evs); err != nil {
		return err
	}
	return a.suppress(ctx, e, suppress)
}

// heartbeats sends one Deliver attempt's heartbeats.
//
// The SDK sends a heartbeat to the server at once only when none went out
// within its throttle interval, which is at most 0.8 × the heartbeat
// timeout (or 30 s to a minute without one); a heartbeat recorded inside
// the interval waits for its end, and a worker that crashes meanwhile
// loses it. The outcome heartbeat must not wait: without a heartbeat
// timeout, and in deliveries quicker than half of it, it is the attempt's
// first heartbeat and goes out at once; after a long delivery, for which
// keepAlive heartbeats every half timeout, record waits until the
// interval that the last of those opened has surely ended, by which time
// the SDK has sent the outcome.
type heartbeats struct {
	timeout time.Duration // the activity's heartbeat timeout; 0 when it has none
	// send records a heartbeat; now and sleep are the clock. Tests replace
	// them.
	send  func(details contract.DeliverProgress)
	now   func() time.Time
	sleep func(d time.Duration) error

	mu   sync.Mutex
	prog contract.DeliverProgress // what liveness heartbeats carry
	last time.Time                // when a heartbeat was last recorded; zero before
}

func newHeartbeats(ctx context.Context, timeout time.Duration, prog contract.DeliverProgress) *heartbeats {
	return &heartbeats{
		timeout: timeout,
		send:    func(p contract.DeliverProgress) { activity.RecordHeartbeat(ctx, p) },
		now:     time.Now,
		sleep: func(d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("waiting for the outcome heartbeat to go out: %w", context.Cause(ctx))
			}
		},
		prog: prog,
	}
}

// keepAlive heartbeats every half timeout, carrying the progress known so
// far, until the returned function is called; that function returns once
// no further heartbeat can come from it. Without a heartbeat timeout it
// does nothing.
func (h *heartbeats) keepAlive() (stop func()) {
	if h.timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(h.timeout / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				h.mu.Lock()
				h.send(h.prog)
				h.last = h.now()
				h.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// progress adds a final outcome to what the liveness heartbeats carry,
// without sending a heartbeat: a recipient delivered in its own
// transaction (mail built per recipient), whose outcome Deliver also
// records in PostgreSQL at once, is then known to a retry after the next
// liveness heartbeat even when that recording failed.
func (h *heartbeats) progress(o contract.DeliverOutcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prog.Outcomes = append(slices.Clip(h.prog.Outcomes), o)
}

// record heartbeats prog and returns once the SDK has sent it (see
// heartbeats), or with the context's error.
func (h *heartbeats) record(prog contract.DeliverProgress) error {
	h.mu.Lock()
	h.send(prog)
	now := h.now()
	wait := throttleWait(h.last, now, h.timeout)
	h.prog, h.last = prog, now
	h.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	return h.sleep(wait)
}

// throttleWait is how long after now a heartbeat recorded now may still
// be held back by the SDK's throttling, when the previous one was recorded
// at last (zero: none) under heartbeat timeout timeout: the throttle
// interval the previous one opened ends at most 0.8 × timeout after it; a
// twentieth of the timeout more covers the SDK's send.
func throttleWait(last, now time.Time, timeout time.Duration) time.Duration {
	if timeout <= 0 || last.IsZero() {
		return 0
	}
	end := last.Add(timeout*8/10 + timeout/20)
	if !now.Before(end) {
		return 0
	}
	return end.Sub(now)
}

// suppress puts addresses whose bounce said they are bad on the team's
// suppression list (emailevents.Recorder.SuppressBounced).
func (a *recorder) suppress(ctx context.Context, e store.Email, addrs []string) error {
	return a.events().SuppressBounced(ctx, e, addrs)
}

func pendingRecipients(all []store.Recipient, want []string) []string {
	status := make(map[string]string, len(all))
	for _, r := range all {
		status[r.Address] = r.Status
	}
	var out []string
	for _, w := range want {
		if !store.IsFinal(status[w]) {
			out = append(out, w)
		}
	}
	return out
}

// bounceMessage says in words why r bounced, followed by the reply.
func bounceMessage(c bounce.Class, r mta.Result) string {
	if reply := replyText(r); reply != "" {
		return c.Reason() + ": " + reply
	}
	return c.Reason() + "."
}

func replyText(r mta.Result) string {
	parts := []string{}
	if r.Code != 0 {
		parts = append(parts, fmt.Sprint(r.Code))
	}
	if r.EnhancedCode != "" {
		parts = append(parts, r.EnhancedCode)
	}
	if r.Message != "" {
		parts = append(parts, r.Message)
	}
	return strings.Join(parts, " ")
}
