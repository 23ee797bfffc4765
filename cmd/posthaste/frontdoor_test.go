package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestHTTPServerLimits: every listener has read, write and idle timeouts
// besides the header timeout. A body trickled in, an answer nobody reads
// and an idle keep-alive connection each end when their limit passes.
func TestHTTPServerLimits(t *testing.T) {
	cfg, err := config.Load(func(string) string { return "" })
	require.NoError(t, err)
	srv := newHTTPServer(http.NotFoundHandler(), cfg.HTTP, slog.New(slog.DiscardHandler))
	require.Equal(t, config.ReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, 2*time.Minute, srv.ReadTimeout)
	require.Equal(t, 3*time.Minute, srv.WriteTimeout)
	require.Equal(t, 2*time.Minute, srv.IdleTimeout)

	limits := config.HTTP{ReadTimeout: 300 * time.Millisecond, WriteTimeout: 600 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond}
	handlerErr := make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/upload":
			_, err := io.ReadAll(r.Body)
			handlerErr <- err
		case "/download":
			chunk := make([]byte, 64<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					handlerErr <- err
					return
				}
			}
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	addr, served, err := serveHTTP(ctx, "127.0.0.1:0", h, limits, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); <-served })
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		// A generous bound on every read: the server must act long before.
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		return c
	}
	wantHandlerErr := func(what string) {
		t.Helper()
		select {
		case err := <-handlerErr:
			require.Error(t, err, what)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the server never gave up", what)
		}
	}

	// A body that stops coming: the handler's read fails.
	up := dial()
	_, err = fmt.Fprintf(up, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial")
	require.NoError(t, err)
	wantHandlerErr("a stalled body")

	// An answer the client does not read: the handler's write fails.
	down := dial()
	_, err = fmt.Fprintf(down, "GET /download HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	wantHandlerErr("an unread answer")

	// An idle keep-alive connection: closed by the server.
	idle := dial()
	_, err = fmt.Fprintf(idle, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(idle)
	res, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.Equal(t, 200, res.StatusCode)
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the server closed the idle connection")
}

// TestHTTPSFrontDoorSecureCookiesAndHSTS: with an https public URL the
// real wiring sends HSTS and marks the dashboard's cookies Secure; with an
// http one it does neither.
func TestHTTPSFrontDoorSecureCookiesAndHSTS(t *testing.T) {
	st := storetest.New(t)
	for _, c := range []struct {
		publicURL string
		secure    bool
	}{{"https://mail.example.com", true}, {"http://localhost:3000", false}} {
		cfg, err := config.Load(func(k string) string {
			if k == "POSTHASTE_PUBLIC_URL" {
				return c.publicURL
			}
			return ""
		})
		require.NoError(t, err)
		logger := slog.New(slog.DiscardHandler)
		reg, metrics := newRegistry()
		in, err := newIntake(context.Background(), cfg, st, nil, metrics, logger)
		require.NoError(t, err)
		t.Cleanup(in.close)
		h, err := newFrontDoor(cfg, st, nil, in, nil, nil, reg, metrics, nil, "", logger)
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)

		res, err := http.Get(srv.URL + "/dashboard/login")
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, 200, res.StatusCode)
		require.NotEmpty(t, res.Cookies(), "the sign-in form sets its CSRF cookie")
		for _, ck := range res.Cookies() {
			require.Equal(t, c.secure, ck.Secure, "%s: cookie %s", c.publicURL, ck.Name)
		}
		hsts := res.Header.Get("Strict-Transport-Security")
		if c.secure {
			require.Equal(t, "max-age=31536000", hsts)
		} else {
			require.Empty(t, hsts)
		}
		res, err = http.Get(srv.URL + "/healthz")
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, c.secure, strings.HasPrefix(res.Header.Get("Strict-Transport-Security"), "max-age="))
	}
}

