package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const (
	acceptedMetric = "posthaste_emails_accepted_total"
	eventsMetric   = "posthaste_email_events_total"
	inboundMetric  = "posthaste_inbound_messages_total"
	// stallTimeout bounds a wait in which the delivered counter stops moving.
	stallTimeout = 2 * time.Minute
)

// scraper reads Posthaste's counters from /metrics.
type scraper struct {
	http *http.Client
	url  string
}

func newScraper(c *http.Client, base string) *scraper {
	return &scraper{http: c, url: base + "/metrics"}
}

// sample is one reading of the counters.
type sample struct {
	accepted  float64 // posthaste_emails_accepted_total, summed over its labels
	delivered float64 // posthaste_email_events_total{type="delivered"}
	// inboundAccepted is posthaste_inbound_messages_total{result="accepted"}
	// (the MX's 250 after DATA), inboundOther its other results.
	inboundAccepted, inboundOther float64
}

func (s *scraper) scrape(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return sample{}, err
	}
	// Text format only: the parser below reads nothing else.
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := s.http.Do(req)
	if err != nil {
		return sample{}, fmt.Errorf("scraping /metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("scraping /metrics: status %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return sample{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	var out sample
	out.accepted = sumCounter(fams[acceptedMetric], nil)
	out.delivered = sumCounter(fams[eventsMetric], map[string]string{"type": "delivered"})
	out.inboundAccepted = sumCounter(fams[inboundMetric], map[string]string{"result": "accepted"})
	out.inboundOther = sumCounter(fams[inboundMetric], nil) - out.inboundAccepted
	return out, nil
}

// sumCounter adds the counters of f whose labels include want.
func sumCounter(f *dto.MetricFamily, want map[string]string) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(want) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// waitDelivered polls every interval until the delivered counter reaches
// target and returns when the poll saw it. It fails when the counter does
// not move for stallTimeout or ctx ends. Progress goes to logf every 15 s.
func (s *scraper) waitDelivered(ctx context.Context, target float64, interval time.Duration, logf func(string, ...any)) (time.Time, error) {
	var last float64 = -1
	lastMove := time.Now()
	lastLog := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cur, err := s.scrape(ctx)
		now := time.Now()
		if err != nil {
			return now, err
		}
		if cur.delivered >= target {
			return now, nil
		}
		if cur.delivered != last {
			last, lastMove = cur.delivered, now
		} else if now.Sub(lastMove) > stallTimeout {
			return now, fmt.Errorf("delivered counter stuck at %.0f of %.0f for %s", cur.delivered, target, stallTimeout)
		}
		if now.Sub(lastLog) >= 15*time.Second {
			logf("  delivered %.0f of %.0f", cur.delivered, target)
			lastLog = now
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-t.C:
		}
	}
}
