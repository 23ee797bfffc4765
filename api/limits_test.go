package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
	"github.com/posthaste/posthaste/internal/testkit/redistest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func requireRateHeaders(t *testing.T, r resp, limit, remaining int) {
	t.Helper()
	require.Equal(t, fmt.Sprintf(`"default";q=%d;w=1`, limit), r.header.Get("RateLimit-Policy"), string(r.raw))
	require.Regexp(t, fmt.Sprintf(`^"default";r=%d;t=[01]$`, remaining), r.header.Get("RateLimit"))
	require.Equal(t, strconv.Itoa(limit), r.header.Get("RateLimit-Limit"))
	require.Equal(t, strconv.Itoa(remaining), r.header.Get("RateLimit-Remaining"))
	require.Regexp(t, `^[01]$`, r.header.Get("RateLimit-Reset"))
}

// The limiter's clock moves only when the tests move it, so no bucket
// refills while a test runs, however slow the machine.

func TestRateLimitPerTeamWithHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Now())
	// Without the key cache a team's new limit applies at once; the
	// cache's expiry is internal/auth's to test.
	e := newEnvWith(t, envOptions{rate: 3, clock: clock, keyCache: -1})
	// Successes and errors alike carry the headers and count.
	requireRateHeaders(t, e.do("GET", "/emails", e.keyA, nil), 3, 2)
	r := e.do("GET", "/emails/not-a-uuid", e.keyA, nil)
	requireError(t, r, 422, "invalid_parameter")
	requireRateHeaders(t, r, 3, 1)
	r = e.do("GET", "/nope", e.keyA, nil)
	requireError(t, r, 404, "not_found")
	requireRateHeaders(t, r, 3, 0)
	r = e.do("POST", "/emails", e.keyA, sandboxSend)
	requireError(t, r, 429, "rate_limit_exceeded")
	requireRateHeaders(t, r, 3, 0)
	require.Equal(t, "1", r.header.Get("Retry-After"))

	// Team B has its own bucket; probes are not limited.
	require.Equal(t, 200, e.do("GET", "/emails", e.keyB, nil).status)
	for range 5 {
		h := e.do("GET", "/healthz", "", nil)
		require.Equal(t, 200, h.status)
		require.Empty(t, h.header.Get("RateLimit"))
	}

	// The bucket refills at 3 per second: one token every third of a second.
	clock.Advance(400 * time.Millisecond)
	requireRateHeaders(t, e.do("GET", "/emails", e.keyA, nil), 3, 0)
	requireError(t, e.do("GET", "/emails", e.keyA, nil), 429, "rate_limit_exceeded")
	clock.Advance(time.Second)
	requireRateHeaders(t, e.do("GET", "/emails", e.keyA, nil), 3, 2)

	// A team's own limit replaces the default.
	require.NoError(t, e.store.Accounts.SetRateLimit(context.Background(), e.teamB, 5))
	requireRateHeaders(t, e.do("GET", "/emails", e.keyB, nil), 5, 4)
}

func TestRateLimitUnauthenticatedPerClientAddress(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{rate: 2, clock: clocktest.New(time.Now())})
	requireError(t, e.do("GET", "/emails", "", nil), 401, "missing_api_key")
	r := e.do("GET", "/emails", "ph_short", nil)
	requireError(t, r, 403, "invalid_api_key")
	requireRateHeaders(t, r, 2, 0)
	requireError(t, e.do("GET", "/emails", "", nil), 429, "rate_limit_exceeded")
	// The address's bucket is not the team's.
	require.Equal(t, 200, e.do("GET", "/emails", e.keyA, nil).status)
}

// TestResendSDKSeesTheRateLimit drives Resend's own Go SDK against the
// server until it is refused, and checks the SDK's rate-limit error
// carries the values of the headers.
func TestResendSDKSeesTheRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{rate: 4, clock: clocktest.New(time.Now())})
	c := resend.NewCustomClient(http.DefaultClient, e.keyA)
	base, err := c.BaseURL.Parse(e.srv.URL + "/")
	require.NoError(t, err)
	c.BaseURL = base
	var rle *resend.RateLimitError
	sent := 0
	for range 10 {
		_, err := c.Emails.Send(&resend.SendEmailRequest{From: "onboarding@posthaste.test",
			To: []string{"delivered@posthaste.test"}, Subject: "hi", Text: "hello"})
		if err != nil {
			require.True(t, errors.As(err, &rle), "%v", err)
			break
		}
		sent++
	}
	require.Equal(t, 4, sent)
	require.ErrorIs(t, rle, resend.ErrRateLimit)
	require.Equal(t, "4", rle.Limit)
	require.Equal(t, "0", rle.Remaining)
	require.Equal(t, "1", rle.Reset)
	require.Equal(t, "1", rle.RetryAfter)
	require.Contains(t, rle.Message, "Too many requests")
}

