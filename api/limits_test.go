package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/store"
)

func requireRateHeaders(t *testing.T, r resp, limit, remaining int) {
	t.Helper()
	require.Equal(t, fmt.Sprintf(`"default";q=%d;w=1`, limit), r.header.Get("RateLimit-Policy"), string(r.raw))
	require.Regexp(t, fmt.Sprintf(`^"default";r=%d;t=[01]$`, remaining), r.header.Get("RateLimit"))
	require.Equal(t, strconv.Itoa(limit), r.header.Get("RateLimit-Limit"))
	require.Equal(t, strconv.Itoa(remaining), r.header.Get("RateLimit-Remaining"))
	require.Regexp(t, `^[01]$`, r.header.Get("RateLimit-Reset"))
}

func TestRateLimitPerTeamWithHeadersOnEveryResponse(t *testing.T) {
	e := newEnvWith(t, envOptions{rate: 3})
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

	// The bucket refills at 3 per second.
	time.Sleep(time.Second)
	requireRateHeaders(t, e.do("GET", "/emails", e.keyA, nil), 3, 2)

	// A team's own limit replaces the default (the key cache keeps the
	// old value for up to its 1 s TTL).
	require.NoError(t, e.store.SetRateLimit(context.Background(), e.teamB, 5))
	time.Sleep(1100 * time.Millisecond)
	requireRateHeaders(t, e.do("GET", "/emails", e.keyB, nil), 5, 4)
}

func TestRateLimitUnauthenticatedPerClientAddress(t *testing.T) {
	e := newEnvWith(t, envOptions{rate: 2})
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
	e := newEnvWith(t, envOptions{rate: 4})
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

// startRedis runs a private redis-server on a free loopback port.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server is needed: apt-get install redis-server (scripts/setup.sh installs it)")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	require.Eventually(t, func() bool { return rdb.Ping(context.Background()).Err() == nil },
		10*time.Second, 20*time.Millisecond, "redis-server did not start")
	return url
}

// TestRedisSharesOneLimitBetweenServers runs two API servers on one
// database and one Redis: together they allow the team's limit, not twice it.
func TestRedisSharesOneLimitBetweenServers(t *testing.T) {
	url := startRedis(t)
	newLimiter := func() *ratelimit.Redis {
		l, closeFn, err := ratelimit.NewRedis(url, nil)
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
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 3 * rate {
		srv := one
		if i%2 == 1 {
			srv = two
		}
		wg.Go(func() {
			r := srv.do("GET", "/emails", one.keyA, nil)
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// One shared bucket allows the burst plus what refilled meanwhile;
	// two separate buckets would allow twice the burst.
	bound := rate + int(elapsed.Seconds()*rate) + 1
	require.Less(t, bound, 2*rate, "the requests took %v, too long to tell one bucket from two", elapsed)
	require.GreaterOrEqual(t, codes[200], rate, "%v", codes)
	require.LessOrEqual(t, codes[200], bound, "%v in %v", codes, elapsed)
	require.Equal(t, 3*rate, codes[200]+codes[429], "%v", codes)
	r := two.do("GET", "/emails", one.keyA, nil)
	for r.status == 200 { // drain what refilled since
		r = two.do("GET", "/emails", one.keyA, nil)
	}
	requireError(t, r, 429, "rate_limit_exceeded")
	require.Equal(t, "20", r.header.Get("RateLimit-Limit"))
	require.Equal(t, "0", r.header.Get("RateLimit-Remaining"))
	require.Equal(t, "1", r.header.Get("Retry-After"))
}

// TestQuotaIsExactUnderConcurrency fills a team's free quota (3,000) to
// ten short of it, then sends 50 single-recipient emails in parallel:
// exactly ten are accepted, the others are refused, and the usage ends at
// the quota, never past it.
func TestQuotaIsExactUnderConcurrency(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bulk := make([]string, 2990)
	for i := range bulk {
		bulk[i] = fmt.Sprintf("delivered+%d@posthaste.test", i)
	}
	used, err := e.store.InsertEmail(ctx, bulkEmail(e.teamA, bulk))
	require.NoError(t, err)
	require.EqualValues(t, 2990, used)

	var mu sync.Mutex
	codes := map[int]int{}
	var maxHeader int
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r := e.do("POST", "/emails", e.keyA, sandboxSend)
			h, _ := strconv.Atoi(r.header.Get("X-Posthaste-Monthly-Quota"))
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			maxHeader = max(maxHeader, h)
			if r.status == 429 {
				require.Equal(t, "monthly_quota_exceeded", r.body["name"], string(r.raw))
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{200: 10, 429: 40}, codes)
	require.Equal(t, 3000, maxHeader)
	used, err = e.store.QuotaUsed(ctx, e.teamA, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 3000, used)
	l := e.do("GET", "/emails?limit=100", e.keyA, nil)
	require.Len(t, l.body["data"], 11, "refused emails were not stored")

	// Every recipient counts once: to, cc and bcc; a rejected request
	// counts nothing and still reports the usage.
	require.NoError(t, e.store.SetPlan(ctx, e.teamA, "50k"))
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
