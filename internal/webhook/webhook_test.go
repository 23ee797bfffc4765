package webhook

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resend/resend-go/v3"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

func loopbackClient(timeout time.Duration, now func() time.Time) *Client {
	return NewClient(egress.New(egress.Config{AllowPrivate: true, Timeout: timeout}), ClientConfig{Timeout: timeout, Now: now})
}

// Every signature is checked by three verifiers we did not write: the
// Standard Webhooks reference library, Svix's and resend-go's.
func TestSignaturesVerifyWithIndependentLibraries(t *testing.T) {
	cur, prev := NewSecret(), NewSecret()
	type got struct {
		body []byte
		h    http.Header
	}
	gotc := make(chan got, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotc <- got{b, r.Header.Clone()}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	// The verifiers accept timestamps within 5 minutes of their own (real)
	// clock: the test's clock starts there and moves on by itself.
	clock := clocktest.New(time.Now())
	c := loopbackClient(5*time.Second, clock.Now)
	body := []byte(`{"type":"email.sent","created_at":"2026-01-01T00:00:00.000000Z","data":{"email_id":"x"}}`)

	var stamps []string
	for i := 0; i < 2; i++ {
		a := c.Post(t.Context(), srv.URL, "msg_1", body, [][]byte{cur, prev})
		require.True(t, a.OK(), a.Err)
		g := <-gotc
		require.Equal(t, body, g.body)
		require.Equal(t, "msg_1", g.h.Get("webhook-id"))
		for _, p := range []string{"id", "timestamp", "signature"} {
			require.Equal(t, g.h.Get("webhook-"+p), g.h.Get("svix-"+p))
		}
		stamps = append(stamps, g.h.Get("webhook-timestamp"))
		for _, key := range [][]byte{cur, prev} { // both sign during a rotation
			secret := FormatSecret(key)
			sw, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			require.NoError(t, sw.Verify(g.body, g.h), "standard-webhooks")
			sv, err := svix.NewWebhook(secret)
			require.NoError(t, err)
			require.NoError(t, sv.Verify(g.body, g.h), "svix")
			require.NoError(t, resend.NewClient("re_x").Webhooks.Verify(&resend.VerifyWebhookOptions{
				Payload: string(g.body), WebhookSecret: secret,
				Headers: resend.WebhookHeaders{Id: g.h.Get("svix-id"), Timestamp: g.h.Get("svix-timestamp"),
					Signature: g.h.Get("svix-signature")},
			}), "resend-go")
		}
		sw, err := standardwebhooks.NewWebhook(FormatSecret(NewSecret()))
		require.NoError(t, err)
		require.Error(t, sw.Verify(g.body, g.h), "a stranger's secret must not verify")
		clock.Advance(time.Second) // timestamps are whole seconds
	}
	require.NotEqual(t, stamps[0], stamps[1], "every attempt is signed anew with its own timestamp")
}

func TestPostOutcomes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/gone", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, strings.Repeat("x", 5000))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	hang := make(chan struct{})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(hang)
	c := loopbackClient(500*time.Millisecond, nil)
	key := [][]byte{NewSecret()}

	a := c.Post(t.Context(), srv.URL+"/gone", "msg_1", []byte(`{}`), key)
	require.True(t, a.Gone())
	require.False(t, a.OK())

	a = c.Post(t.Context(), srv.URL+"/busy", "msg_1", []byte(`{}`), key)
	require.Equal(t, 429, a.Status)
	require.Equal(t, 7*time.Second, a.RetryAfter)
	require.Len(t, a.Body, 2048, "the first 2 KB of the body are kept")

	a = c.Post(t.Context(), srv.URL+"/redirect", "msg_1", []byte(`{}`), key)
	require.Equal(t, http.StatusFound, a.Status, "redirects are not followed, and 3xx is not success")
	require.False(t, a.OK())

	// Without the timeout, Post would wait until the test ends: wait for
	// it with a deadline instead of timing it.
	hung := make(chan Attempt, 1)
	go func() { hung <- c.Post(t.Context(), srv.URL+"/hang", "msg_1", []byte(`{}`), key) }()
	select {
	case a = <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("Post did not give up on an endpoint that never answers")
	}
	require.Zero(t, a.Status)
	require.Equal(t, "no response within 500ms", a.Err)
	require.GreaterOrEqual(t, a.Duration, 500*time.Millisecond)
}

// A 429 or 503 with an HTTP date in Retry-After waits until that date by
// the client's clock.
func TestRetryAfterDate(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", clock.Now().Add(90*time.Second).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	a := loopbackClient(5*time.Second, clock.Now).Post(t.Context(), srv.URL, "msg_1", []byte(`{}`), [][]byte{NewSecret()})
	require.Equal(t, 503, a.Status)
	require.Equal(t, clock.Now(), a.At)
	require.Equal(t, 90*time.Second, a.RetryAfter)
}

// With private targets refused, the guard refuses before dialing: the
// loopback receiver never sees a request, and nothing leaves the machine.
func TestSSRFRefused(t *testing.T) {
	var hits atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) })
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ln6, err := net.Listen("tcp", "[::1]:"+port)
	var port6 string
	if err == nil {
		s6 := &http.Server{Handler: h}
		go s6.Serve(ln6)
		defer s6.Close()
		_, port6, _ = net.SplitHostPort(ln6.Addr().String())
	} else {
		port6 = port
	}
	c := NewClient(egress.New(egress.Config{Timeout: time.Second}), ClientConfig{Timeout: time.Second})
	for _, u := range []string{
		"https://127.0.0.1:" + port + "/hook",
		"https://10.0.0.1/hook",
		"https://169.254.169.254/latest/meta-data/",
		"https://[::1]:" + port6 + "/hook",
		"http://127.0.0.1:" + port + "/hook",
	} {
		t.Run(u, func(t *testing.T) {
			a := c.Post(t.Context(), u, "msg_1", []byte(`{}`), [][]byte{NewSecret()})
			require.True(t, a.Blocked, a.Err)
			require.Zero(t, a.Status)
			// The guard refuses in the dialer's Control hook, before connect.
			require.Contains(t, a.Err, "refused by the egress guard")
		})
	}
	require.Zero(t, hits.Load())
}

func TestNextAttempt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		a      Attempt
		jitter float64
		want   time.Duration
		retry  bool
	}{
		{"first retry after 5 s, low jitter", 1, Attempt{Status: 500}, 0, 4 * time.Second, true},
		{"first retry, high jitter", 1, Attempt{Status: 500}, 0.5, 5 * time.Second, true},
		{"second after 5 min", 2, Attempt{}, 0.5, 5 * time.Minute, true},
		{"seventh after 10 h", 7, Attempt{}, 0.5, 10 * time.Hour, true},
		{"eighth attempt failed: give up", 8, Attempt{}, 0.5, 0, false},
		{"Retry-After replaces the step", 1, Attempt{Status: 429, RetryAfter: time.Minute}, 0.5, time.Minute, true},
		{"Retry-After is capped", 1, Attempt{Status: 503, RetryAfter: 48 * time.Hour}, 0.5, 24 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, retry := NextAttempt(DefaultSchedule, tc.n, tc.a, tc.jitter)
			require.Equal(t, tc.retry, retry)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, 30*time.Second, parseRetryAfter("30", now))
	require.Equal(t, time.Minute, parseRetryAfter(now.Add(time.Minute).Format(http.TimeFormat), now))
	require.Zero(t, parseRetryAfter("soon", now))
	require.Zero(t, parseRetryAfter("-5", now))
}
