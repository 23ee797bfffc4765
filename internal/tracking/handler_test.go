package tracking

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/gif"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/store"
)

type fakeStore struct {
	mu     sync.Mutex
	rcpt   map[uuid.UUID]store.TrackedRecipient // by email
	team   uuid.UUID
	events []store.Event
}

func (f *fakeStore) TrackedRecipient(_ context.Context, teamID, emailID uuid.UUID, index int) (store.TrackedRecipient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rcpt[emailID]
	if !ok || teamID != f.team || index != 0 {
		return store.TrackedRecipient{}, store.ErrNotFound
	}
	return r, nil
}

func (f *fakeStore) RecordEvents(_ context.Context, _ uuid.UUID, events []store.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, events...)
	return nil
}

func (f *fakeStore) recorded() []store.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.Event(nil), f.events...)
}

type countNotifier struct{ n int }

func (c *countNotifier) Notify() { c.n++ }

func TestHandler(t *testing.T) {
	const chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
	s := testSealer(t, 1)
	team, email, bounced := uuid.New(), uuid.New(), uuid.New()
	delivered := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	now := delivered.Add(time.Hour)
	st := &fakeStore{team: team, rcpt: map[uuid.UUID]store.TrackedRecipient{
		email:   {Address: "ann@rcpt.test", Status: store.EventDelivered, DeliveredAt: delivered},
		bounced: {Address: "bob@rcpt.test", Status: store.EventBounced},
	}}
	outbox := &countNotifier{}
	h, err := NewHandler(Config{Sealer: s, Outbox: outbox, Now: func() time.Time { return now }}, st)
	require.NoError(t, err)
	l := Links{Host: "links.example.test", Sealer: s}
	serve := func(method, u, ua string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, u, nil)
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		h.ServeTracking(w, r, "203.0.113.9")
		return w
	}

	open, err := l.OpenURL(team, email, 0)
	require.NoError(t, err)
	w := serve("GET", open, chrome)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "image/gif", w.Header().Get("Content-Type"))
	require.Contains(t, w.Header().Get("Cache-Control"), "no-store")
	img, err := gif.Decode(bytes.NewReader(w.Body.Bytes()))
	require.NoError(t, err)
	require.Equal(t, 1, img.Bounds().Dx())
	require.Equal(t, 1, img.Bounds().Dy())
	_, _, _, alpha := img.At(0, 0).RGBA()
	require.Zero(t, alpha, "transparent")

	click, err := l.ClickURL(team, email, 0, 3, "https://shop.test/sale?a=1&b=2")
	require.NoError(t, err)
	w = serve("GET", click, chrome)
	require.Equal(t, http.StatusFound, w.Code)
	require.Equal(t, "https://shop.test/sale?a=1&b=2", w.Header().Get("Location"))
	require.Equal(t, "no-referrer", w.Header().Get("Referrer-Policy"))

	w = serve("HEAD", click, chrome)
	require.Equal(t, http.StatusFound, w.Code)

	evs := st.recorded()
	require.Len(t, evs, 3)
	require.Equal(t, store.Event{Type: EventOpened, Recipient: "ann@rcpt.test", CreatedAt: now, Detail: map[string]any{
		"ipAddress": "203.0.113.9", "userAgent": chrome, "timestamp": "2026-11-25T02:00:00.000Z", "machine": false,
	}}, evs[0])
	require.Equal(t, store.Event{Type: EventClicked, Recipient: "ann@rcpt.test", CreatedAt: now, Detail: map[string]any{
		"ipAddress": "203.0.113.9", "userAgent": chrome, "timestamp": "2026-11-25T02:00:00.000Z", "machine": false,
		"link": "https://shop.test/sale?a=1&b=2", "linkIndex": 3,
	}}, evs[1])
	require.Equal(t, EventClicked, evs[2].Type)
	require.Equal(t, true, evs[2].Detail["machine"])
	require.Equal(t, ReasonHead, evs[2].Detail["machineReason"])
	require.Equal(t, 3, outbox.n)

	// Not found: tampered, cut, of the other kind, too long, no token.
	tampered := []byte(click)
	i := len(tampered) - 5
	if tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	openTok := strings.TrimPrefix(open, "https://links.example.test"+OpenPath)
	for name, u := range map[string]string{
		"tampered":      string(tampered),
		"cut":           click[:len(click)-3],
		"open as click": "https://links.example.test" + ClickPath + openTok,
		"click as open": strings.Replace(click, ClickPath, OpenPath, 1),
		"too long":      "https://links.example.test" + ClickPath + strings.Repeat("A", MaxTokenLength+1),
		"empty":         "https://links.example.test" + ClickPath,
		"other path":    "https://links.example.test/x/" + openTok,
		"nested":        open + "/x",
	} {
		w := serve("GET", u, chrome)
		require.Equal(t, http.StatusNotFound, w.Code, name)
		require.Empty(t, w.Header().Get("Location"), name)
	}
	require.Equal(t, http.StatusMethodNotAllowed, serve("POST", click, chrome).Code)
	require.Len(t, st.recorded(), 3, "nothing recorded for refused requests")

	// A bounced recipient's hits and a deleted email's are served, not
	// recorded.
	bouncedClick, err := l.ClickURL(team, bounced, 0, 0, "https://shop.test/")
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, serve("GET", bouncedClick, chrome).Code)
	goneOpen, err := l.OpenURL(team, uuid.New(), 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, serve("GET", goneOpen, chrome).Code)
	otherTeam, err := l.OpenURL(uuid.New(), email, 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, serve("GET", otherTeam, chrome).Code)
	require.Len(t, st.recorded(), 3)
}

