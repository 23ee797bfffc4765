package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/smtp"
	"net/textproto"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMXSinkDefersThenCounts drives an mxSink over loopback with net/smtp:
// RCPTs are answered 451 4.7.1 for the deferral period after the first
// one, then every message is counted once per recipient, by email id and
// by idempotency key; one without our headers is counted as unknown.
func TestMXSinkDefersThenCounts(t *testing.T) {
	counts := newMXCounts()
	sink, err := startMXSink("mx.b.test", "127.0.0.1:0", time.Minute, counts)
	require.NoError(t, err)
	defer sink.close()
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sink.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	const id = "0190f3c8-7d4e-7c1a-9e2b-3f4a5b6c7d8e"
	msg := "Message-ID: <" + id + "@sender.test>\r\nX-Chaos-Key: chaos/7\r\nSubject: chaos/7\r\n\r\nbody\r\n"
	send := func(body string, rcpts ...string) error {
		c, err := smtp.Dial(sink.ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Mail("bounces@send.sender.test"))
		for _, r := range rcpts {
			if err := c.Rcpt(r); err != nil {
				return err
			}
		}
		w, err := c.Data()
		require.NoError(t, err)
		_, err = io.WriteString(w, body)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		return c.Quit()
	}

	err = send(msg, "chaos@b.test")
	var te *textproto.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, 451, te.Code)
	require.Contains(t, te.Msg, "4.7.1")
	advance(59 * time.Second)
	require.Error(t, send(msg, "chaos@b.test"), "still inside the first minute")
	require.Equal(t, 2, sink.deferredRcpts())

	advance(time.Second)
	require.NoError(t, send(msg, "Chaos@B.test", "other@b.test"))
	require.NoError(t, send(msg, "chaos@b.test"))
	require.NoError(t, send("Subject: not ours\r\n\r\nx\r\n", "chaos@b.test"))
	got := counts.snapshot()
	require.Equal(t, map[string]int{id + " chaos@b.test": 2, id + " other@b.test": 1}, got.byID)
	require.Equal(t, map[string]int{"chaos/7 chaos@b.test": 2, "chaos/7 other@b.test": 1}, got.byKey)
	mu.Lock()
	arrived := now // the injected clock, a minute after the first RCPT
	mu.Unlock()
	require.Equal(t, []time.Time{arrived, arrived}, got.at["chaos/7 chaos@b.test"])
	require.Equal(t, map[string]int{"mx.b.test": 3}, got.messages)
	require.Equal(t, 1, got.unknown)
	require.Equal(t, 2, sink.deferredRcpts(), "no RCPT is deferred after the period")
}

func TestChaosHeaders(t *testing.T) {
	for _, tc := range []struct{ msg, id, key string }{
		{"Message-ID: <abc@x.test>\r\nX-Chaos-Key: chaos/1\r\n\r\nbody", "abc", "chaos/1"},
		{"message-id:   <abc@x.test>  \r\nx-chaos-key: chaos/2\r\n\r\n", "abc", "chaos/2"},
		{"Subject: no id\r\n\r\nMessage-ID: <in@body.test>\r\n", "", ""},
		{"Message-ID: abc@x.test\r\n\r\n", "", ""},
		{"", "", ""},
	} {
		id, key := chaosHeaders([]byte(tc.msg))
		require.Equal(t, tc.id, id, tc.msg)
		require.Equal(t, tc.key, key, tc.msg)
	}
}

