package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/pgtest"
)

// chromium is Debian's Chromium, installed by the test command.
const chromium = "/usr/bin/chromium"

// artifactsDir is where browser tests leave their screenshots:
// POSTHASTE_ARTIFACTS_DIR, or .artifacts/screenshots at the repository root.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("POSTHASTE_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts", "screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func newBrowser(t *testing.T) context.Context {
	t.Helper()
	_, err := os.Stat(chromium)
	require.NoError(t, err, "browser tests need Chromium: apt-get install chromium")
	// Chromium's helper processes may still write to the profile for a
	// moment after the browser exits, so the profile is removed with retries
	// rather than by t.TempDir.
	profile, err := os.MkdirTemp("", "posthaste-chromium-")
	require.NoError(t, err)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("could not remove the browser profile %s", profile)
	})
	return ctx
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	require.NoError(t, chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)))
	path := filepath.Join(artifactsDir(t), name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// TestDashboardInBrowser signs in with a password in headless Chromium,
// sends through the API, sees the email on the Emails page with its final
// status, opens its detail and watches the Metrics counts move.
func TestDashboardInBrowser(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL":               pgtest.NewDatabase(t),
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT": fmt.Sprint(freePort(t)),
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
	dev := startDev(t, env)
	defer dev.stop(t)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	api := apiClient{t: t, base: dev.base, key: creds.APIKey}
	id := api.send(map[string]any{"from": "Acme <onboarding@posthaste.test>", "to": "bounced@posthaste.test",
		"subject": "Browser check", "html": "<h1>Hello from the browser test</h1>"})
	api.waitFor(id, map[string]string{"bounced@posthaste.test": "bounced"})

	ctx := newBrowser(t)
	var url string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(dev.base+"/"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID), // Enter submits
		chromedp.WaitVisible(`table.list`, chromedp.ByQuery),
		chromedp.Location(&url),
	))
	require.True(t, strings.HasSuffix(url, "/dashboard/emails"), url)
	var row string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`table.list tbody tr`, &row, chromedp.ByQuery)))
	require.Contains(t, row, "bounced")
	require.Contains(t, row, "Browser check")
	screenshot(t, ctx, "emails")

	var events, status string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`table.list tbody tr a`, chromedp.ByQuery),
		chromedp.WaitVisible(`ol.timeline`, chromedp.ByQuery),
		chromedp.Text(`ol.timeline`, &events, chromedp.ByQuery),
		chromedp.Text(`dl.facts .badge`, &status, chromedp.ByQuery),
	))
	require.Equal(t, "bounced", status)
	require.Regexp(t, `(?s)queued.*sent.*bounced`, events)
	var text string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`pre.text`, &text, chromedp.ByQuery)))
	require.Contains(t, text, "Hello from the browser test", "the text part generated from the HTML")
	screenshot(t, ctx, "email-detail")

	count := func() string {
		var n string
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Navigate(dev.base+"/dashboard/metrics?range=24h"),
			chromedp.WaitVisible(`canvas#chart`, chromedp.ByQuery),
			chromedp.Text(`.total[data-type="delivered"] .count`, &n, chromedp.ByQuery),
		))
		return n
	}
	require.Equal(t, "0", count())
	id2 := api.send(map[string]any{"from": "onboarding@posthaste.test", "to": "delivered@posthaste.test",
		"subject": "Second", "text": "counts move"})
	api.waitFor(id2, map[string]string{"delivered@posthaste.test": "delivered"})
	require.Equal(t, "1", count())
	var drawn bool
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(
		`document.getElementById("chart").width > 0 && typeof Chart !== "undefined"`, &drawn)))
	require.True(t, drawn, "Chart.js drew the chart")
	screenshot(t, ctx, "metrics")

	// Turn on TOTP in the browser, sign out, and sign in with both factors.
	var secret string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(dev.base+"/dashboard/account"),
		chromedp.Click(`form[action="/dashboard/account/mfa/start"] button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#totp-secret`, chromedp.ByID),
		chromedp.Text(`#totp-secret`, &secret, chromedp.ByID),
	))
	screenshot(t, ctx, "mfa-setup")
	code, err := totp.GenerateCode(secret, time.Now())
	require.NoError(t, err)
	var codes string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`#confirm-code`, code+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`ul.codes`, chromedp.ByQuery),
		chromedp.Text(`ul.codes`, &codes, chromedp.ByQuery),
		chromedp.Click(`form[action="/dashboard/logout"] button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#password`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#code`, chromedp.ByID),
	))
	require.Len(t, strings.Fields(codes), 10, "ten recovery codes")
	code, err = totp.GenerateCode(secret, time.Now())
	require.NoError(t, err)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`#code`, code+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`table.list`, chromedp.ByQuery),
		chromedp.Location(&url),
	))
	require.True(t, strings.HasSuffix(url, "/dashboard/emails"), url)
}
