package submit

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/insights"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

// attachInsights computes the deliverability insights of emails being
// accepted (internal/insights) from what is stored: the rows themselves
// and their sender domains' stored settings and verification results,
// loaded once per domain. No DNS lookup happens here.
func (s *Service) attachInsights(ctx context.Context, emails []store.Email) error {
	type key struct {
		team uuid.UUID
		name string
	}
	domains := map[key]*insights.Domain{}
	for i := range emails {
		e := &emails[i]
		var d *insights.Domain
		if e.DomainID != nil {
			k := key{e.TeamID, strings.ToLower(e.FromDomain)}
			var ok bool
			if d, ok = domains[k]; !ok {
				sd, err := s.store.DomainByName(ctx, k.team, k.name)
				if err != nil {
					return fmt.Errorf("loading domain %s for insights: %w", k.name, err)
				}
				d = insightsDomain(sd)
				domains[k] = d
			}
		}
		e.Insights = toInsights(insights.Check(insightsMessage(*e, d)))
	}
	return nil
}

// insightsDomain is what the insights read of a sender domain. A domain
// verified before its DMARC policy was kept (migration 00025) counts as
// checked only when its DMARC record was found missing.
func insightsDomain(d store.Domain) *insights.Domain {
	out := &insights.Domain{Name: d.Name, OpenTracking: d.OpenTracking, ClickTracking: d.ClickTracking}
	switch {
	case d.DMARCPolicy != nil:
		out.DMARCChecked, out.DMARCPolicy = true, *d.DMARCPolicy
	case d.RecordStatus[records.KeyDMARC] == store.DomainFailed:
		out.DMARCChecked = true
	}
	return out
}

func insightsMessage(e store.Email, d *insights.Domain) insights.Message {
	m := insights.Message{
		From: e.From, ReplyTo: e.ReplyTo, Subject: e.Subject, Recipients: len(e.Recipients),
		Topic: e.TopicID != nil, Broadcast: e.BroadcastID != nil, Domain: d,
		// The builder adds List-Unsubscribe to API emails with a topic
		// or of a broadcast (activities.BuildForRecipient).
		AutoUnsubscribe: e.Source == nil && (e.TopicID != nil || e.BroadcastID != nil),
	}
	if e.HTML != nil {
		m.HTML = *e.HTML
	}
	if e.Text != nil {
		m.Text = *e.Text
	}
	m.HasText = m.Text != "" || (e.Text == nil && e.GenerateText)
	if e.Source != nil {
		m.Headers, m.Attachments = insights.FromSource(e.Source)
		return m
	}
	for _, h := range e.Headers {
		m.Headers = append(m.Headers, insights.Header{Name: h.Name, Value: h.Value})
	}
	for _, a := range e.Attachments {
		m.Attachments = append(m.Attachments, insights.Attachment{Filename: a.Filename, ContentType: a.ContentType})
	}
	return m
}

func toInsights(fs []insights.Finding) []store.Insight {
	out := make([]store.Insight, len(fs))
	for i, f := range fs {
		out[i] = store.Insight{Code: f.Code, Severity: f.Severity, Message: f.Message, Fix: f.Fix}
	}
	return out
}
