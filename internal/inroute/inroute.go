// Package inroute says whose a recipient of received mail is: the inbound
// MX's Router (inmail.Router). The return paths of the emails Posthaste
// sent (reports.ParseVERP) and their mailto unsubscribe addresses
// (mailto.Parse) are routed to the email's team when their signatures
// verify and the email they name has the recipient and return-path host
// they claim; an address at a verified domain with receiving enabled is
// routed to that domain's team. The store answers the queries; the
// decision is made here.
package inroute

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
)

// Routes is what routing reads of received mail's routes.
type Routes interface {
	// EmailRoute loads what routing an address of email id needs;
	// store.ErrNotFound when the email or its domain is gone.
	EmailRoute(ctx context.Context, id uuid.UUID) (store.EmailRoute, error)
	// ReceivingDomain finds the verified domain named host with receiving
	// enabled; store.ErrNotFound when there is none.
	ReceivingDomain(ctx context.Context, host string) (teamID, domainID uuid.UUID, err error)
}

// Emails loads the email a report names.
type Emails interface {
	// GetEmail loads the team's email.
	GetEmail(ctx context.Context, teamID, id uuid.UUID) (store.Email, error)
}

var (
	_ Routes        = (*store.Received)(nil)
	_ Emails        = (*store.Emails)(nil)
	_ inmail.Router = (*Router)(nil)
)

// Router routes the recipients of received mail. It is safe for
// concurrent use.
type Router struct {
	st     Routes
	emails Emails
	// verpKeys verify the signatures of return paths; unsubKeys those of
	// mailto unsubscribe addresses.
	verpKeys, unsubKeys [][]byte
}

// New returns a Router reading routes from st and emails from emails. verpKey verifies the signatures of
// return paths (reports.RecipientReturnPath, reports.SignedReturnPath); it
// may be nil in a process without a master key, which then routes only the
// unsigned return paths of emails from before signing (see ReturnPath).
// unsubKey verifies the mailto unsubscribe addresses of our emails
// (mailto.Make; derived from the master key with mailto.KeyPurpose);
// without it, none is routed.
func New(st Routes, emails Emails, verpKey, unsubKey []byte) *Router {
	return &Router{st: st, emails: emails, verpKeys: keyList(verpKey), unsubKeys: keyList(unsubKey)}
}

func keyList(k []byte) [][]byte {
	if len(k) == 0 {
		return nil
	}
	return [][]byte{k}
}

// Route says whose a recipient is: the return paths of our emails
// (ReturnPath), their mailto unsubscribe addresses (Unsubscribe) and the
// addresses at verified domains with receiving enabled (Receiving); every
// other address is inmail.ErrNotOurs.
func (r *Router) Route(ctx context.Context, rcpt string) (inmail.Route, error) {
	if a, ok := mailto.Parse(rcpt); ok {
		if rt, err := r.Unsubscribe(ctx, a); !errors.Is(err, inmail.ErrNotOurs) {
			return rt, err
		}
	}
	if v, ok := reports.ParseVERP(rcpt); ok {
		if rt, err := r.ReturnPath(ctx, v); !errors.Is(err, inmail.ErrNotOurs) {
			return rt, err
		}
	}
	return r.Receiving(ctx, rcpt)
}