func TestRetryClass(t *testing.T) {
	for _, tc := range []struct {
		a    apiAnswer
		err  error
		want string
	}{
		{err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED), want: "connection refused"},
		{err: fmt.Errorf("read: %w", syscall.ECONNRESET), want: "connection reset"},
		{err: io.EOF, want: "connection reset"},
		{err: &net.OpError{Op: "read", Err: timeoutError{}}, want: "timeout"},
		{err: errors.New("something else"), want: "no answer"},
		{a: apiAnswer{status: 503, name: "service_unavailable"}, want: "503 service_unavailable"},
		{a: apiAnswer{status: 500, name: "application_error"}, want: "500 application_error"},
		{a: apiAnswer{status: 409, name: "concurrent_idempotent_requests"}, want: "409 concurrent_idempotent_requests"},
		{a: apiAnswer{status: 429, name: "rate_limit_exceeded"}, want: "429 rate_limit_exceeded"},
		// A retry cannot fix these.
		{a: apiAnswer{status: 429, name: "monthly_quota_exceeded"}},
		{a: apiAnswer{status: 409, name: "invalid_idempotent_request"}},
		{a: apiAnswer{status: 422, name: "validation_error"}},
		{a: apiAnswer{status: 403, name: "validation_error"}},
	} {
		require.Equal(t, tc.want, retryClass(tc.a, tc.err), "%+v %v", tc.a, tc.err)
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestTallyChaos checks the verdict: which emails count as lost, which
// recipients as duplicated, and what the clients' waits were.
func TestTallyChaos(t *testing.T) {
	type rcpt = struct {
		Email  string `json:"email"`
		Status string `json:"status"`
	}
	email := func(id, key string, a, b string) listedEmail {
		return listedEmail{ID: id, Subject: key, Recipients: []rcpt{{chaosRcptA, a}, {chaosRcptB, b}}}
	}
	sends := []keyedSend{
		{key: "chaos/0", id: "e0", attempts: 1},                        // delivered once to each
		{key: "chaos/1", id: "e1", attempts: 3, wait: 2 * time.Second}, // b.test got it twice
		{key: "chaos/2", id: "e2", attempts: 2, wait: time.Second},     // b.test still waiting
		{key: "chaos/3", id: "e3", attempts: 1},                        // delivered, never at a.test
		{key: "chaos/4", id: "e4", attempts: 1},                        // not listed at all
		{key: "chaos/5", attempts: 4, err: "status 422: bad"},          // never accepted
		{key: "chaos/6", id: "e6", attempts: 1},                        // a second email e6b for the key reached a.test
		{key: "chaos/7", id: "e7", attempts: 1},                        // bounced at b.test, which had it anyway
	}
	listed := []listedEmail{
		email("e0", "chaos/0", "delivered", "delivered"),
		email("e1", "chaos/1", "delivered", "delivered"),
		email("e2", "chaos/2", "delivered", "delivery_delayed"),
		email("e3", "chaos/3", "delivered", "delivered"),
		email("e6", "chaos/6", "delivered", "delivered"),
		email("e6b", "chaos/6", "delivered", "delivered"),
		email("e7", "chaos/7", "delivered", "bounced"),
	}
	mx := newMXCounts()
	for _, m := range []struct {
		mx, id, key, rcpt string
	}{
		{"mx.a.test", "e0", "chaos/0", chaosRcptA}, {"mx.b.test", "e0", "chaos/0", chaosRcptB},
		{"mx.a.test", "e1", "chaos/1", chaosRcptA}, {"mx.b.test", "e1", "chaos/1", chaosRcptB},
		{"mx.b.test", "e1", "chaos/1", chaosRcptB},
		{"mx.a.test", "e2", "chaos/2", chaosRcptA},
		{"mx.b.test", "e3", "chaos/3", chaosRcptB},
		{"mx.a.test", "e6", "chaos/6", chaosRcptA}, {"mx.b.test", "e6", "chaos/6", chaosRcptB},
		{"mx.a.test", "e6b", "chaos/6", chaosRcptA},
		{"mx.a.test", "e7", "chaos/7", chaosRcptA}, {"mx.b.test", "e7", "chaos/7", chaosRcptB},
		{"mx.a.test", "", "", chaosRcptA},
	} {
		mx.record(m.mx, m.id, m.key, []string{m.rcpt}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	}

	got := tallyChaos(sends, listed, mx.snapshot())
	require.Equal(t, 7, got.accepted)
	require.Equal(t, 1, got.notAccepted)
	require.Equal(t, map[string]int{"status 422: bad": 1}, got.notAccErrs)
	require.Equal(t, 3, got.lost)
	require.Equal(t, 1, got.lostNotStored, "e4")
	require.Equal(t, 1, got.lostNoOutcome, "e2")
	require.Equal(t, 1, got.lostNotAtMX, "e3")
	require.Equal(t, 2, got.duplicated, "e1 at b.test, chaos/6 at a.test")
	require.Equal(t, 2, got.extraCopies)
	require.Equal(t, 1, got.keysTwice, "chaos/6")
	require.Equal(t, map[string]int{"bounced": 1}, got.notDelivered)
	require.Equal(t, 1, got.atMXButNot, "e7 at b.test")
	require.Equal(t, 1, got.unknownAtMX)
	require.Equal(t, 2, got.retriedEmails)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, got.waits)
	require.Equal(t, 14, got.attempts)
	require.Equal(t, 4, got.maxTries)
	require.Equal(t, map[string]int{"mx.a.test": 7, "mx.b.test": 6}, got.messagesByMX)
	require.ElementsMatch(t, []string{
		"lost: chaos/2, email e2, a recipient without an outcome",
		"lost: chaos/3, email e3, recorded delivered but not at the MX",
		"lost: chaos/4, email e4, not listed by GET /emails",
		"duplicated: chaos/1, email e1, 2 copies to chaos@b.test at 03:04:05.000, 03:04:05.000",
		"duplicated: chaos/6, email e6, 2 copies to chaos@a.test at 03:04:05.000, 03:04:05.000",
	}, got.examples)
	require.Equal(t, "chaos/12", chaosKey(12))
}