// TestRedisSharesOneLimitBetweenServers runs two API servers on one
// database and one Redis: together they allow the team's limit, not twice
// it. The limiters share a clock that stands still, so the bucket cannot
// refill while the requests run: exactly the limit gets through.
func TestRedisSharesOneLimitBetweenServers(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t)
	clock := clocktest.New(time.Now())
	newLimiter := func() *ratelimit.Redis {
		l, closeFn, err := ratelimit.NewRedis(ratelimit.RedisConfig{URL: url, Now: clock.Now, Timeout: time.Minute}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = closeFn() })
		return l
	}
	const rate = 20
	one := newEnvWith(t, envOptions{rate: rate, limiter: newLimiter()})
	two := newEnvWith(t, envOptions{rate: rate, limiter: newLimiter(), store: one.store})
	two.keyA = one.keyA // the same team through both servers

	var mu sync.Mutex
	codes := map[int]int{}
	var errs []error
	var wg sync.WaitGroup
	for i := range 3 * rate {
		srv := one
		if i%2 == 1 {
			srv = two
		}
		wg.Go(func() {
			r, err := srv.try("GET", "/emails", one.keyA, nil, nil)
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			errs = append(errs, err)
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, map[int]int{200: rate, 429: 2 * rate}, codes, "two separate buckets would allow twice the limit")
	r := two.do("GET", "/emails", one.keyA, nil)
	requireError(t, r, 429, "rate_limit_exceeded")
	require.Equal(t, "20", r.header.Get("RateLimit-Limit"))
	require.Equal(t, "0", r.header.Get("RateLimit-Remaining"))
	require.Equal(t, "1", r.header.Get("Retry-After"))

	// A twentieth of a second later, one request more, through either server.
	clock.Advance(time.Second / rate)
	require.Equal(t, 200, one.do("GET", "/emails", one.keyA, nil).status)
	requireError(t, two.do("GET", "/emails", one.keyA, nil), 429, "rate_limit_exceeded")
}

// TestQuotaIsExactUnderConcurrency fills a team's free quota (3,000) to
// ten short of it, then sends 50 single-recipient emails in parallel:
// exactly ten are accepted, the others are refused, and the usage ends at
// the quota, never past it.
func TestQuotaIsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bulk := make([]string, 2990)
	for i := range bulk {
		bulk[i] = fmt.Sprintf("delivered+%d@posthaste.test", i)
	}
	used, err := storetest.InsertEmail(ctx, e.store, bulkEmail(e.teamA, bulk))
	require.NoError(t, err)
	require.EqualValues(t, 2990, used)

	var mu sync.Mutex
	codes := map[int]int{}
	var refusals []any // the error names of the 429s
	var errs []error
	var maxHeader int
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r, err := e.try("POST", "/emails", e.keyA, sandboxSend, nil)
			h, _ := strconv.Atoi(r.header.Get("X-Posthaste-Monthly-Quota"))
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			codes[r.status]++
			maxHeader = max(maxHeader, h)
			if r.status == 429 {
				refusals = append(refusals, r.body["name"])
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, name := range refusals {
		require.Equal(t, "monthly_quota_exceeded", name)
	}
	require.Equal(t, map[int]int{200: 10, 429: 40}, codes)
	require.Equal(t, 3000, maxHeader)
	used, err = e.store.Accounts.QuotaUsed(ctx, e.teamA, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 3000, used)
	l := e.do("GET", "/emails?limit=100", e.keyA, nil)
	require.Len(t, l.body["data"], 11, "refused emails were not stored")

	// Every recipient counts once: to, cc and bcc; a rejected request
	// counts nothing and still reports the usage.
	require.NoError(t, e.store.Accounts.SetPlan(ctx, e.teamA, "50k"))
	three := map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test",
		"cc": "complained@posthaste.test", "bcc": []string{"bounced@posthaste.test", "delivered@posthaste.test"},
		"subject": "s", "text": "t"}
	r := e.do("POST", "/emails", e.keyA, three)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "3003", r.header.Get("X-Posthaste-Monthly-Quota"))
	bad := e.do("POST", "/emails", e.keyA, map[string]any{"from": "onboarding@posthaste.test"})
	requireError(t, bad, 422, "missing_required_field")
	require.Equal(t, "3003", bad.header.Get("X-Posthaste-Monthly-Quota"))
}

func bulkEmail(team uuid.UUID, to []string) store.Email {
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test", FromDomain: "posthaste.test",
		To: to, Subject: "bulk", LastEvent: store.EventQueued, CreatedAt: time.Now()}
	for _, a := range to {
		e.Recipients = append(e.Recipients, store.Recipient{Address: a, Kind: "to", Domain: "posthaste.test", Status: store.EventQueued})
	}
	return e
}