func TestHandlerRateLimit(t *testing.T) {
	s := testSealer(t, 1)
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	lim := ratelimit.NewLocal(ratelimit.LocalConfig{Now: func() time.Time { return at }})
	h, err := NewHandler(Config{Sealer: s, Limiter: lim, Rate: 2}, &fakeStore{})
	require.NoError(t, err)
	open, err := Links{Host: "t.test", Sealer: s}.OpenURL(uuid.New(), uuid.New(), 0)
	require.NoError(t, err)
	codes := map[int]int{}
	for range 5 {
		w := httptest.NewRecorder()
		h.ServeTracking(w, httptest.NewRequest("GET", open, nil), "198.51.100.1")
		codes[w.Code]++
	}
	require.Equal(t, 2, codes[http.StatusOK])
	require.Equal(t, 3, codes[http.StatusTooManyRequests])
	w := httptest.NewRecorder()
	h.ServeTracking(w, httptest.NewRequest("GET", open, nil), "198.51.100.2")
	require.Equal(t, http.StatusOK, w.Code, "another client has its own budget")
}

// hostLookup is a KnownHost that counts its calls: each one stands for a
// database query.
type hostLookup struct {
	mu    sync.Mutex
	known map[string]bool
	err   error
	asked []string
}

func (l *hostLookup) KnownHost(_ context.Context, host string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, host)
	return l.known[host], l.err
}

func (l *hostLookup) calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.asked...)
}

