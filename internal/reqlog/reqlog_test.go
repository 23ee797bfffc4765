package reqlog

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func TestBody(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name, in string
		want     *string
	}{
		{"empty", "", nil},
		{"blank", " \n", nil},
		{"text", "{nope", str("{nope")},
		{"secrets", `{"name":"k","password":"p","token":"ph_x","signing_secret":"s","Authorization":"Bearer x","nested":{"api_key":"a"}}`,
			str(`{"Authorization":"[redacted]","name":"k","nested":{"api_key":"[redacted]"},"password":"[redacted]","signing_secret":"[redacted]","token":"[redacted]"}`)},
		{"attachments", `{"attachments":[{"filename":"a","content":"aGk="},{"content":[1,2,3]},{"content":{"type":"Buffer","data":[1,2]}},{"path":"https://x/y"}],"html":"<p>&</p>"}`,
			str(`{"attachments":[{"content":"[elided: 4 characters]","filename":"a"},{"content":"[elided: 3 bytes]"},{"content":"[elided: 2 bytes]"},{"path":"https://x/y"}],"html":"<p>&</p>"}`)},
		{"content outside attachments is kept", `{"content":"x"}`, str(`{"content":"x"}`)},
		{"array", `[{"token":"t"}]`, str(`[{"token":"[redacted]"}]`)},
		{"numbers keep their form", `{"n":12345678901234567890}`, str(`{"n":12345678901234567890}`)},
		{"binary", "\xff\xfe", str("[2 bytes, not UTF-8 text]")},
		{"form with a password", "user=a&password=b", str("[17 bytes that are not JSON and may hold secrets, not logged]")},
		{"truncated JSON with a token", `{"token":"abc`, str("[13 bytes that are not JSON and may hold secrets, not logged]")},
		// Signed download URLs (received emails, attachments, data
		// exports): the signature is redacted, the rest kept.
		{"raw download", `{"raw":{"download_url":"https://api.test/emails/receiving/e1/raw?expires=1700000000&signature=c2lnbmVk&team=t1","expires_at":"x"}}`,
			str(`{"raw":{"download_url":"https://api.test/emails/receiving/e1/raw?expires=1700000000&signature=[redacted]&team=t1","expires_at":"x"}}`)},
		{"attachment downloads", `{"data":[{"download_url":"https://api.test/emails/receiving/e1/attachments/a1/download?expires=1&signature=AAA"},{"download_url":"https://api.test/x?Signature=B#frag"}]}`,
			str(`{"data":[{"download_url":"https://api.test/emails/receiving/e1/attachments/a1/download?expires=1&signature=[redacted]"},{"download_url":"https://api.test/x?Signature=[redacted]#frag"}]}`)},
		{"export download", `{"download_url":"https://api.test/data-requests/d1/download?expires=1&signature=%2Fx%3D&team=t1"}`,
			str(`{"download_url":"https://api.test/data-requests/d1/download?expires=1&signature=[redacted]&team=t1"}`)},
		{"other secret parameters", `{"u":"https://x.test/?a=1&sig=s&api_key=k&access_token=t&key=z&b=2"}`,
			str(`{"u":"https://x.test/?a=1&sig=[redacted]&api_key=[redacted]&access_token=[redacted]&key=[redacted]&b=2"}`)},
		{"URLs without secrets are kept", `{"signature_version":"https://x.test/?a=1&signed=2"}`,
			str(`{"signature_version":"https://x.test/?a=1&signed=2"}`)},
		{"text naming a signature", "download?signature=abc", str("[22 bytes that are not JSON and may hold secrets, not logged]")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Body([]byte(c.in)))
		})
	}
	long := Body([]byte(`{"text":"` + strings.Repeat("é", MaxBody) + `"}`))
	require.LessOrEqual(t, len(*long), MaxBody)
	require.Greater(t, len(*long), MaxBody-2, "cut on a rune boundary")
}

// slowStore blocks writes until released, counting what it wrote.
type slowStore struct {
	release chan struct{}
	mu      sync.Mutex
	written int
}

func (s *slowStore) InsertRequestLogs(_ context.Context, es []store.RequestLog) error {
	<-s.release
	s.mu.Lock()
	s.written += len(es)
	s.mu.Unlock()
	return nil
}

func (s *slowStore) EnsureRequestLogPartitions(context.Context, time.Time, int) error { return nil }

// TestFullBufferDropsWithoutBlocking: with the database stuck, Log keeps
// returning at once and counts what it could not keep; Close writes the rest.
func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	st := &slowStore{release: make(chan struct{})}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	w := New(Config{Buffer: 10, Batch: 5, Interval: time.Millisecond, Dropped: dropped}, st)
	// The store holds every write until released: a Log that waited for
	// the database would never return.
	logged := make(chan int, 1)
	go func() {
		kept := 0
		for range 1000 {
			if w.Log(store.RequestLog{CreatedAt: time.Now()}) {
				kept++
			}
		}
		logged <- kept
	}()
	var kept int
	select {
	case kept = <-logged:
	case <-time.After(30 * time.Second):
		t.Fatal("Log waited for the database")
	}
	require.EqualValues(t, 1000-kept, testutil.ToFloat64(dropped))
	require.Less(t, kept, 100)
	close(st.release)
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, kept, st.written)
	require.False(t, w.Log(store.RequestLog{}), "a closed writer takes nothing")
	require.EqualValues(t, 1000-kept+1, testutil.ToFloat64(dropped))
}
