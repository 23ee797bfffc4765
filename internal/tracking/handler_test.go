package tracking

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/gif"
	"net/http"
	"net/http/httptest"
	"slices"
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

// hostLookup is a TeamHost that counts its calls: each one stands for a
// database query.
type hostLookup struct {
	mu    sync.Mutex
	hosts map[uuid.UUID][]string // the tracking hosts of each team
	err   error
	asked []string
}

func (l *hostLookup) TeamHost(_ context.Context, team uuid.UUID, host string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, host)
	return slices.Contains(l.hosts[team], host), l.err
}

func (l *hostLookup) calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.asked...)
}

// TestHandlerKnownHost checks that the host is looked up only for requests
// that passed the rate limit and carry a valid token that may be served on
// the host, so that made-up Hosts and tokens cost an anonymous client's
// victim no query, and that only tracking hosts are served.
func TestHandlerKnownHost(t *testing.T) {
	s := testSealer(t, 1)
	team, email := uuid.New(), uuid.New()
	st := &fakeStore{team: team, rcpt: map[uuid.UUID]store.TrackedRecipient{
		email: {Address: "ann@rcpt.test", Status: store.EventDelivered},
	}}
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	lim := ratelimit.NewLocal(ratelimit.LocalConfig{Now: func() time.Time { return at }})
	hosts := &hostLookup{hosts: map[uuid.UUID][]string{team: {"links.example.test"}}}
	h, err := NewHandler(Config{Sealer: s, Limiter: lim, Rate: 100, TeamHost: hosts.TeamHost}, st)
	require.NoError(t, err)
	l := Links{Host: "links.example.test", Sealer: s}
	open, err := l.OpenURL(team, email, 0)
	require.NoError(t, err)
	click, err := l.ClickURL(team, email, 0, 0, "https://shop.test/")
	require.NoError(t, err)
	// A token of the first format, bound to no host.
	legacy := ClickPath + mustSeal(t, s, Token{Kind: Click, TeamID: team, EmailID: email, URL: "https://shop.test/"})
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

	// A valid token on another host than its own: 404 without a lookup,
	// nothing recorded.
	w = serve(click, "Links.Other.TEST.:8443", "198.51.100.1")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Empty(t, w.Header().Get("Location"))
	require.Empty(t, hosts.calls())
	require.Empty(t, st.recorded())

	// A valid token on its host (any case, port or trailing dot): one
	// lookup of the normalised host, served and recorded.
	w = serve(open, "LINKS.example.test.", "198.51.100.1")
	require.Equal(t, http.StatusOK, w.Code)
	w = serve(click, "links.example.test:443", "198.51.100.1")
	require.Equal(t, http.StatusFound, w.Code)
	require.Equal(t, "https://shop.test/", w.Header().Get("Location"))
	evs := st.recorded()
	require.Len(t, evs, 2)
	require.Equal(t, EventOpened, evs[0].Type)
	require.Equal(t, EventClicked, evs[1].Type)
	require.Equal(t, []string{"links.example.test", "links.example.test"}, hosts.calls())

	// A rate-limited client makes no lookup, whatever its token and host.
	asked := len(hosts.calls())
	codes := map[int]int{}
	for i := range 150 {
		codes[serve(legacy, fmt.Sprintf("random-%d.example", i), "198.51.100.2").Code]++
	}
	require.Equal(t, 100, codes[http.StatusNotFound], "within the budget: unknown hosts")
	require.Equal(t, 50, codes[http.StatusTooManyRequests])
	require.Len(t, hosts.calls(), asked+100, "no lookup once limited")
}

// TestHandlerHostBinding checks that a token is served only on the host
// of the domain that issued it, while that is a tracking host of the
// token's team, or on the operator's shared tracking host, and a token of
// the first format only on a tracking host of its team: a token of team A
// requested with the Host of team B's tracking host is 404, not a redirect
// under B's domain.
func TestHandlerHostBinding(t *testing.T) {
	const (
		hostA  = "links.a.test"
		hostB  = "links.b.test"
		shared = "track.posthaste.test"
	)
	s := testSealer(t, 1)
	teamA, teamB, email := uuid.New(), uuid.New(), uuid.New()
	mint := func(team uuid.UUID, host string) string {
		return ClickPath + mustSeal(t, s, Token{Kind: Click, TeamID: team, EmailID: email,
			URL: "https://shop.test/", Host: host})
	}
	tokA, legacyA := mint(teamA, hostA), mint(teamA, "")
	openA, err := Links{Host: hostA, Sealer: s}.OpenURL(teamA, email, 0)
	require.NoError(t, err)
	lostA := mint(teamA, "links.gone.test") // A's domain was deleted: another team's now

	for _, tc := range []struct {
		name, url, host string
		err             error // of the lookup
		code            int
		lookups         int
	}{
		{"A's token on A's host", tokA, hostA, nil, http.StatusFound, 1},
		{"A's token on B's host", tokA, hostB, nil, http.StatusNotFound, 0},
		{"A's token on the shared host", tokA, shared, nil, http.StatusFound, 0},
		{"A's token on the shared host, any case and port", tokA, "Track.Posthaste.TEST:443", nil, http.StatusFound, 0},
		{"A's token on an unknown host", tokA, "links.c.test", nil, http.StatusNotFound, 0},
		{"A's pixel on A's host", openA, hostA, nil, http.StatusOK, 1},
		{"A's pixel on B's host", openA, hostB, nil, http.StatusNotFound, 0},
		{"A's token on a host no longer A's", lostA, "links.gone.test", nil, http.StatusNotFound, 1},
		{"A's token on its host, lookup failed", tokA, hostA, errors.New("database down"), http.StatusFound, 1},
		{"A's token on B's host, lookup failed", tokA, hostB, errors.New("database down"), http.StatusNotFound, 0},
		{"A's first-format token on A's host", legacyA, hostA, nil, http.StatusFound, 1},
		{"A's first-format token on B's host", legacyA, hostB, nil, http.StatusNotFound, 1},
		{"A's first-format token on the shared host", legacyA, shared, nil, http.StatusNotFound, 1},
		{"A's first-format token, lookup failed", legacyA, hostB, errors.New("database down"),
			http.StatusServiceUnavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts := &hostLookup{err: tc.err, hosts: map[uuid.UUID][]string{teamA: {hostA}, teamB: {hostB, "links.gone.test"}}}
			h, err := NewHandler(Config{Sealer: s, SharedHost: shared, TeamHost: hosts.TeamHost}, &fakeStore{})
			require.NoError(t, err)
			r := httptest.NewRequest("GET", tc.url, nil)
			r.Host = tc.host
			w := httptest.NewRecorder()
			h.ServeTracking(w, r, "198.51.100.1")
			require.Equal(t, tc.code, w.Code)
			if tc.code == http.StatusFound {
				require.Equal(t, "https://shop.test/", w.Header().Get("Location"))
			} else {
				require.Empty(t, w.Header().Get("Location"))
			}
			require.Len(t, hosts.calls(), tc.lookups)
		})
	}
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
