package broadcast

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/workflows/contract"
)

// DefaultBroadcastRate is the emails a second a team's broadcasts hand to
// the send path when POSTHASTE_BROADCAST_RATE is not set.
const DefaultBroadcastRate = 100

// Activities are the activities of the Broadcast workflow, which hands a
// broadcast's contacts to the send path chunk by chunk at the team's pace.
// The worker registers each under its name in workflows/contract.
type Activities struct {
	broadcasts *store.Broadcasts
	domains    *store.Domains
	audience   *store.Audience // contact properties
	accounts   *store.Accounts // the sandbox sender's members
	insights   *store.Insights // sending paused for account health
	outbox     Notifier
	now        func() time.Time
	crash      *faults.Crasher
	rate       float64
}

// ActivitiesConfig wires the Activities.
type ActivitiesConfig struct {
	// Rate is the emails a second each team's broadcasts hand to the
	// send path (POSTHASTE_BROADCAST_RATE); 0 → DefaultBroadcastRate.
	Rate float64
	// Outbox is told when a chunk queued a batch or failed emails; may be
	// nil.
	Outbox Notifier
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Crash, when set, kills the process after a chunk was handed over
	// (package faults); nil in any real deployment.
	Crash *faults.Crasher
}

// NewActivities returns the activities of Broadcast over st.
func NewActivities(cfg ActivitiesConfig, st *store.Store) *Activities {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Activities{broadcasts: st.Broadcasts, domains: st.Domains, audience: st.Audience, accounts: st.Accounts,
		insights: st.Insights, outbox: cfg.Outbox, now: now, crash: cfg.Crash, rate: cfg.Rate}
}

// StartBroadcast reads the broadcast; once its scheduled time has come it
// moves it from scheduled to queued.
func (a *Activities) StartBroadcast(ctx context.Context, in contract.BroadcastInput) (contract.BroadcastState, error) {
	b, err := a.broadcasts.BroadcastByID(ctx, in.BroadcastID)
	if errors.Is(err, store.ErrNotFound) {
		return contract.BroadcastState{Next: contract.BroadcastEnd}, nil
	}
	if err != nil {
		return contract.BroadcastState{}, classify(err)
	}
	status := b.Status
	if status == store.BroadcastScheduled && (b.ScheduledAt == nil || !b.ScheduledAt.After(a.now())) {
		if status, err = a.broadcasts.MoveBroadcast(ctx, b.ID, []string{store.BroadcastScheduled},
			store.BroadcastQueued, nil); err != nil {
			return contract.BroadcastState{}, classify(err)
		}
	}
	st := contract.BroadcastState{TeamID: b.TeamID, Next: contract.BroadcastEnd, ScheduledAt: b.ScheduledAt}
	switch status {
	case store.BroadcastScheduled:
		st.Next = contract.BroadcastWait
	case store.BroadcastQueued, store.BroadcastSending, store.BroadcastPaused:
		st.Next = contract.BroadcastSend
	}
	return st, nil
}

// ReserveBroadcastPace reserves N emails of the team's pace
// (ActivitiesConfig.Rate a second, shared by all its broadcasts and all
// processes; store.ReserveBroadcastPace).
func (a *Activities) ReserveBroadcastPace(ctx context.Context, in contract.PaceInput) (contract.PaceResult, error) {
	rate := a.rate
	if rate == 0 {
		rate = DefaultBroadcastRate
	}
	wait, err := a.broadcasts.ReserveBroadcastPace(ctx, in.TeamID, in.N, rate)
	if err != nil {
		return contract.PaceResult{}, classify(err)
	}
	return contract.PaceResult{Wait: wait}, nil
}

// HandOffBroadcastChunk hands one chunk of the broadcast's contacts to
// the send path (store.HandOffBroadcastChunk): each contact's email
// rendered (broadcast.Render), accepted as one batch whose SendBatch the
// outbox starts. A contact whose email cannot be rendered, or whom the
// sandbox sender may not write to, gets an email recorded failed with the
// reason. A sender domain that is no longer verified pauses the broadcast
// with the reason, like a used-up quota, and so does a team whose sending
// is paused for its account health. Handing the same chunk over again
// does nothing new.
func (a *Activities) HandOffBroadcastChunk(ctx context.Context, in contract.BroadcastChunkInput) (contract.BroadcastChunkResult, error) {
	res, err := a.handOffBroadcastChunk(ctx, in)
	return contract.BroadcastChunkResult(res), err
}

