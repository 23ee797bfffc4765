// Package client is the Go client of Posthaste's HTTP API (the contract
// of API.md, which follows Resend's API v1): emails (send, batch, get,
// list, reschedule, cancel), domains and API keys.
//
// Every call takes a context and returns either its result or an error;
// errors the API answered with are *Error, carrying the API error name,
// the HTTP status and the rate-limit headers:
//
//	c, err := client.New(client.Config{BaseURL: "http://localhost:3000", APIKey: key})
//	res, err := c.Emails.Send(ctx, &client.SendEmailRequest{...}, &client.SendOptions{IdempotencyKey: "welcome/42"})
//	var apiErr *client.Error
//	if errors.As(err, &apiErr) && apiErr.Name == client.ErrConcurrentIdempotentRequests { ... retry later ... }
//
// A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Version is sent in the User-Agent header.
const Version = "0.1.0"

// Config configures a Client.
type Config struct {
	// BaseURL is the API's root, such as "http://localhost:3000".
	BaseURL string
	// APIKey is sent as a bearer token.
	APIKey string
	// HTTPClient sends the requests; nil means a client with a 60 s timeout.
	HTTPClient *http.Client
	// UserAgent replaces the default "posthaste-go/<Version>".
	UserAgent string
}

// Client talks to one Posthaste API with one key.
type Client struct {
	base      *url.URL
	key       string
	http      *http.Client
	userAgent string

	Emails  *EmailsService
	Domains *DomainsService
	APIKeys *APIKeysService
}

// New returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("client: BaseURL is required")
	}
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	c := &Client{base: u, key: cfg.APIKey, http: cfg.HTTPClient, userAgent: cfg.UserAgent}
	if c.http == nil {
		c.http = &http.Client{Timeout: 60 * time.Second}
	}
	if c.userAgent == "" {
		c.userAgent = "posthaste-go/" + Version
	}
	c.Emails = &EmailsService{c: c}
	c.Domains = &DomainsService{c: c}
	c.APIKeys = &APIKeysService{c: c}
	return c, nil
}

// Error names of the API contract.
const (
	ErrMissingAPIKey                = "missing_api_key"
	ErrRestrictedAPIKey             = "restricted_api_key"
	ErrInvalidAPIKey                = "invalid_api_key"
	ErrValidation                   = "validation_error"
	ErrInvalidIdempotencyKey        = "invalid_idempotency_key"
	ErrMissingRequiredField         = "missing_required_field"
	ErrInvalidParameter             = "invalid_parameter"
	ErrInvalidAttachment            = "invalid_attachment"
	ErrNotFound                     = "not_found"
	ErrMethodNotAllowed             = "method_not_allowed"
	ErrInvalidIdempotentRequest     = "invalid_idempotent_request"
	ErrConcurrentIdempotentRequests = "concurrent_idempotent_requests"
	ErrRateLimitExceeded            = "rate_limit_exceeded"
	ErrMonthlyQuotaExceeded         = "monthly_quota_exceeded"
	ErrApplication                  = "application_error"
	ErrServiceUnavailable           = "service_unavailable"
)

// RateLimit is what the rate-limit headers of a response said. Fields
// whose header was absent are zero.
type RateLimit struct {
	Limit      int           // RateLimit-Limit
	Remaining  int           // RateLimit-Remaining
	Reset      time.Duration // RateLimit-Reset
	RetryAfter time.Duration // Retry-After (on 429)
	Policy     string        // RateLimit-Policy, verbatim
}

// Error is an error answer of the API.
type Error struct {
	StatusCode int
	// Name is the API error name, one of the Err constants (or a newer one).
	Name      string
	Message   string
	RateLimit RateLimit
}

func (e *Error) Error() string {
	return fmt.Sprintf("posthaste: %d %s: %s", e.StatusCode, e.Name, e.Message)
}

// Temporary reports whether repeating the same request later may succeed:
// rate limits, requests still in flight and unavailable dependencies.
func (e *Error) Temporary() bool {
	switch e.Name {
	case ErrRateLimitExceeded, ErrConcurrentIdempotentRequests, ErrServiceUnavailable:
		return true
	}
	return false
}

func readRateLimit(h http.Header) RateLimit {
	num := func(k string) int { n, _ := strconv.Atoi(strings.TrimSpace(h.Get(k))); return n }
	return RateLimit{
		Limit:      num("RateLimit-Limit"),
		Remaining:  num("RateLimit-Remaining"),
		Reset:      time.Duration(num("RateLimit-Reset")) * time.Second,
		RetryAfter: time.Duration(num("Retry-After")) * time.Second,
		Policy:     h.Get("RateLimit-Policy"),
	}
}

// do sends one request and decodes a 2xx answer into out (may be nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any,
	headers map[string]string, out any) error {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("posthaste: encoding request: %w", err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return fmt.Errorf("posthaste: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("posthaste: %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("posthaste: reading answer of %s %s: %w", method, path, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		e := &Error{StatusCode: res.StatusCode, RateLimit: readRateLimit(res.Header)}
		var eb struct {
			Message string `json:"message"`
			Name    string `json:"name"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Name != "" {
			e.Name, e.Message = eb.Name, eb.Message
		} else {
			e.Name, e.Message = ErrApplication, strings.TrimSpace(string(raw))
			if e.Message == "" {
				e.Message = http.StatusText(res.StatusCode)
			}
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("posthaste: decoding answer of %s %s: %w", method, path, err)
	}
	return nil
}

// ListOptions select a page of a list. Zero values use the API defaults.
type ListOptions struct {
	Limit  int    // 1..100; 0 → 20
	After  string // an id: items older than it
	Before string // an id: items newer than it
}

func (o *ListOptions) query() url.Values {
	q := url.Values{}
	if o == nil {
		return q
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Before != "" {
		q.Set("before", o.Before)
	}
	return q
}

// List is one page of a list.
type List[T any] struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []T    `json:"data"`
}

// ObjectRef is the answer of updates, verify and cancel.
type ObjectRef struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

// Deleted is the answer of deletes.
type Deleted struct {
	Object  string `json:"object"`
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func escape(id string) string { return url.PathEscape(id) }
