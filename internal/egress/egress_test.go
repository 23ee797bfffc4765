package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

// publicIP stands for a server on the internet. Tests never connect to it:
// dialRecorder routes its connections to a loopback test server.
const publicIP = "93.184.215.14"

// dialRecorder replaces Client.dial: it records every address the guard
// decided to connect to and routes allowed ones to loopback listeners.
type dialRecorder struct {
	mu     sync.Mutex
	dialed []string
	routes map[string]string // checked ip:port → loopback address
}

func (d *dialRecorder) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	target, ok := d.routes[address]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test: no route to %s", address)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, target)
}

func (d *dialRecorder) calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// testEnv is a guarded client whose DNS is a loopback test server and whose
// connections to publicIP:443 reach srv.
type testEnv struct {
	client *Client
	dials  *dialRecorder
	ns     *dnstest.Server
	srv    *httptest.Server
}

func newTestEnv(t *testing.T, h http.Handler) *testEnv {
	t.Helper()
	ns := dnstest.NewServer(t)
	ns.AddA("files.example.com", publicIP)
	ns.AddA("loopback.example.com", "127.0.0.1")
	ns.AddA("v6loopback.example.com", "::1")
	ns.AddA("metadata.example.com", "169.254.169.254")
	ns.AddA("mixed.example.com", publicIP)
	ns.AddA("mixed.example.com", "10.1.2.3")

	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)

	c := New(Config{Resolver: ns.Resolver(), Timeout: 5 * time.Second})
	rec := &dialRecorder{routes: map[string]string{publicIP + ":443": srv.Listener.Addr().String()}}
	c.dial = rec.dial
	// httptest's certificate is valid for *.example.com.
	c.transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	t.Cleanup(c.transport.CloseIdleConnections)
	return &testEnv{client: c, dials: rec, ns: ns, srv: srv}
}

func TestFetchRefusedBeforeDialing(t *testing.T) {
	env := newTestEnv(t, http.NotFoundHandler())
	tests := []struct {
		url string
		msg string
	}{
		{"http://127.0.0.1/", "egress: plain http is not allowed, use https"},
		{"http://files.example.com/a.pdf", "egress: plain http is not allowed, use https"},
		{"ftp://files.example.com/a.pdf", `egress: scheme "ftp" is not allowed`},
		{"file:///etc/passwd", `egress: scheme "file" is not allowed`},
		{"https://127.0.0.1/", "egress: address 127.0.0.1 is not allowed"},
		{"https://127.0.0.1:8443/", "egress: address 127.0.0.1 is not allowed"},
		{"https://10.0.0.1/x.pdf", "egress: address 10.0.0.1 is not allowed"},
		{"https://169.254.169.254/latest/meta-data/", "egress: address 169.254.169.254 is not allowed"},
		{"https://[::1]/", "egress: address ::1 is not allowed"},
		{"https://[::ffff:10.0.0.1]/", "egress: address ::ffff:10.0.0.1 is not allowed"},
		{"https://[64:ff9b::a9fe:a9fe]/", "egress: address 64:ff9b::a9fe:a9fe is not allowed"},
		{"https://[fd00:ec2::254]/", "egress: address fd00:ec2::254 is not allowed"},
		{"https://[fe80::1%25eth0]/", "egress: address fe80::1%eth0 is not allowed"},
		{"https://loopback.example.com/a.pdf", "egress: host loopback.example.com resolves to an address that is not allowed"},
		{"https://v6loopback.example.com/", "egress: host v6loopback.example.com resolves to an address that is not allowed"},
		{"https://metadata.example.com/", "egress: host metadata.example.com resolves to an address that is not allowed"},
		{"https://mixed.example.com/", "egress: host mixed.example.com resolves to an address that is not allowed"},
		{"https://user:secret@10.0.0.1/x?token=abc", "egress: address 10.0.0.1 is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			before := len(env.dials.calls())
			body, _, err := env.client.Fetch(t.Context(), tt.url, 1<<20)
			require.ErrorIs(t, err, ErrBlocked)
			require.Equal(t, tt.msg, err.Error())
			require.Nil(t, body)
			require.Len(t, env.dials.calls(), before, "dialed before refusing")

			// The plain client refuses the same way.
			resp, err := env.client.HTTPClient().Get(tt.url)
			if resp != nil {
				resp.Body.Close()
			}
			require.ErrorIs(t, err, ErrBlocked)
			require.Len(t, env.dials.calls(), before, "dialed before refusing")
		})
	}
	require.Empty(t, env.dials.calls())
}

