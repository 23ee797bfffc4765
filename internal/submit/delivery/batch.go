package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

var (
	_ codec.PersonalData = contract.PrepareBatchResult{}
	_ codec.PersonalData = contract.RecordBatchEventsInput{}
)

// PrepareBatch is Prepare for the emails of one batch that are due (SendBatch
// prepares them together), with a few set-based statements for them all
// instead of several round trips and commits for each: one claim
// (store.Emails.ClaimManyForSending), one load, the messages built and
// signed in this process, one save, one suppression lookup per team and
// topic, one record of the `suppressed` and `failed` events. Each email
// ends as Prepare would end it: skipped (canceled, or erased), not due (moved
// later), prepared (its PrepareResult), failed (a permanent error of its
// own, such as a message that cannot be built: Failed holds the reason,
// and only that email fails) or, for an error of its own that may pass,
// left to Prepare (Alone). An error of the whole step (the database) is
// returned, and the workflow retries the step; every part of it is
// idempotent, as Prepare is.
func (a *Sending) PrepareBatch(ctx context.Context, in contract.PrepareBatchInput) (contract.PrepareBatchResult, error) {
	res := contract.PrepareBatchResult{Emails: make([]contract.PreparedEmail, len(in.EmailIDs))}
	ids := make([]uuid.UUID, len(in.EmailIDs))
	var valid []uuid.UUID
	for i, s := range in.EmailIDs {
		res.Emails[i].EmailID = s
		id, err := uuid.Parse(s)
		if err != nil {
			res.Emails[i].Alone = true // Prepare fails it
			continue
		}
		ids[i] = id
		valid = append(valid, id)
	}
	claims, err := a.emails.ClaimManyForSending(ctx, valid, a.now(), claimSkew)
	if err != nil {
		return contract.PrepareBatchResult{}, err
	}
	var load []uuid.UUID
	for i := range res.Emails {
		p := &res.Emails[i]
		if p.Alone {
			continue
		}
		claim, ok := claims[ids[i]]
		switch {
		case !ok: // erased by a data request after it was canceled
			p.Result.Skip = true
		case claim.LastEvent == store.EventCanceled:
			p.Result.Skip = true
		case !claim.Claimed && claim.LastEvent == store.EventScheduled:
			p.Result.NotDue = claim.ScheduledAt
		default:
			load = append(load, ids[i])
		}
		if claim.Claimed && a.metrics != nil {
			a.metrics.EmailEvents.WithLabelValues(store.EventSent).Inc()
		}
	}
	if len(load) == 0 {
		return res, nil
	}
	a.crash.At(faults.InPrepare)
	loaded, err := a.emails.EmailsForSending(ctx, load, true)
	if err != nil {
		return contract.PrepareBatchResult{}, err
	}

	// Build and sign what an earlier try did not store, and store it.
	var team uuid.UUID
	batch := map[uuid.UUID]*batchEmail{}
	var built []store.BuiltMessage
	for i := range res.Emails {
		p := &res.Emails[i]
		if p.Alone || p.Result.Skip || p.Result.NotDue != nil {
			continue
		}
		l := loaded[ids[i]]
		if l == nil { // erased since the claim
			p.Result.Skip = true
			continue
		}
		if team == uuid.Nil {
			team = l.Email.TeamID
		}
		if l.Email.TeamID != team { // not one batch's: Prepare sorts it out
			p.Alone = true
			continue
		}
		b, err := a.route(l)
		if err == nil && l.Message == nil {
			var msg []byte
			if msg, err = a.buildMessage(l.Email, l.Domain); err == nil {
				built = append(built, store.BuiltMessage{EmailID: l.Email.ID, MessageID: messageID(l.Email), Data: msg})
			}
		}
		if err != nil {
			if reason, ok := contract.PermanentReason(err); ok {
				p.Failed = reason
			} else {
				a.logger.Warn("email of a batch left to prepare alone", "email_id", p.EmailID, "err", err)
				p.Alone = true
			}
			continue
		}
		batch[ids[i]] = b
	}
	res.TeamID = team
	if err := a.emails.SaveMessages(ctx, team, built); err != nil {
		return contract.PrepareBatchResult{}, err
	}

	// The recipients' suppressions and topic subscriptions, one lookup of
	// each for the whole batch.
	var addrs []string // not sandbox addresses
	topics := map[uuid.UUID][]string{}
	for _, b := range batch {
		for _, r := range b.rcpts {
			if _, ok := sandbox.Outcome(r.Address); ok {
				continue
			}
			addrs = append(addrs, r.Address)
			if b.email.TopicID != nil {
				topics[*b.email.TopicID] = append(topics[*b.email.TopicID], r.Address)
			}
		}
	}
	suppressed := map[string]string{} // address: the reason it is on the list
	offTopic := map[uuid.UUID]map[string]bool{}
	if len(addrs) > 0 {
		if suppressed, err = a.emails.SuppressionReasons(ctx, team, addrs); err != nil {
			return contract.PrepareBatchResult{}, err
		}
		for topic, rcpts := range topics {
			blocked, err := a.audience.TopicBlocked(ctx, team, topic, rcpts)
			if errors.Is(err, store.ErrNotFound) { // deleted since: no longer scoped
				blocked, err = map[string]bool{}, nil
			}
			if err != nil {
				return contract.PrepareBatchResult{}, err
			}
			offTopic[topic] = blocked
		}
	}
	var evs []store.EmailEvents
	for i := range res.Emails {
		b := batch[ids[i]]
		if b == nil || res.Emails[i].Alone || res.Emails[i].Failed != "" {
			continue
		}
		var blocked map[string]bool
		if b.email.TopicID != nil {
			blocked = offTopic[*b.email.TopicID]
		}
		var e []store.Event
		res.Emails[i].Result, e = b.split(suppressed, blocked)
		if len(e) > 0 {
			evs = append(evs, store.EmailEvents{EmailID: ids[i], Events: e})
		}
	}
	if len(evs) > 0 {
		if err := a.events().RecordMany(ctx, evs); err != nil {
			return contract.PrepareBatchResult{}, err
		}
	}
	return res, nil
}

