package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// chaosRequestTimeout bounds one request; a server that stopped
	// answering is retried like one that refused.
	chaosRequestTimeout = 30 * time.Second
	// chaosGiveUp is how long a client retries one email before it
	// reports it as not accepted.
	chaosGiveUp = 10 * time.Minute
	// chaosBackoff is the first pause between two tries of a request,
	// doubled up to chaosMaxBackoff.
	chaosBackoff    = 100 * time.Millisecond
	chaosMaxBackoff = 2 * time.Second
)

// chaosClient talks to the API of whichever dev process is running; its
// requests survive the restarts by being retried.
type chaosClient struct {
	http *http.Client
	base string
	key  string
}

func newChaosClient(base, key string) *chaosClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
	}
	return &chaosClient{http: &http.Client{Transport: tr, Timeout: chaosRequestTimeout}, base: base, key: key}
}

// apiAnswer is one answer of the API.
type apiAnswer struct {
	status int
	body   []byte
	name   string // of an error body
}

// do sends one request; a request that got no answer is an error.
func (c *chaosClient) do(ctx context.Context, method, path string, body any, header map[string]string) (apiAnswer, error) {
	var r io.Reader
	if body != nil {
		raw, ok := body.([]byte)
		if !ok {
			var err error
			if raw, err = json.Marshal(body); err != nil {
				return apiAnswer{}, err
			}
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return apiAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return apiAnswer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return apiAnswer{}, fmt.Errorf("reading the answer to %s %s: %w", method, path, err)
	}
	a := apiAnswer{status: res.StatusCode, body: raw}
	if res.StatusCode >= 300 {
		var e struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &e)
		a.name = e.Name
	}
	return a, nil
}

// retryClass names why a request is tried again, or "" when it must not
// be: no answer, a 5xx, 409 concurrent_idempotent_requests (the key's first
// request may still be running, or its process died holding the key) and
// 429 rate_limit_exceeded (not the monthly quota, which a retry won't fix).
func retryClass(a apiAnswer, err error) string {
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return "connection refused"
		case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return "connection reset"
		case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
			return "timeout"
		}
		return "no answer"
	}
	switch {
	case a.status >= 500:
		return fmt.Sprintf("%d %s", a.status, a.name)
	case a.status == http.StatusConflict && a.name == "concurrent_idempotent_requests",
		a.status == http.StatusTooManyRequests && a.name != "monthly_quota_exceeded":
		return fmt.Sprintf("%d %s", a.status, a.name)
	}
	return ""
}

// keyedSend is what became of one keyed email.
type keyedSend struct {
	key      string
	id       string // "" when not accepted
	attempts int
	// wait is how long the client went on trying after its first attempt
	// failed: from the end of that attempt until the answer with the id.
	wait time.Duration
	err  string // why it was not accepted
}

// retryCounts counts the retries of all clients by class.
type retryCounts struct {
	mu sync.Mutex
	by map[string]int
}

func (r *retryCounts) add(class string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]int{}
	}
	r.by[class]++
}

func (r *retryCounts) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	classes := make([]string, 0, len(r.by))
	for c := range r.by {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return r.by[classes[i]] > r.by[classes[j]] })
	parts := make([]string, len(classes))
	for i, c := range classes {
		parts[i] = fmt.Sprintf("%s %d", c, r.by[c])
	}
	return strings.Join(parts, ", ")
}

// chaosEmail is the body of keyed email i.
func chaosEmail(key string) []byte {
	b, _ := json.Marshal(map[string]any{
		"from":    "Chaos <chaos@" + chaosSenderDomain + ">",
		"to":      []string{chaosRcptA, chaosRcptB},
		"subject": key,
		"text":    "An email of the chaos benchmark (go run ./bench -chaos N).",
		"headers": map[string]string{chaosKeyHeader: key},
	})
	return b
}