func TestFetchRefusesRealLoopbackServer(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	defer srv.Close()

	// The real dialer, not the test seam.
	c := New(Config{})
	c.transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	_, _, err := c.Fetch(t.Context(), srv.URL, 1<<20)
	require.ErrorIs(t, err, ErrBlocked)
	require.NotContains(t, err.Error(), "secret")
	resp, err := c.HTTPClient().Get(srv.URL)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, ErrBlocked)
	require.Zero(t, hits.Load())
}

func TestControlChecksTheConnectedAddress(t *testing.T) {
	c := New(Config{})
	for _, addr := range []string{"10.0.0.1:443", "127.0.0.1:80", "[::1]:443", "[::ffff:169.254.169.254]:80", "garbage"} {
		require.ErrorIs(t, c.control("tcp", addr, nil), ErrBlocked, addr)
	}
	require.NoError(t, c.control("tcp4", publicIP+":443", nil))
	require.NoError(t, c.control("tcp6", "[2606:4700:4700::1111]:443", nil))
	require.NoError(t, New(Config{AllowPrivate: true}).control("tcp", "127.0.0.1:80", nil))
}

func TestFetchAllowedHost(t *testing.T) {
	env := newTestEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a.pdf":
			assert.Equal(t, "files.example.com", r.Host) // on the server's goroutine
			w.Header().Set("Content-Type", "application/pdf")
			fmt.Fprint(w, "%PDF-1.7")
		case "/moved":
			http.Redirect(w, r, "/a.pdf", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))

	body, ctype, err := env.client.Fetch(t.Context(), "https://files.example.com/a.pdf", 1<<20)
	require.NoError(t, err)
	require.Equal(t, "%PDF-1.7", string(body))
	require.Equal(t, "application/pdf", ctype)

	body, _, err = env.client.Fetch(t.Context(), "https://files.example.com/moved", 1<<20)
	require.NoError(t, err, "redirects within allowed hosts are followed")
	require.Equal(t, "%PDF-1.7", string(body))

	for _, d := range env.dials.calls() {
		require.Equal(t, publicIP+":443", d, "only the checked address is dialed")
	}
	require.NotEmpty(t, env.dials.calls())
}

func TestRedirectToBlockedAddress(t *testing.T) {
	env := newTestEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "https://10.0.0.1/secret?token=xyz", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "https://169.254.169.254/latest/meta-data/", http.StatusMovedPermanently)
		case "/to-loopback-name":
			http.Redirect(w, r, "https://loopback.example.com/", http.StatusTemporaryRedirect)
		case "/to-http":
			http.Redirect(w, r, "http://files.example.com/a.pdf", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))

	tests := []struct {
		path string
		msg  string
	}{
		{"/to-private", "egress: address 10.0.0.1 is not allowed"},
		{"/to-metadata", "egress: address 169.254.169.254 is not allowed"},
		{"/to-loopback-name", "egress: host loopback.example.com resolves to an address that is not allowed"},
		{"/to-http", "egress: plain http is not allowed, use https"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, _, err := env.client.Fetch(t.Context(), "https://files.example.com"+tt.path, 1<<20)
			require.ErrorIs(t, err, ErrBlocked)
			require.Equal(t, tt.msg, err.Error())
			require.NotContains(t, err.Error(), "token")
		})
	}
	for _, d := range env.dials.calls() {
		require.Equal(t, publicIP+":443", d, "a blocked redirect target was dialed")
	}

	_, _, err := env.client.Fetch(t.Context(), "https://files.example.com/loop", 1<<20)
	require.EqualError(t, err, "egress: GET https://files.example.com/loop: stopped after 5 redirects")

	// The plain client hands the redirect back instead of following it.
	resp, err := env.client.HTTPClient().Get("https://files.example.com/to-private")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "https://10.0.0.1/secret?token=xyz", resp.Header.Get("Location"))
}

