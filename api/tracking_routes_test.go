package api_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
)

// trackingRecorder is a TrackingHandler that records the requests it is
// given.
type trackingRecorder struct {
	mu   sync.Mutex
	hits []string // host + path
}

func (t *trackingRecorder) ServeTracking(w http.ResponseWriter, r *http.Request, _ string) {
	t.mu.Lock()
	t.hits = append(t.hits, r.Host+r.URL.Path)
	t.mu.Unlock()
	w.WriteHeader(http.StatusTeapot)
}

func (t *trackingRecorder) served() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.hits...)
}

// TestTrackingRouting checks that the tracking paths reach the tracking
// handler on any valid Host without the API asking the database which
// hosts are tracking hosts (the handler does, after its rate limit and the
// token: internal/tracking), and that the API's other routes are served as
// before on every host. The server has no store: a query would panic.
func TestTrackingRouting(t *testing.T) {
	t.Parallel()
	rec := &trackingRecorder{}
	h, err := api.New(api.Config{Tracking: rec})
	require.NoError(t, err)
	do := func(method, host, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	for _, tc := range []struct{ host, path string }{
		{"track.posthaste.example", "/o/tok"},
		{"links.customer.test", "/c/tok"},
		{"Random-1.Example:8443", "/o/tok"},
		{"127.0.0.1:8080", "/c/tok"},
	} {
		require.Equal(t, http.StatusTeapot, do("GET", tc.host, tc.path).Code, tc)
	}
	require.Equal(t, http.StatusTeapot, do("HEAD", "links.customer.test", "/o/tok").Code)
	require.Equal(t, []string{"track.posthaste.example/o/tok", "links.customer.test/c/tok",
		"Random-1.Example:8443/o/tok", "127.0.0.1:8080/c/tok", "links.customer.test/o/tok"}, rec.served())

	// A tracking path with more segments, and a Host no host has, are not
	// the handler's.
	w := do("GET", "links.customer.test", "/o/tok/more")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, "Not found.\n", w.Body.String())
	w = do("GET", "a b.test", "/o/tok")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Contains(t, w.Body.String(), `"not_found"`, "the API's answer")
	require.Len(t, rec.served(), 5)

	// The API's routes on a tracking host, and paths that only look like
	// tracking paths, are the API's.
	for _, host := range []string{"track.posthaste.example", "links.customer.test"} {
		w := do("GET", host, "/healthz")
		require.Equal(t, http.StatusOK, w.Code, host)
		require.JSONEq(t, `{"status":"ok"}`, w.Body.String(), host)
		for _, p := range []string{"/o", "/c", "/open/tok", "/nothing"} {
			w := do("GET", host, p)
			require.Equal(t, http.StatusNotFound, w.Code, host+p)
			require.Contains(t, w.Body.String(), `"not_found"`, host+p)
		}
	}
	require.Len(t, rec.served(), 5)

	// Without a tracking handler the tracking paths are the API's.
	h, err = api.New(api.Config{})
	require.NoError(t, err)
	w = do("GET", "track.posthaste.example", "/o/tok")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Contains(t, w.Body.String(), `"not_found"`)
}