// TestHandlerKnownHost checks that the host is looked up only for requests
// that passed the rate limit and carry a valid token, so that made-up
// Hosts and tokens cost an anonymous client's victim no query, and that
// only tracking hosts are served.
func TestHandlerKnownHost(t *testing.T) {
	s := testSealer(t, 1)
	team, email := uuid.New(), uuid.New()
	st := &fakeStore{team: team, rcpt: map[uuid.UUID]store.TrackedRecipient{
		email: {Address: "ann@rcpt.test", Status: store.EventDelivered},
	}}
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	lim := ratelimit.NewLocal(ratelimit.LocalConfig{Now: func() time.Time { return at }})
	hosts := &hostLookup{known: map[string]bool{"links.example.test": true}}
	h, err := NewHandler(Config{Sealer: s, Limiter: lim, Rate: 100, KnownHost: hosts.KnownHost}, st)
	require.NoError(t, err)
	l := Links{Host: "links.example.test", Sealer: s}
	open, err := l.OpenURL(team, email, 0)
	require.NoError(t, err)
	click, err := l.ClickURL(team, email, 0, 0, "https://shop.test/")
	require.NoError(t, err)
	serve := func(u, host, client string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", u, nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeTracking(w, r, client)
		return w
	}

	// Invalid tokens on unknown hosts: 404 without a lookup.
	for i := range 20 {
		w := serve(ClickPath+"not-a-token", fmt.Sprintf("random-%d.example", i), "198.51.100.1")
		require.Equal(t, http.StatusNotFound, w.Code)
	}
	w := serve(strings.Replace(click, ClickPath, OpenPath, 1), "other.example", "198.51.100.1")
	require.Equal(t, http.StatusNotFound, w.Code, "a token of the other kind")
	require.Empty(t, hosts.calls(), "no lookup for an invalid token")

	// A valid token on an unknown host: 404, one lookup of the normalised
	// host, nothing recorded.
	w = serve(click, "Links.Other.TEST.:8443", "198.51.100.1")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Empty(t, w.Header().Get("Location"))
	require.Equal(t, []string{"links.other.test"}, hosts.calls())
	require.Empty(t, st.recorded())

	// A valid token on a known host (any case, port or trailing dot):
	// served and recorded.
	w = serve(open, "LINKS.example.test.", "198.51.100.1")
	require.Equal(t, http.StatusOK, w.Code)
	w = serve(click, "links.example.test:443", "198.51.100.1")
	require.Equal(t, http.StatusFound, w.Code)
	require.Equal(t, "https://shop.test/", w.Header().Get("Location"))
	evs := st.recorded()
	require.Len(t, evs, 2)
	require.Equal(t, EventOpened, evs[0].Type)
	require.Equal(t, EventClicked, evs[1].Type)
	require.Equal(t, []string{"links.other.test", "links.example.test", "links.example.test"}, hosts.calls())

	// A rate-limited client makes no lookup, whatever its token and host.
	asked := len(hosts.calls())
	codes := map[int]int{}
	for i := range 150 {
		codes[serve(click, fmt.Sprintf("random-%d.example", i), "198.51.100.2").Code]++
	}
	require.Equal(t, 100, codes[http.StatusNotFound], "within the budget: unknown hosts")
	require.Equal(t, 50, codes[http.StatusTooManyRequests])
	require.Len(t, hosts.calls(), asked+100, "no lookup once limited")
}

// TestHandlerKnownHostFailsOpen checks that a failed host lookup serves the
// pixel and the link all the same: the links in delivered mail must keep
// working while the database is unwell.
func TestHandlerKnownHostFailsOpen(t *testing.T) {
	s := testSealer(t, 1)
	team, email := uuid.New(), uuid.New()
	st := &fakeStore{team: team, rcpt: map[uuid.UUID]store.TrackedRecipient{
		email: {Address: "ann@rcpt.test", Status: store.EventDelivered},
	}}
	hosts := &hostLookup{err: errors.New("database unavailable")}
	h, err := NewHandler(Config{Sealer: s, KnownHost: hosts.KnownHost}, st)
	require.NoError(t, err)
	click, err := Links{Host: "links.example.test", Sealer: s}.ClickURL(team, email, 0, 0, "https://shop.test/")
	require.NoError(t, err)
	w := httptest.NewRecorder()
	h.ServeTracking(w, httptest.NewRequest("GET", click, nil), "198.51.100.1")
	require.Equal(t, http.StatusFound, w.Code)
	require.Equal(t, "https://shop.test/", w.Header().Get("Location"))
	require.Len(t, hosts.calls(), 1)
}

func TestNormalizeHost(t *testing.T) {
	for in, want := range map[string]string{
		"links.example.test":      "links.example.test",
		"Links.Example.TEST":      "links.example.test",
		"links.example.test.":     "links.example.test",
		"links.example.test:8443": "links.example.test",
		"LINKS.example.test.:80":  "links.example.test",
		"localhost:8080":          "localhost",
		"127.0.0.1:8080":          "127.0.0.1",
		"[::1]:8080":              "::1",
		"[::1]":                   "::1",
		"under_score.test":        "under_score.test",
		"":                        "",
		":80":                     "",
		".":                       "",
		"a b.test":                "",
		"a/b.test":                "",
		"a%2f.test":               "",
		"é.test":                  "",
		strings.Repeat("a", 254):  "",
	} {
		got, ok := NormalizeHost(in)
		require.Equal(t, want, got, in)
		require.Equal(t, want != "", ok, in)
	}
	got, ok := NormalizeHost(strings.Repeat("a", 253))
	require.True(t, ok)
	require.Len(t, got, 253)
}