func (a *Activities) handOffBroadcastChunk(ctx context.Context, in contract.BroadcastChunkInput) (store.BroadcastChunkResult, error) {
	b, err := a.broadcasts.BroadcastByID(ctx, in.BroadcastID)
	if errors.Is(err, store.ErrNotFound) {
		return store.BroadcastChunkResult{Canceled: true}, nil
	}
	if err != nil {
		return store.BroadcastChunkResult{}, classify(err)
	}
	domain, d, reason, err := a.broadcastSender(ctx, b)
	if err != nil {
		return store.BroadcastChunkResult{}, classify(err)
	}
	if reason == "" {
		// A team whose sending is paused for its account health (bounce
		// or complaint rate) hands no more of its broadcasts over until an
		// operator resumes it; the broadcast then goes on by itself.
		p, err := a.insights.SendingPause(ctx, b.TeamID)
		if err != nil {
			return store.BroadcastChunkResult{}, classify(err)
		}
		if p != nil {
			reason = p.Message()
		}
	}
	if reason != "" {
		return a.pauseBroadcast(ctx, b.ID, reason)
	}
	props, err := Properties(ctx, a.audience, b.TeamID)
	if err != nil {
		return store.BroadcastChunkResult{}, classify(err)
	}
	var members map[string]bool
	var domainID *uuid.UUID
	if d != nil {
		domainID = &d.ID
	} else {
		if members, err = a.memberAddresses(ctx, b.TeamID); err != nil {
			return store.BroadcastChunkResult{}, classify(err)
		}
	}
	render := func(b store.Broadcast, c store.BroadcastContact) (store.RenderedBroadcast, error) {
		r, err := Render(b, c, props)
		if err == nil && members != nil && !members[c.Email] {
			if _, ok := sandbox.Outcome(c.Email); !ok {
				// Rendered all the same, so the failed email reads as it would have.
				err = fmt.Errorf("the sandbox sender %s writes only to the team's "+
					"members and the sandbox addresses; verify a domain to send to this contact", sandbox.Sender)
			}
		}
		return r, err
	}
	res, err := a.broadcasts.HandOffBroadcastChunk(ctx, store.BroadcastChunk{BroadcastID: b.ID, Seq: in.Seq,
		After: in.After, Size: in.Size, FromDomain: domain, DomainID: domainID, Now: a.now(),
		// The insights an API email with the same content would get,
		// read from the domain row authorising the sender loaded.
		Insights: func(e store.Email) []store.Insight { return submit.EmailInsights(e, d) }}, render)
	if err != nil {
		return store.BroadcastChunkResult{}, classify(err)
	}
	a.crash.At(faults.AfterBroadcastChunk)
	if (res.BatchID != nil || res.Failed > 0) && a.outbox != nil {
		// The batch waits in the outbox; failed emails may have queued
		// webhook messages.
		a.outbox.Notify()
	}
	return res, nil
}

// broadcastSender checks that the broadcast's team may still send from its
// address and returns its domain's name and the domain (nil for the
// sandbox), or why not (reason) when it may not.
func (a *Activities) broadcastSender(ctx context.Context, b store.Broadcast) (string, *store.Domain, string, error) {
	addr, err := address.Parse(b.From)
	if err != nil {
		return "", nil, fmt.Sprintf("The sender %q is not a valid address.", b.From), nil
	}
	domain := strings.ToLower(addr.Domain)
	if sandbox.IsDomain(domain) {
		if !sandbox.IsSender(addr.Addr()) {
			return "", nil, fmt.Sprintf("The sandbox domain %s can only send from onboarding@%[1]s.", domain), nil
		}
		return domain, nil, "", nil
	}
	d, err := a.domains.DomainByName(ctx, b.TeamID, domain)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, fmt.Sprintf("The sender domain %s was removed. Add and verify it again, or cancel the broadcast.", domain), nil
	}
	if err != nil {
		return "", nil, "", err
	}
	if !d.Sendable() {
		return "", nil, fmt.Sprintf("The sender domain %s is not verified (its status is %s). Sending resumes once it verifies again, unless the broadcast is canceled.", domain, d.Status), nil
	}
	return domain, &d, "", nil
}

// pauseBroadcast pauses a queued or sending broadcast with reason.
func (a *Activities) pauseBroadcast(ctx context.Context, id uuid.UUID, reason string) (store.BroadcastChunkResult, error) {
	status, err := a.broadcasts.MoveBroadcast(ctx, id, []string{store.BroadcastQueued, store.BroadcastSending,
		store.BroadcastPaused}, store.BroadcastPaused, &reason)
	if err != nil {
		return store.BroadcastChunkResult{}, classify(err)
	}
	if status == store.BroadcastCanceled {
		return store.BroadcastChunkResult{Canceled: true}, nil
	}
	return store.BroadcastChunkResult{Paused: true, Reason: reason}, nil
}

// memberAddresses returns the addresses of the team's members, lower-cased.
func (a *Activities) memberAddresses(ctx context.Context, teamID uuid.UUID) (map[string]bool, error) {
	members, err := a.accounts.Members(ctx, teamID)
	if err != nil {
		return nil, fmt.Errorf("listing members: %w", err)
	}
	out := make(map[string]bool, len(members))
	for _, m := range members {
		out[strings.ToLower(m.Email)] = true
	}
	return out, nil
}

// FinishBroadcast marks a broadcast sent once every contact was handed
// over; a canceled one stays canceled.
func (a *Activities) FinishBroadcast(ctx context.Context, in contract.BroadcastInput) error {
	_, err := a.broadcasts.MoveBroadcast(ctx, in.BroadcastID,
		[]string{store.BroadcastQueued, store.BroadcastSending, store.BroadcastPaused}, store.BroadcastSent, nil)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return classify(err)
}

// classify makes a missing row a permanent error; anything else stays
// retryable.
func classify(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return contract.Permanent(err)
	}
	return err
}
