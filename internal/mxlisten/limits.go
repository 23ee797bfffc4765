package mxlisten

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/connlimit"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/ratelimit"
)

// Inbound volume. The MX answers the whole internet
// without authentication, and what it accepts is kept 30 days, so it
// bounds what one client and one team can make it keep:
//
//   - Rates: messages per minute from one client (an IPv4 address, an
//     IPv6 /64) and from its network (IPv4 /24, IPv6 /48), taken at MAIL
//     FROM, so that a
//     transaction beyond them is refused (450 4.7.1) before anything is
//     read; and a separate, small rate of recipients per minute at one
//     team's return paths and unsubscribe addresses (450 4.7.1 at RCPT),
//     mail that does not count against the team's receiving budget.
//   - A budget per team of the mail its receiving domains get: messages
//     per UTC day and bytes kept (received in the last 30 days, which is
//     what retention keeps). A recipient of a team at or over it is
//     refused at RCPT (452 4.2.2); the acceptor counts each message in
//     the transaction that stores it and refuses it (ErrOverBudget) when
//     it would go over, so racing transactions cannot overshoot.

// RatePeriod is the period of Limits' rates.
const RatePeriod = time.Minute

// RateLimiter takes one from key's bucket of limit per period (burst
// limit); *ratelimit.Local and *ratelimit.Redis implement it.
type RateLimiter interface {
	AllowPer(ctx context.Context, key string, limit int, period time.Duration) (ratelimit.Result, error)
}

var (
	_ RateLimiter = (*ratelimit.Local)(nil)
	_ RateLimiter = (*ratelimit.Redis)(nil)
)

// Limits are the MX's message rates, per RatePeriod; zero is no limit.
type Limits struct {
	// PerAddress caps the transactions (MAIL FROM) of one client (an IPv4
	// address, an IPv6 /64); PerNetwork those of its IPv4 /24 or IPv6 /48.
	PerAddress, PerNetwork int
	// ReturnPath caps the recipients at one team's return paths and
	// mailto unsubscribe addresses from one network; from all networks
	// together the team takes ReturnPathTeamFactor times as many.
	ReturnPath int
	// Limiter keeps the buckets; nil is one of this process
	// (ratelimit.NewLocal).
	Limiter RateLimiter
}

// Refusals of the limits.
var (
	errRateAddress = reply(450, 4, 7, 1, "Too many messages from your address, try again later")
	errRateNetwork = reply(450, 4, 7, 1, "Too many messages from your network, try again later")
	errRateReports = reply(450, 4, 7, 1, "Too many messages for this sender's return paths, try again later")
	errOverBudget  = reply(452, 4, 2, 2, "Recipient's inbound quota exceeded, try again later")
)

// allowClient takes one message from the client address's and its
// network's buckets; nil when both allow it.
func (s *Server) allowClient(ctx context.Context, ip netip.Addr) error {
	l := s.cfg.Limits
	// A client is an IPv4 address or an IPv6 /64, a network an IPv4 /24
	// or an IPv6 /48, as for the connection caps: an IPv6 host has a /64
	// to rotate addresses in, so a network of /64s would be the client.
	client, network := connlimit.Keys(ip)
	if l.PerAddress > 0 {
		r, err := l.Limiter.AllowPer(ctx, "mx:addr:"+client.String(), l.PerAddress, RatePeriod)
		if err != nil {
			return fmt.Errorf("rate of the client address: %w", err)
		}
		if !r.Allowed {
			return errRateAddress
		}
	}
	if l.PerNetwork > 0 {
		r, err := l.Limiter.AllowPer(ctx, "mx:net:"+network.String(), l.PerNetwork, RatePeriod)
		if err != nil {
			return fmt.Errorf("rate of the client network: %w", err)
		}
		if !r.Allowed {
			return errRateNetwork
		}
	}
	return nil
}

// ReturnPathTeamFactor is how many times Limits.ReturnPath one team's
// return paths take in all, from every network together; one network
// takes at most Limits.ReturnPath of them, so a stranger who fills its own
// bucket cannot hold back the reports that mailbox providers send the team.
const ReturnPathTeamFactor = 10

// allowReport takes one recipient from the bucket of the team's return
// paths for the client's network (an IPv4 /24, an IPv6 /48), then from the
// team's bucket of all networks; nil when both allow it.
func (s *Server) allowReport(ctx context.Context, team uuid.UUID, ip netip.Addr) error {
	l := s.cfg.Limits
	if l.ReturnPath <= 0 {
		return nil
	}
	_, network := connlimit.Keys(ip)
	for _, b := range []struct {
		key   string
		limit int
	}{
		{"mx:reports:" + team.String() + ":" + network.String(), l.ReturnPath},
		{"mx:reports:" + team.String(), l.ReturnPath * ReturnPathTeamFactor},
	} {
		r, err := l.Limiter.AllowPer(ctx, b.key, b.limit, RatePeriod)
		if err != nil {
			return fmt.Errorf("rate of return paths: %w", err)
		}
		if !r.Allowed {
			return errRateReports
		}
	}
	return nil
}

// checkBudget refuses a recipient of a team whose budget is full.
func (s *Server) checkBudget(ctx context.Context, team uuid.UUID) error {
	b := s.cfg.Budget
	if b.Usage == nil {
		return nil
	}
	u, err := b.Usage.InboundUsage(ctx, team, s.cfg.Now())
	if err != nil {
		return fmt.Errorf("reading inbound usage: %w", err)
	}
	if b.Full(u) {
		return errOverBudget
	}
	return nil
}

// admit applies the per-team limits to a routed recipient: the rate of
// return-path mail, or the receiving budget.
func (s *Server) admit(ctx context.Context, r inmail.Route, ip netip.Addr) error {
	switch r.Kind {
	case inmail.RouteReturnPath, inmail.RouteUnsubscribe:
		return s.allowReport(ctx, r.TeamID, ip)
	case inmail.RouteReceiving:
		return s.checkBudget(ctx, r.TeamID)
	}
	return nil // RouteDiscard: dropped unread, kept nowhere
}