// batchEmail is an email of PrepareBatch with its message stored: what
// its recipients are split by.
type batchEmail struct {
	email store.Email
	rcpts []store.Recipient // those without an outcome
	group contract.DeliveryGroup
}

// route checks that the loaded email can be sent from here and returns
// the delivery route of its groups (Prepare's and PrepareBatch's): the sender
// domain's region, TLS mode and return path, the IP pool and whether the
// first attempt may run locally. Its error is Prepare's for the same
// email.
func (a *Sending) route(l *store.EmailToSend) (*batchEmail, error) {
	e := l.Email
	if perRecipient(e) && a.unsubscribe == nil {
		return nil, temporal.NewNonRetryableApplicationError(errNoLinks.Error(), contract.ErrTypePermanent, errNoLinks)
	}
	g := contract.DeliveryGroup{Region: DefaultRegion, TLS: store.TLSOpportunistic, ReturnPath: returnPath(e, a.hostname)}
	if e.DomainID != nil {
		d := l.Domain
		if d == nil {
			return nil, classify(fmt.Errorf("loading domain of %s: %w", e.ID, store.ErrNotFound))
		}
		g.Region, g.TLS = d.Region, d.TLS
		g.ReturnPath = DomainReturnPath(a.verpKey, e.ID, *d)
	}
	g.Pool = l.IPPool
	if g.Pool == a.defaultPool {
		g.Pool = "" // the default queues
	}
	g.Local = slices.Contains(a.localRegions, g.Region) && a.sends(g.Pool)
	// Recipients with an outcome are done: a restarted workflow neither
	// sends to them again nor names them in its history.
	rcpts := slices.DeleteFunc(slices.Clone(e.Recipients), func(r store.Recipient) bool { return store.IsFinal(r.Status) })
	return &batchEmail{email: e, rcpts: rcpts, group: g}, nil
}

// split sorts the email's recipients (Prepare's and PrepareBatch's): sandbox
// simulations, `suppressed` for those on the team's suppression list
// (suppressed, keyed by lower-case address), `failed` for those outside
// the email's topic (offTopic, keyed by normalised address), and the
// others into one delivery group per domain. It returns the result
// (without TeamID) and the events to record.
func (b *batchEmail) split(suppressed map[string]string, offTopic map[string]bool) (contract.PrepareResult, []store.Event) {
	var res contract.PrepareResult
	var evs []store.Event // `sent` was recorded by the claim
	groups := map[string]int{}
	for _, r := range b.rcpts {
		if outcome, ok := sandbox.Outcome(r.Address); ok {
			res.Sandbox = append(res.Sandbox, contract.SandboxRecipient{Address: r.Address, Events: outcome})
			continue
		}
		if why, ok := suppressed[strings.ToLower(r.Address)]; ok {
			evs = append(evs, store.Event{Type: store.EventSuppressed, Recipient: r.Address,
				Detail: map[string]any{"reason": "The address is on the team's suppression list.", "suppression": why}})
			continue
		}
		if offTopic[store.NormalizeAddress(r.Address)] {
			// Resend: a recipient opted out of the email's topic is not
			// sent to, and the email fails for it.
			evs = append(evs, store.Event{Type: store.EventFailed, Recipient: r.Address,
				Detail: map[string]any{"reason": TopicOptOutReason(*b.email.TopicID), "topic_id": b.email.TopicID.String()}})
			continue
		}
		i, ok := groups[r.Domain]
		if !ok {
			i = len(res.Groups)
			groups[r.Domain] = i
			g := b.group
			g.Domain = r.Domain
			res.Groups = append(res.Groups, g)
		}
		res.Groups[i].Recipients = append(res.Groups[i].Recipients, r.Address)
	}
	return res, evs
}

// RecordBatchEvents is RecordEvents for several emails of a team, in one
// transaction. When an email no longer exists (erased by a data request
// while it was being sent), the emails are recorded one at a time, as
// RecordEvents records them: that email's events are dropped.
func (a *Sending) RecordBatchEvents(ctx context.Context, in contract.RecordBatchEventsInput) error {
	now := a.now()
	all := make([]store.EmailEvents, 0, len(in.Emails))
	for _, e := range in.Emails {
		id, err := uuid.Parse(e.EmailID)
		if err != nil {
			return temporal.NewNonRetryableApplicationError("bad email id", contract.ErrTypePermanent, err)
		}
		evs := make([]store.Event, len(e.Events))
		for i, ev := range e.Events {
			evs[i] = store.Event{Type: ev.Type, Recipient: ev.Recipient, Detail: ev.Detail, CreatedAt: now}
		}
		all = append(all, store.EmailEvents{EmailID: id, Events: evs})
	}
	err := a.events().RecordMany(ctx, all)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for _, e := range all {
		err := a.record(ctx, e.EmailID, e.Events)
		if errors.Is(err, store.ErrNotFound) {
			a.logger.Info("events of an email that no longer exists dropped", "email_id", e.EmailID)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}
