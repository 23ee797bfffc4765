package submit

import (
	"fmt"

	"github.com/posthaste/posthaste/internal/insights"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

// attachInsights computes the deliverability insights of emails being
// accepted (internal/insights; EmailInsights) from what is stored: the rows
// themselves and their sender domains' stored settings and verification
// results, as authorising the emails loaded them (known). No query and no
// DNS lookup happens here.
func attachInsights(emails []store.Email, known senderDomains) error {
	for i := range emails {
		e := &emails[i]
		var d *store.Domain
		if e.DomainID != nil {
			// Every path that accepts an email authorises its sender
			// through known first; a row without its domain there is a bug.
			if d = known.byID(*e.DomainID); d == nil {
				return fmt.Errorf("computing insights: sender domain %s of email %s was not loaded", e.FromDomain, e.ID)
			}
		}
		e.Insights = EmailInsights(*e, d)
	}
	return nil
}

// EmailInsights returns the deliverability insights of an email about to
// be stored, sent from the sender domain d (nil for the sandbox sender).
// It is pure, so that emails accepted elsewhere than here (a broadcast's,
// handed over by broadcast.Activities.HandOffBroadcastChunk) get the findings an
// API email with the same content would.
func EmailInsights(e store.Email, d *store.Domain) []store.Insight {
	var id *insights.Domain
	if d != nil {
		id = insightsDomain(*d)
	}
	return toInsights(insights.Check(insightsMessage(e, id)))
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
		// or of a broadcast (delivery.BuildForRecipient).
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
