package receiving

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/unsubscribe"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/workflows/contract"
)

// ProcessInboundMessage reads a message the inbound MX accepted and acts
// on it, then marks it processed:
//
//   - a delivery status notification (RFC 3464) or non-standard bounce:
//     each failed recipient it may act on (see below) becomes
//     `bounced` with Resend's bounce object, even after `delivered`, and
//     a permanent recipient failure suppresses the address; a delayed
//     recipient gets one `delivery_delayed` (while it is not final);
//   - a complaint (RFC 5965 ARF, Microsoft JMRP) from a trusted feedback
//     loop (fromFeedbackLoop: authenticated, from ActivitiesConfig.FBLDomains): the
//     complaining recipient it may act on becomes `complained` and is
//     suppressed with reason `complaint`; any other complaint is kept as
//     received mail and acts on nobody;
//   - anything else (auto-replies, RFC 3834; human replies; reports about
//     emails we do not know): nothing is recorded.
//
// Whatever it is, a message with recipients at receiving domains is also
// stored, parsed, once per such domain, with an email.received event
// (receive).
//
// The email and recipient are the ones the return path the message was
// sent to names, else the ones the report's VERP address names (verified),
// always within the message's team; never the email with the report's
// original Message-ID alone (see reportTarget). A report acts on the
// recipient a per-recipient return path names, and only when it names
// that recipient; for an email from before per-recipient return paths,
// on the single recipient of the email it names (none when it names
// several). Other addresses the report names are ignored. Everything is idempotent (events happen once per
// recipient, suppressions once per address), so a retry repeats nothing;
// a message already processed, or gone, is left alone.
func (a *Activities) ProcessInboundMessage(ctx context.Context, in contract.ProcessInboundInput) (contract.ProcessInboundResult, error) {
	m, err := a.received.InboundByID(ctx, in.InboundID)
	if errors.Is(err, store.ErrNotFound) {
		return contract.ProcessInboundResult{}, nil // purged: nothing to do
	}
	if err != nil {
		return contract.ProcessInboundResult{}, err
	}
	if m.Status == store.InboundProcessed {
		return contract.ProcessInboundResult{Kind: m.Result}, nil
	}
	rep, err := reports.Parse(bytes.NewReader(m.Raw), reports.Limits{})
	if err != nil && !errors.Is(err, reports.ErrNotMessage) {
		return contract.ProcessInboundResult{}, fmt.Errorf("parsing inbound message %s: %w", m.ID, err)
	}
	res := contract.ProcessInboundResult{Kind: string(rep.Kind)}
	logger := a.logger.With("team_id", m.TeamID, "inbound_id", m.ID, "kind", rep.Kind)
	switch {
	case (rep.Kind == reports.KindDSN || rep.Kind == reports.KindBounce) && rep.DSN != nil:
		t, ok, err := a.reportTarget(ctx, m, &rep)
		if err != nil {
			return contract.ProcessInboundResult{}, err
		}
		if ok {
			res.EmailID = t.email.ID
			if dsn := t.bounceReport(rep.DSN); dsn != nil {
				if res.Events, res.Suppressed, err = a.recordBounces(ctx, t.email, dsn); err != nil {
					return contract.ProcessInboundResult{}, err
				}
			}
		}
	case rep.Kind == reports.KindFeedback && rep.Feedback != nil && rep.Feedback.Complaint():
		if !fromFeedbackLoop(m.Auth, rep.From, a.fblDomains) {
			// Kept as received mail (the inbound message), acting on
			// nobody: anyone can write an ARF report.
			logger.Info("complaint not from a trusted feedback loop: not acted on")
			break
		}
		t, ok, err := a.reportTarget(ctx, m, &rep)
		if err != nil {
			return contract.ProcessInboundResult{}, err
		}
		if ok {
			res.EmailID = t.email.ID
			if res.Events, res.Suppressed, err = a.recordComplaints(ctx, t.email, t.complainants(rep.Feedback)); err != nil {
				return contract.ProcessInboundResult{}, err
			}
		}
	}
	// Mailto unsubscribe addresses (RFC 2369): whatever the message says.
	if res.Unsubscribed, err = a.unsubscribeMailto(ctx, m); err != nil {
		return contract.ProcessInboundResult{}, err
	}
	// Receiving domains (issue 16 point 4): the message is stored for
	// each and announced with email.received.
	if res.Received, err = a.receive(ctx, m); err != nil {
		return contract.ProcessInboundResult{}, err
	}
	if err := a.received.MarkInboundProcessed(ctx, m.TeamID, m.ID, res.Kind); err != nil {
		return contract.ProcessInboundResult{}, err
	}
	logger.Info("inbound message processed", "email_id", res.EmailID, "events", res.Events,
		"suppressed", res.Suppressed, "received", res.Received, "unsubscribed", res.Unsubscribed)
	return res, nil
}

