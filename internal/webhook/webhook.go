// Package webhook implements the sending side of Posthaste's webhooks:
// Standard Webhooks signing (compatible with Svix verifiers), one signed
// POST of a message through the egress guard with its outcome, the retry
// schedule, and the event types with sample payloads for test events; the
// management of a team's endpoints (Endpoints) shared by the HTTP API
// and the dashboard; and the DeliverWebhook workflow's activity
// (Activities), which delivers an endpoint's messages.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// Types are the event types an endpoint may subscribe to (API.md).
// email.opened and email.clicked are emitted once tracking exists.
// contact.topics.updated and topic.* are Posthaste's: Resend documents
// only contact.created, contact.updated and contact.deleted.
var Types = []string{
	"email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.complained",
	"email.opened", "email.clicked", "email.failed", "email.scheduled", "email.suppressed", "email.received",
	"domain.created", "domain.updated", "domain.deleted",
	"contact.created", "contact.updated", "contact.deleted", "contact.topics.updated",
	"topic.created", "topic.updated", "topic.deleted",
	"suppression.added", "suppression.removed",
}

// ValidType reports whether t is one of Types.
func ValidType(t string) bool { return slices.Contains(Types, t) }

// secretPrefix starts every signing secret (Standard Webhooks).
const secretPrefix = "whsec_"

// NewSecret returns a random 24-byte signing key.
func NewSecret() []byte {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// FormatSecret is the form of a key users see: whsec_ + base64.
func FormatSecret(key []byte) string { return secretPrefix + base64.StdEncoding.EncodeToString(key) }

// Sign is the Standard Webhooks signature of one attempt:
// v1,base64(HMAC-SHA256(key, "<id>.<unix timestamp>.<body>")).
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SetHeaders puts the id, timestamp and signatures (one per key, space
// separated) under both the webhook-* and the svix-* names.
func SetHeaders(h http.Header, keys [][]byte, id string, ts time.Time, body []byte) {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, id, ts, body)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	for _, p := range []string{"webhook-", "svix-"} {
		h.Set(p+"id", id)
		h.Set(p+"timestamp", stamp)
		h.Set(p+"signature", strings.Join(sigs, " "))
	}
}

// MessageID is the id of a message as endpoints and the API see it.
func MessageID(id fmt.Stringer) string { return "msg_" + id.String() }

// bodyExcerpt is how much of a response body an attempt keeps.
const bodyExcerpt = 2 << 10

// DefaultTimeout bounds one attempt, body included (API.md).
const DefaultTimeout = 15 * time.Second

// Attempt is the outcome of one POST.
type Attempt struct {
	At         time.Time
	Status     int    // 0 when no response arrived
	Body       string // first 2 KB of the response body, valid UTF-8
	Duration   time.Duration
	Err        string // why it failed without a response, or a refusal
	RetryAfter time.Duration
	Blocked    bool // the egress guard refused the destination
}

// OK reports a 2xx answer, the only success.
func (a Attempt) OK() bool { return a.Status >= 200 && a.Status <= 299 }

// Outcome names the attempt's result for metrics: success, failed
// (another status), no_response or refused.
func (a Attempt) Outcome() string {
	switch {
	case a.OK():
		return "success"
	case a.Blocked:
		return "refused"
	case a.Status == 0:
		return "no_response"
	}
	return "failed"
}

// Gone reports 410, which disables the endpoint.
func (a Attempt) Gone() bool { return a.Status == http.StatusGone }

// Client posts messages. Construct with NewClient.
type Client struct {
	http    *http.Client
	timeout time.Duration
	now     func() time.Time
}

// ClientConfig configures a Client; the zero value is production's.
type ClientConfig struct {
	// Timeout bounds one attempt; 0 means DefaultTimeout.
	Timeout time.Duration
	// Now stamps and signs attempts and reads Retry-After dates; nil
	// means time.Now. Tests pass a settable clock instead of sleeping.
	Now func() time.Time
}

// NewClient returns a Client posting through the egress guard (which does
// not follow redirects).
func NewClient(g *egress.Client, cfg ClientConfig) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{http: g.HTTPClient(), timeout: cfg.Timeout, now: cfg.Now}
}