// sendKeyed sends email key until an answer carries its id, retrying the
// same request with the same key after each failure that allows it.
func (c *chaosClient) sendKeyed(ctx context.Context, key string, retries *retryCounts, rnd func() float64) keyedSend {
	out := keyedSend{key: key}
	body := chaosEmail(key)
	hdr := map[string]string{"Idempotency-Key": key}
	var firstEnd time.Time
	backoff := chaosBackoff
	for {
		out.attempts++
		a, err := c.do(ctx, http.MethodPost, "/emails", body, hdr)
		now := time.Now()
		if out.attempts == 1 {
			firstEnd = now
		}
		if err == nil && a.status == http.StatusOK {
			var res struct {
				ID string `json:"id"`
			}
			if jerr := json.Unmarshal(a.body, &res); jerr != nil || res.ID == "" {
				out.err = fmt.Sprintf("answer 200 without an id: %.200s", a.body)
				return out
			}
			out.id = res.ID
			if out.attempts > 1 {
				out.wait = now.Sub(firstEnd)
			}
			return out
		}
		if ctx.Err() != nil {
			out.err = ctx.Err().Error()
			return out
		}
		class := retryClass(a, err)
		if class == "" {
			out.err = fmt.Sprintf("status %d: %.200s", a.status, a.body)
			return out
		}
		retries.add(class)
		if now.Sub(firstEnd) > chaosGiveUp {
			out.err = fmt.Sprintf("gave up after %d attempts over %s (last: %s)", out.attempts, chaosGiveUp, class)
			return out
		}
		// Full jitter: clients that failed together do not retry together.
		pause := time.Duration(float64(backoff) * (0.5 + rnd()/2))
		backoff = min(2*backoff, chaosMaxBackoff)
		select {
		case <-ctx.Done():
			out.err = ctx.Err().Error()
			return out
		case <-time.After(pause):
		}
	}
}

// sendAll sends keys chaos/0 .. chaos/n-1 from conc clients. The result
// is in key order; sending reports whether clients are still at work.
func (c *chaosClient) sendAll(ctx context.Context, n, conc int, seed uint64, retries *retryCounts, sending *atomic.Bool) []keyedSend {
	out := make([]keyedSend, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	sending.Store(true)
	for w := range conc {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				out[i] = c.sendKeyed(ctx, chaosKey(i), retries, rng.Float64)
			}
		})
	}
	wg.Wait()
	sending.Store(false)
	return out
}

func chaosKey(i int) string { return fmt.Sprintf("chaos/%d", i) }

// listedEmail is an email as GET /emails lists it.
type listedEmail struct {
	ID         string `json:"id"`
	Subject    string `json:"subject"`
	LastEvent  string `json:"last_event"`
	Recipients []struct {
		Email  string `json:"email"`
		Status string `json:"status"`
	} `json:"recipients"`
}

// listEmails pages through GET /emails; each page is retried on failures
// that allow it until ctx ends.
func (c *chaosClient) listEmails(ctx context.Context) ([]listedEmail, error) {
	var all []listedEmail
	after := ""
	for {
		path := "/emails?limit=100"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		var page struct {
			HasMore bool          `json:"has_more"`
			Data    []listedEmail `json:"data"`
		}
		if err := c.getRetrying(ctx, path, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return all, nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

// getRetrying GETs path into v, retrying as sendKeyed does until ctx ends.
func (c *chaosClient) getRetrying(ctx context.Context, path string, v any) error {
	backoff := chaosBackoff
	for {
		a, err := c.do(ctx, http.MethodGet, path, nil, nil)
		if err == nil && a.status == http.StatusOK {
			if err := json.Unmarshal(a.body, v); err != nil {
				return fmt.Errorf("decoding GET %s: %w", path, err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if retryClass(a, err) == "" {
			return fmt.Errorf("GET %s: status %d: %.200s", path, a.status, a.body)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, chaosMaxBackoff)
	}
}