// unsubscribeMailto unsubscribes the recipient that each of m's mailto
// unsubscribe addresses names (mailto.Make) from the email's topic, or
// from everything when it has none, as the one-click POST of its link does
// (unsubscribe.Unsubscribe: the contact created if needed, the same
// webhook events). RFC 2369 §3.2: sending any message to the address is
// the request, so the message's content does not matter. An address whose
// email is gone (purged) is skipped; so is one whose code does not verify,
// which the MX would not have accepted.
func (a *Activities) unsubscribeMailto(ctx context.Context, m store.InboundMessage) (int, error) {
	n := 0
	for _, r := range m.Recipients {
		if r.Kind != inmail.RouteUnsubscribe || r.EmailID == nil {
			continue
		}
		addr, ok := mailto.Parse(r.Address)
		if !ok || addr.EmailID != *r.EmailID || !addr.Verify(a.unsubscribeMailtoKey) {
			a.logger.Warn("skipping an unsubscribe address that does not verify", "team_id", m.TeamID, "inbound_id", m.ID)
			continue
		}
		e, err := a.emails.GetEmail(ctx, m.TeamID, addr.EmailID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("loading email of unsubscribe address: %w", err)
		}
		if addr.Index >= len(e.Recipients) {
			continue
		}
		tok := unsubscribe.Token{TeamID: e.TeamID, EmailID: e.ID, TopicID: e.TopicID, BroadcastID: e.BroadcastID, Email: e.Recipients[addr.Index].Address}
		if err := unsubscribe.Unsubscribe(ctx, a.audience, a.logger, tok); err != nil {
			return n, fmt.Errorf("unsubscribing recipient %d of %s: %w", addr.Index, e.ID, err)
		}
		n++
	}
	return n, nil
}

// emailRecipient returns the recipient of e whose address is addr (compared
// case-insensitively), as e stores it.
func emailRecipient(e store.Email, addr string) (string, bool) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", false
	}
	for _, r := range e.Recipients {
		if strings.EqualFold(r.Address, addr) {
			return r.Address, true
		}
	}
	return "", false
}

// recordBounces records the final failures and delays of a DSN's
// recipients that belong to e, and suppresses the permanent ones.
func (a *Activities) recordBounces(ctx context.Context, e store.Email, dsn *reports.DSN) (events, suppressed int, err error) {
	now := a.now()
	var (
		evs      []store.Event
		suppress []string
	)
	for _, r := range dsn.Recipients {
		addr, ok := emailRecipient(e, r.Address())
		if !ok {
			continue // not a recipient of this email: a confused or forged report
		}
		switch {
		case r.Failed():
			b, ok := r.Bounce()
			if !ok {
				continue
			}
			evs = append(evs, store.Event{Type: store.EventBounced, Recipient: addr, CreatedAt: now, Async: true,
				Detail: contract.BounceDetail(b.Type, b.SubType, b.Message, b.DiagnosticCode)})
			if b.Suppress {
				suppress = append(suppress, addr)
			}
		case r.Action == reports.ActionDelayed:
			msg := r.DiagnosticCode
			if msg == "" {
				msg = r.Status
			}
			evs = append(evs, store.Event{Type: store.EventDeliveryDelayed, Recipient: addr, CreatedAt: now,
				Detail: map[string]any{"message": msg}})
		}
	}
	if err := a.record(ctx, e.ID, evs); err != nil {
		return 0, 0, err
	}
	if err := a.suppress(ctx, e, suppress); err != nil {
		return 0, 0, err
	}
	return len(evs), len(suppress), nil
}

// recordComplaints marks addrs, recipients of e, `complained` and
// suppresses them with reason complaint (see reportTarget.complainants).
func (a *Activities) recordComplaints(ctx context.Context, e store.Email, addrs []string) (events, suppressed int, err error) {
	now := a.now()
	evs := make([]store.Event, 0, len(addrs))
	for _, addr := range addrs {
		evs = append(evs, store.Event{Type: store.EventComplained, Recipient: addr, CreatedAt: now})
	}
	if err := a.record(ctx, e.ID, evs); err != nil {
		return 0, 0, err
	}
	for _, addr := range addrs {
		if _, ok := sandbox.Outcome(addr); ok {
			continue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return 0, 0, err
		}
		emailID := e.ID
		if _, _, err := a.emails.AddSuppression(ctx, store.Suppression{ID: id, TeamID: e.TeamID, Email: addr,
			Reason: store.SuppressionComplaint, EmailID: &emailID}); err != nil {
			return 0, 0, fmt.Errorf("suppressing a complaining address of %s: %w", e.ID, err)
		}
		suppressed++
	}
	return len(evs), suppressed, nil
}