func TestFetchAllowPrivate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "hello")
		case "/ten":
			fmt.Fprint(w, "0123456789")
		case "/eleven":
			fmt.Fprint(w, "0123456789A")
		case "/stream":
			// No Content-Length: the limit is enforced while reading.
			for range 100 {
				fmt.Fprint(w, strings.Repeat("x", 1000))
				w.(http.Flusher).Flush()
			}
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/teapot":
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprint(w, "server-side secret")
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "server-side secret")
		}
	}))
	defer srv.Close()

	ns := dnstest.NewServer(t)
	ns.AddA("dev.example.com", "127.0.0.1")
	c := New(Config{AllowPrivate: true, Resolver: ns.Resolver()})
	defer c.transport.CloseIdleConnections()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	tests := []struct {
		url   string
		limit int64
		body  string
		ctype string
		err   string
	}{
		{url: srv.URL + "/ok", limit: 100, body: "hello", ctype: "text/plain; charset=utf-8"},
		{url: "http://dev.example.com:" + port + "/ok", limit: 100, body: "hello", ctype: "text/plain; charset=utf-8"},
		{url: srv.URL + "/redirect", limit: 100, body: "hello", ctype: "text/plain; charset=utf-8"},
		{url: srv.URL + "/ten", limit: 10, body: "0123456789", ctype: "text/plain; charset=utf-8"},
		{url: srv.URL + "/empty", limit: 10, body: ""},
		{url: srv.URL + "/eleven", limit: 10, err: "body is larger than 10 bytes"},
		{url: srv.URL + "/stream", limit: 50_000, err: "body is larger than 50000 bytes"},
		{url: srv.URL + "/missing?key=k", limit: 100, err: "egress: GET " + srv.URL + "/missing: unexpected status 404"},
		{url: srv.URL + "/teapot", limit: 100, err: "unexpected status 418"},
		{url: "http://nowhere.example.com/", limit: 100, err: "egress: resolving nowhere.example.com: no such host"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			body, ctype, err := c.Fetch(t.Context(), tt.url, tt.limit)
			if tt.err != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tt.err)
				require.NotContains(t, err.Error(), "secret")
				require.NotContains(t, err.Error(), "key=k")
				require.False(t, errors.Is(err, ErrBlocked))
				require.Nil(t, body)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.body, string(body))
			require.Equal(t, tt.ctype, ctype)
		})
	}

	_, _, err = c.Fetch(t.Context(), srv.URL+"/ok", 0)
	require.EqualError(t, err, "egress: fetch limit must be positive")
}

func TestFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	c := New(Config{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	defer c.transport.CloseIdleConnections()
	start := time.Now()
	_, _, err := c.Fetch(t.Context(), srv.URL+"/slow", 100)
	require.EqualError(t, err, "egress: GET "+srv.URL+"/slow: timed out")
	require.Less(t, time.Since(start), 3*time.Second)
}

func TestHTTPClientGuardsPOST(t *testing.T) {
	var got atomic.Value
	env := newTestEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	hc := env.client.HTTPClient()
	require.Same(t, hc, env.client.HTTPClient())

	resp, err := hc.Post("https://files.example.com/hook", "application/json", strings.NewReader(`{"type":"email.sent"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, `{"type":"email.sent"}`, got.Load())

	_, err = hc.Post("https://10.0.0.1/hook", "application/json", strings.NewReader(`{}`))
	require.ErrorIs(t, err, ErrBlocked)
	require.Equal(t, []string{publicIP + ":443"}, env.dials.calls())
}

// The guard checks the address it dials, however the name resolves at
// dial time: a name that answers a public address first and loopback later
// is refused on the later connection.
func TestRebindingIsCheckedPerConnection(t *testing.T) {
	env := newTestEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		fmt.Fprint(w, "ok")
	}))
	env.ns.AddA("rebind.example.com", publicIP)

	body, _, err := env.client.Fetch(t.Context(), "https://rebind.example.com/", 100)
	require.NoError(t, err)
	require.Equal(t, "ok", string(body))

	env.ns.Remove("rebind.example.com", dns.TypeA)
	env.ns.AddA("rebind.example.com", "127.0.0.1")
	_, _, err = env.client.Fetch(t.Context(), "https://rebind.example.com/", 100)
	require.ErrorIs(t, err, ErrBlocked)
	require.Equal(t, []string{publicIP + ":443"}, env.dials.calls())
}
