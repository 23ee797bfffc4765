package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// The inbound accept step: dev's inbound MX (`posthaste mx`, run by dev on
// a free loopback port) receiving mail for a verified domain with
// receiving enabled, fed by the same tool and payload as the durable
// Postfix reference of the SMTP step (smtpSource: smtp-source, 1 KB
// bodies, connections kept open), so the two rates compare. The MX
// commits each message to PostgreSQL before its 250 (docs/inbound.md, "Bounces and
// complaints"), as Postfix fsyncs its queue file before its own.

// inboundRcpt is the local part the step sends to at chaosSenderDomain.
const inboundRcpt = "inbound"

// inboundRun is one measured run of the inbound step.
type inboundRun struct {
	conns    int
	messages int
	ours     rate
	durable  rate // the durable Postfix reference of the SMTP step with as many connections; zero when skipped
}

// inboundResult is the inbound step; skip says why it did not run ("" when
// it did).
type inboundResult struct {
	runs []inboundRun
	skip string
}

// measureInbound enables receiving on chaosSenderDomain (verified by the
// real delivery step), then times smtp-source sending each SMTP run's
// count of messages over as many connections to inbound@ that domain at
// dev's inbound MX, and checks on dev's /metrics that the MX answered 250
// to every one of them (smtp-source exits 0 even when the server rejects).
// The durable Postfix rates come from smtp, measured earlier in the run.
func measureInbound(ctx context.Context, dev *devProcess, smtp smtpResult, p func(string, ...any), logf func(string, ...any)) (inboundResult, error) {
	var res inboundResult
	for _, r := range smtp.runs {
		res.runs = append(res.runs, inboundRun{conns: r.conns, messages: r.messages, durable: r.durable})
	}
	p("")
	p("inbound accept rate: messages/s, posthaste inbound MX (plain text, no AUTH, to %s@%s, receiving enabled)",
		inboundRcpt, chaosSenderDomain)
	p("  beside the SMTP step's durable Postfix; both fed by smtp-source with 1 KB bodies")
	switch {
	case dev.inbound == "":
		res.skip = "dev runs no inbound MX"
	default:
		res.skip = postfixUnavailable()
	}
	if res.skip != "" {
		p("  skipped: %s", res.skip)
		return res, nil
	}
	c := newChaosClient(dev.base, dev.creds.APIKey)
	if err := enableReceiving(ctx, c, chaosSenderDomain); err != nil {
		return res, err
	}
	m := newScraper(c.http, dev.base)
	to := inboundRcpt + "@" + chaosSenderDomain
	for i := range res.runs {
		r := &res.runs[i]
		before, err := m.scrape(ctx)
		if err != nil {
			return res, err
		}
		logf("inbound MX (%s), %d messages over %d connections", dev.inbound, r.messages, r.conns)
		got, err := smtpSource(ctx, dev.inbound, r.messages, r.conns, "a@"+benchDomain, to)
		if err != nil {
			return res, err
		}
		after, err := m.scrape(ctx)
		if err != nil {
			return res, err
		}
		if acc, other := after.inboundAccepted-before.inboundAccepted, after.inboundOther-before.inboundOther; acc != float64(r.messages) || other != 0 {
			return res, fmt.Errorf("inbound MX: %.0f of %d messages accepted, %.0f rejected or deferred (%s)",
				acc, r.messages, other, inboundMetric)
		}
		r.ours = got
	}
	for _, r := range res.runs {
		p("  c=%-2d %6d msgs  inbound accept              %8.1f msg/s  (all accepted: %s)", r.conns, r.messages, r.ours.perSecond(), inboundMetric)
		if r.durable.n > 0 {
			p("  c=%-2d %6d msgs  postfix durable queue       %8.1f msg/s   ratio %.3f", r.conns, r.messages, r.durable.perSecond(), ratio(r.ours, r.durable))
		} else {
			p("  c=%-2d %6d msgs  postfix durable queue       skipped: %s", r.conns, r.messages, smtp.durableSkip)
		}
	}
	return res, nil
}

// enableReceiving turns receiving on for the team's domain name with
// PATCH /domains/{id} {"capabilities": {"receiving": "enabled"}}.
func enableReceiving(ctx context.Context, c *chaosClient, name string) error {
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"data"`
	}
	if err := c.getRetrying(ctx, "/domains", &list); err != nil {
		return fmt.Errorf("listing domains: %w", err)
	}
	id := ""
	for _, d := range list.Data {
		if d.Name == name {
			id = d.ID
		}
	}
	if id == "" {
		return errors.New("enabling receiving: no domain " + name)
	}
	a, err := c.do(ctx, http.MethodPatch, "/domains/"+id, map[string]any{"capabilities": map[string]any{"receiving": "enabled"}}, nil)
	if err != nil {
		return fmt.Errorf("enabling receiving on %s: %w", name, err)
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("enabling receiving on %s: status %d: %.300s", name, a.status, a.body)
	}
	return nil
}