// ReturnPath routes the VERP return path v of an email: the email must
// exist and v's host must be its domain's return-path host
// (<return_path>.<domain name>). A per-recipient return path
// (reports.RecipientReturnPath) must verify and name a recipient the email
// has. The per-email forms every recipient of an email shared are routed
// only for an email created before return paths were per recipient
// (store.EmailRoute.BeforePerRecipient): signed and verifying, or unsigned
// for an email created before return paths were signed
// (BeforeSigning). Any later email went out with per-recipient return
// paths, so a per-email one for it is forged. A verified return path of
// an email no longer kept is inmail.RouteDiscard. Anything else is
// inmail.ErrNotOurs; a database failure is another error.
func (r *Router) ReturnPath(ctx context.Context, v reports.VERP) (inmail.Route, error) {
	verified := false
	for _, k := range r.verpKeys {
		verified = verified || v.Verify(k) // an unsigned path never verifies
	}
	if v.PerRecipient && !verified {
		return inmail.Route{}, inmail.ErrNotOurs // no database round trip for a forged code
	}
	e, err := r.st.EmailRoute(ctx, v.EmailID)
	if errors.Is(err, store.ErrNotFound) {
		// Signed by us for an email no longer kept (or whose domain is
		// gone): ours, and dropped unread.
		if verified {
			return inmail.Route{Kind: inmail.RouteDiscard}, nil
		}
		return inmail.Route{}, inmail.ErrNotOurs
	}
	if err != nil {
		return inmail.Route{}, fmt.Errorf("routing return path of %s: %w", v.EmailID, err)
	}
	if !strings.EqualFold(v.Host, e.Host) {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	var ok bool
	switch {
	case v.PerRecipient:
		ok = v.Index < e.Recipients
	case v.Signature == "":
		ok = e.BeforeSigning && e.BeforePerRecipient
	default:
		ok = verified && e.BeforePerRecipient
	}
	if !ok {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	return inmail.Route{Kind: inmail.RouteReturnPath, TeamID: e.TeamID, DomainID: e.DomainID, EmailID: v.EmailID}, nil
}

// Unsubscribe routes the mailto unsubscribe address a of a recipient of
// an email (mailto.Make): a's code must verify, the email must exist and
// have a recipient at a's index, and a's host must be the return-path host
// of the email's domain (<return_path>.<domain name>). Anything else is
// inmail.ErrNotOurs; a database failure is another error.
func (r *Router) Unsubscribe(ctx context.Context, a mailto.Address) (inmail.Route, error) {
	ok := false
	for _, k := range r.unsubKeys {
		ok = ok || a.Verify(k)
	}
	if !ok {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	e, err := r.st.EmailRoute(ctx, a.EmailID)
	if errors.Is(err, store.ErrNotFound) {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	if err != nil {
		return inmail.Route{}, fmt.Errorf("routing unsubscribe address of %s: %w", a.EmailID, err)
	}
	if !strings.EqualFold(a.Host, e.Host) || a.Index >= e.Recipients {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	return inmail.Route{Kind: inmail.RouteUnsubscribe, TeamID: e.TeamID, DomainID: e.DomainID, EmailID: a.EmailID}, nil
}

// Receiving routes rcpt when it is an address at a domain with receiving
// enabled that is verified (store.ReceivingDomain). Anything else is
// inmail.ErrNotOurs.
func (r *Router) Receiving(ctx context.Context, rcpt string) (inmail.Route, error) {
	at := strings.LastIndexByte(rcpt, '@')
	if at <= 0 || at == len(rcpt)-1 {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	host := strings.TrimSuffix(strings.ToLower(rcpt[at+1:]), ".")
	team, domain, err := r.st.ReceivingDomain(ctx, host)
	if errors.Is(err, store.ErrNotFound) {
		return inmail.Route{}, inmail.ErrNotOurs
	}
	if err != nil {
		return inmail.Route{}, fmt.Errorf("routing %s: %w", host, err)
	}
	return inmail.Route{Kind: inmail.RouteReceiving, TeamID: team, DomainID: domain}, nil
}

// EmailByVERP finds the team's email a VERP return path names, under the
// rules of ReturnPath (host, signature and recipient; the per-email forms
// only for emails from before per-recipient return paths);
// store.ErrNotFound otherwise, also for other teams' emails. A report is
// never matched by its Message-ID alone, which every recipient of the
// email sees: only a return path names the recipient a report may be
// about.
func (r *Router) EmailByVERP(ctx context.Context, teamID uuid.UUID, v reports.VERP) (store.Email, error) {
	rt, err := r.ReturnPath(ctx, v)
	if errors.Is(err, inmail.ErrNotOurs) || (err == nil && (rt.Kind != inmail.RouteReturnPath || rt.TeamID != teamID)) {
		return store.Email{}, store.ErrNotFound
	}
	if err != nil {
		return store.Email{}, err
	}
	return r.emails.GetEmail(ctx, teamID, v.EmailID)
}
