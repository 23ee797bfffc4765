package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// hookSink is a local webhook receiver that counts the events it gets.
type hookSink struct {
	mu          sync.Mutex
	n           int
	first, last time.Time
}

func (s *hookSink) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	now := time.Now()
	if s.n == 0 {
		s.first = now
	}
	s.n++
	s.last = now
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *hookSink) snapshot() (int, time.Time, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.first, s.last
}

// measureWebhooks adds one endpoint subscribed to email.sent and
// email.delivered, pointing at a receiver in this process, runs the sandbox
// end-to-end load again and reports: the events delivered per second to
// the receiver, and the end-to-end rate (first request until the last
// email is delivered and its two events have arrived) as a ratio of
// without, the rate measured before the endpoint existed.
func measureWebhooks(ctx context.Context, api *apiClient, dev *devProcess, c counts, without rate,
	p func(string, ...any), logf func(string, ...any)) (rate, error) {
	sink := &hookSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"endpoint": srv.URL + "/hook",
		"events": []string{"email.sent", "email.delivered"}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/webhooks", bytes.NewReader(body))
	if err != nil {
		return rate{}, err
	}
	req.Header.Set("Authorization", "Bearer "+api.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := api.http.Do(req)
	if err != nil {
		return rate{}, fmt.Errorf("creating the webhook: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return rate{}, fmt.Errorf("creating the webhook: status %d", resp.StatusCode)
	}

	m := newScraper(api.http, dev.base)
	base, err := m.scrape(ctx)
	if err != nil {
		return rate{}, err
	}
	logf("e2e with one webhook endpoint: %d emails at concurrency %d", c.e2e, c.conc)
	start := time.Now()
	r, err := api.load(ctx, c.e2e, c.conc)
	if err != nil {
		return rate{}, err
	}
	if r.ok != c.e2e {
		return rate{}, fmt.Errorf("e2e run with a webhook: %d of %d accepted: %s", r.ok, c.e2e, r)
	}
	delivered, err := m.waitDelivered(ctx, base.delivered+float64(c.e2e), 50*time.Millisecond, logf)
	if err != nil {
		return rate{}, fmt.Errorf("waiting for the e2e run with a webhook: %w", err)
	}
	want := 2 * c.e2e
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n, _, _ := sink.snapshot()
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			return rate{}, fmt.Errorf("the receiver got %d of %d events", n, want)
		}
		select {
		case <-ctx.Done():
			return rate{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	n, first, last := sink.snapshot()
	end := last
	if delivered.After(end) {
		end = delivered
	}
	with := rate{n: c.e2e, elapsed: end.Sub(start)}
	events := rate{n: n, elapsed: last.Sub(first)}
	p("")
	p("webhooks: one endpoint (email.sent, email.delivered) on a local receiver, %d emails at c=%d", c.e2e, c.conc)
	p("  accept %s", r)
	p("  %d events received in %s: %.1f events/s (first to last event)", n, fmtDur(events.elapsed), events.perSecond())
	p("  last email delivered %s after the first request, last event %s after it",
		fmtDur(delivered.Sub(start)), fmtDur(last.Sub(start)))
	p("  end to end with webhooks: %.1f emails/s; without: %.1f emails/s; ratio %.2f",
		with.perSecond(), without.perSecond(), ratio(with, without))
	return with, nil
}