// Post sends body to endpoint, signed now with every key, and reports the
// outcome. It never returns an error: a failure is an Attempt without a
// status and with Err set.
func (c *Client) Post(ctx context.Context, endpoint, id string, body []byte, keys [][]byte) Attempt {
	start := c.now()
	a := Attempt{At: start}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		a.Err = "invalid endpoint URL"
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Posthaste-Webhooks/1")
	SetHeaders(req.Header, keys, id, start, body)
	resp, err := c.http.Do(req)
	if err != nil {
		a.Duration = c.now().Sub(start)
		a.Err, a.Blocked = describe(err, c.timeout)
		return a
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	excerpt, err := io.ReadAll(io.LimitReader(resp.Body, bodyExcerpt))
	if err == nil {
		// Drain a little more so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	a.Duration = c.now().Sub(start)
	a.Body = strings.ToValidUTF8(string(excerpt), string(utf8.RuneError))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		a.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	}
	if err != nil && !a.OK() {
		a.Err = "reading the response: " + err.Error()
	}
	return a
}

// describe turns a request error into an attempt's error text, without
// the URL (which may carry credentials in its query).
func describe(err error, timeout time.Duration) (string, bool) {
	if errors.Is(err, egress.ErrBlocked) {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "refused by the egress guard: " + err.Error(), true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no response within %s", timeout), false
		}
		err = ue.Err
	}
	return err.Error(), false
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// DefaultSchedule is the delay before each retry (API.md): after the
// first attempt fails, 5 s; then 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; then
// the message fails.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// MaxRetryAfter bounds how long a Retry-After may postpone a retry.
const MaxRetryAfter = 24 * time.Hour

// NextAttempt returns the delay before the next attempt after attempt
// number n (1 for the first) failed with a, or false when the message has
// used every retry. Delays get ±20 % jitter from jitter (in [0, 1), e.g.
// Jitter()); a Retry-After (429, 503) replaces the step, up to
// MaxRetryAfter.
func NextAttempt(schedule []time.Duration, n int, a Attempt, jitter float64) (time.Duration, bool) {
	if n < 1 || n > len(schedule) {
		return 0, false
	}
	d := schedule[n-1]
	d = time.Duration(float64(d) * (0.8 + 0.4*jitter))
	if a.RetryAfter > 0 {
		d = min(a.RetryAfter, MaxRetryAfter)
	}
	return d, true
}

// Jitter is a random number in [0, 1) for NextAttempt.
func Jitter() float64 { return mrand.Float64() }

// Keys opens an endpoint's signing keys with the master key: the current
// one first, then the previous one until its overlap after a rotation ends.
func Keys(box *seal.Box, w store.Webhook, now time.Time) ([][]byte, error) {
	if box == nil {
		return nil, errors.New("no master key (POSTHASTE_MASTER_KEY) to open webhook secrets")
	}
	cur, err := box.Open(w.Secret, w.ID[:])
	if err != nil {
		return nil, fmt.Errorf("opening the secret of webhook %s: %w", w.ID, err)
	}
	keys := [][]byte{cur}
	if w.PreviousSecret != nil && w.PreviousSecretUntil != nil && now.Before(*w.PreviousSecretUntil) {
		prev, err := box.Open(w.PreviousSecret, w.ID[:])
		if err != nil {
			return nil, fmt.Errorf("opening the previous secret of webhook %s: %w", w.ID, err)
		}
		keys = append(keys, prev)
	}
	return keys, nil
}

// AttemptRow is the stored form of an attempt of message msgID.
func AttemptRow(msgID uuid.UUID, at Attempt) (store.WebhookAttempt, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	row := store.WebhookAttempt{ID: id, MessageID: msgID, AttemptedAt: at.At, ResponseBody: at.Body,
		DurationMS: int(at.Duration.Milliseconds()), Error: at.Err}
	if at.Status != 0 {
		s := at.Status
		row.ResponseStatus = &s
	}
	return row, nil
}