// TestCodecEndpointNeedsItsToken: /temporal-codec/ is off (404) unless
// POSTHASTE_CODEC_TOKEN is set, and then answers only that token; the
// token needs the master key.
func TestCodecEndpointNeedsItsToken(t *testing.T) {
	st := storetest.New(t)
	logger := slog.New(slog.DiscardHandler)
	box, err := seal.New(make([]byte, seal.KeySize))
	require.NoError(t, err)
	for _, token := range []string{"", "tok"} {
		cfg, err := config.Load(func(k string) string {
			if k == "POSTHASTE_CODEC_TOKEN" {
				return token
			}
			return ""
		})
		require.NoError(t, err)
		pc, err := payloadCodec(cfg.Codec, box, st, logger)
		require.NoError(t, err)
		reg, metrics := newRegistry()
		in, err := newIntake(context.Background(), cfg, st, nil, metrics, logger)
		require.NoError(t, err)
		t.Cleanup(in.close)
		h, err := newFrontDoor(cfg, st, nil, in, box, pc, reg, metrics, nil, "", logger)
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		for auth, want := range map[string]int{"": 401, "Bearer nope": 401, "Bearer tok": 200} {
			if token == "" {
				want = 404
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/temporal-codec/decode",
				strings.NewReader(`{"payloads":[]}`))
			require.NoError(t, err)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = res.Body.Close()
			require.Equal(t, want, res.StatusCode, "token %q, auth %q", token, auth)
		}
	}
	cfg, err := config.Load(func(k string) string {
		if k == "POSTHASTE_CODEC_TOKEN" {
			return "tok"
		}
		return ""
	})
	require.NoError(t, err)
	_, err = payloadCodec(cfg.Codec, nil, st, logger)
	require.ErrorContains(t, err, "master key")
}

// TestFrontDoorMetrics: the public listener of `api` serves /metrics only
// with POSTHASTE_METRICS_TOKEN set, and then only to requests that carry
// it (the port faces every client; `worker`, `smtp` and `mx` serve theirs
// on POSTHASTE_METRICS_ADDR); `dev` keeps it open.
func TestFrontDoorMetrics(t *testing.T) {
	st := storetest.New(t)
	cfg, err := config.Load(func(string) string { return "" })
	require.NoError(t, err)
	for _, c := range []struct {
		name, token string
		dev         bool
		bearer      string
		want        int
	}{
		{"api without a token", "", false, "", http.StatusNotFound},
		{"api without a token, any bearer", "", false, "x", http.StatusNotFound},
		{"api with a token, none sent", "scrape-me", false, "", http.StatusUnauthorized},
		{"api with a token, a wrong one sent", "scrape-me", false, "wrong", http.StatusUnauthorized},
		{"api with a token, sent", "scrape-me", false, "scrape-me", http.StatusOK},
		{"dev without a token", "", true, "", http.StatusOK},
		{"dev with a token, none sent", "scrape-me", true, "", http.StatusUnauthorized},
		{"dev with a token, sent", "scrape-me", true, "scrape-me", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			cfg.MetricsToken = c.token
			logger := slog.New(slog.DiscardHandler)
			reg, metrics := newRegistry()
			in, err := newIntake(context.Background(), cfg, st, nil, metrics, logger)
			require.NoError(t, err)
			t.Cleanup(in.close)
			h, err := newFrontDoor(cfg, st, nil, in, nil, nil, publicMetrics(reg, c.token, c.dev), metrics, nil, "", logger)
			require.NoError(t, err)
			r := httptest.NewRequest("GET", "/metrics", nil)
			if c.bearer != "" {
				r.Header.Set("Authorization", "Bearer "+c.bearer)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, c.want, w.Code, w.Body.String())
			if c.want == http.StatusOK {
				require.Contains(t, w.Body.String(), "# TYPE ")
			} else {
				require.NotContains(t, w.Body.String(), "# TYPE ")
			}
		})
	}
}
