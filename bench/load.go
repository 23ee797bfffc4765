package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxConns is the number of keep-alive connections the client keeps to the
// API: enough for the widest accept run.
const maxConns = 64

// apiClient posts sandbox emails to the API.
type apiClient struct {
	http *http.Client
	base string
	key  string
	body []byte
}

func newAPIClient(base, key string) *apiClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		MaxConnsPerHost:     maxConns,
		IdleConnTimeout:     90 * time.Second,
	}
	body, _ := json.Marshal(map[string]string{
		"from":    "onboarding@posthaste.test",
		"to":      "delivered@posthaste.test",
		"subject": "posthaste bench",
		"text":    "A sandbox email sent by go run ./bench.",
	})
	return &apiClient{http: &http.Client{Transport: tr, Timeout: 60 * time.Second}, base: base, key: key, body: body}
}

// loadResult is one run of POST /emails.
type loadResult struct {
	n, conc   int
	ok        int             // answers 200 with an id
	status    map[int]int     // other answers by status code
	errs      int             // requests that got no answer
	firstErr  string          // the first failure, for the report
	elapsed   time.Duration   // first request to last answer
	latencies []time.Duration // of every request, sorted
	firstID   string          // the id of the first email accepted
}

func (r loadResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "c=%-3d n=%-6d ok=%-6d %8.1f accepted/s  p50 %-9s p99 %-9s max %-9s in %s",
		r.conc, r.n, r.ok, float64(r.ok)/r.elapsed.Seconds(),
		fmtDur(r.percentile(0.50)), fmtDur(r.percentile(0.99)), fmtDur(r.percentile(1)), fmtDur(r.elapsed))
	fmt.Fprintf(&b, "  non-200 %d", r.n-r.ok-r.errs)
	codes := make([]int, 0, len(r.status))
	for c := range r.status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, " [%d: %d]", c, r.status[c])
	}
	if r.errs > 0 {
		fmt.Fprintf(&b, "  errors %d", r.errs)
	}
	if r.firstErr != "" {
		fmt.Fprintf(&b, "  (first: %s)", r.firstErr)
	}
	return b.String()
}

// percentile returns the latency at quantile q (nearest rank).
func (r loadResult) percentile(q float64) time.Duration { return percentile(r.latencies, q) }

// percentile returns the value of sorted (ascending) at quantile q, by
// nearest rank; 0 for none.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// load sends n emails with conc requests in flight and reports every
// answer; only a cancelled ctx is an error.
func (c *apiClient) load(ctx context.Context, n, conc int) (loadResult, error) {
	res := loadResult{n: n, conc: conc, status: map[int]int{}}
	var (
		next      atomic.Int64
		mu        sync.Mutex
		wg        sync.WaitGroup
		latencies = make([]time.Duration, n)
	)
	record := func(i int, d time.Duration, code int, id string, err error) {
		latencies[i] = d
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			res.errs++
			if res.firstErr == "" {
				res.firstErr = err.Error()
			}
		case code == http.StatusOK:
			res.ok++
			if res.firstID == "" {
				res.firstID = id
			}
		default:
			res.status[code]++
			if res.firstErr == "" {
				res.firstErr = fmt.Sprintf("status %d: %s", code, id)
			}
		}
	}
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				code, id, err := c.send(ctx)
				record(i, time.Since(t), code, id, err)
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	res.latencies = latencies
	return res, nil
}

// send posts one email. For a 200 it returns the id; for another status,
// the start of the body.
func (c *apiClient) send(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/emails", bytes.NewReader(c.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	if err != nil {
		return 0, "", fmt.Errorf("reading the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		s := string(raw)
		if len(s) > 200 {
			s = s[:200]
		}
		return res.StatusCode, s, nil
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" {
		return 0, "", fmt.Errorf("answer 200 without an id: %.200s", raw)
	}
	return res.StatusCode, out.ID, nil
}
