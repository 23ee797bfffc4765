package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
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
	return newBrowserFor(t, 90*time.Second)
}

// newBrowserFor starts Chromium for at most timeout.
func newBrowserFor(t *testing.T, timeout time.Duration) context.Context {
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
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		eventually(t, 5*time.Second, func() error {
			if err := os.RemoveAll(profile); err != nil {
				return fmt.Errorf("could not remove the browser profile %s: %w", profile, err)
			}
			return nil
		})
	})
	return ctx
}

// browserDevEnv is the environment of a `posthaste dev` for a browser
// test, on a database of its own.
func browserDevEnv(t *testing.T) map[string]string {
	return map[string]string{
		"DATABASE_URL":               pgtest.NewDatabase(t),
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT": fmt.Sprint(freePort(t)),
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
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
	dev := shared(t, "browser")
	creds := dev.newTeam(t, "posthaste.local")
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
	// The app's next code: the current one was spent on the setup.
	code, err = totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`#code`, code+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`table.list`, chromedp.ByQuery),
		chromedp.Location(&url),
	))
	require.True(t, strings.HasSuffix(url, "/dashboard/emails"), url)
}

// tourProblems collects what the browser reports while the tour runs:
// console errors, uncaught exceptions, failed loads and 4xx/5xx answers.
// Chromium reports them on its own goroutine, hence the lock.
type tourProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *tourProblems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// take returns the problems reported since the last call.
func (p *tourProblems) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.list
	p.list = nil
	return l
}

// listen records the problems of the browser tab of ctx.
func (p *tourProblems) listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p.add("console.%s: %s", ev.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			p.add("uncaught exception: %s", ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				p.add("console error (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		case *network.EventResponseReceived:
			if ev.Response.Status >= 400 {
				p.add("HTTP %d for %s", ev.Response.Status, ev.Response.URL)
			}
		case *network.EventLoadingFailed:
			if !ev.Canceled {
				p.add("loading failed (%s): %s %s", ev.Type, ev.ErrorText, ev.BlockedReason)
			}
		}
	})
}

// pageCheck runs in each page of the tour and returns what is wrong with
// it: a horizontal scrollbar (with the elements that stick out), no title,
// Go values printed raw (struct dumps, slices of words, <nil>, map[, fmt's
// %! errors, time.Time's monotonic clock and default format, pointers;
// JSON, whose strings are quoted, passes), form fields without a label,
// clickable things that are not buttons or links, badges without text.
const pageCheck = `(() => {
  const problems = [];
  const de = document.documentElement;
  if (de.scrollWidth > de.clientWidth) {
    const wide = [...document.querySelectorAll("body *")]
      .filter(e => e.getBoundingClientRect().right > de.clientWidth + 1 || e.scrollWidth > e.clientWidth + 1)
      .slice(0, 6)
      .map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
        (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\s+/).join(".") : ""));
    problems.push("horizontal scrollbar: scrollWidth " + de.scrollWidth + " > clientWidth " + de.clientWidth + " (" + wide.join(", ") + ")");
  }
  const title = document.title.trim();
  if (!title || title.startsWith("·")) problems.push("missing page title: " + JSON.stringify(title));
  const text = document.body.innerText;
  const goValues = [/<nil>/, /map\[/, /%!/, /\{[^{}"\n]+\}/, /\[[\w.@-]+( [\w.@-]+)+\]/, / m=[+-]\d/,
    /\d{2}:\d{2}:\d{2}\.\d+ [+-]\d{4}/, /\b0x[0-9a-f]{6,}\b/];
  for (const re of goValues) {
    const m = text.match(re);
    if (m) problems.push("raw Go value in the text: " + JSON.stringify(m[0]));
  }
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
    if (el.labels.length === 0 && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby")) {
      problems.push("form field without a label: " + el.outerHTML.slice(0, 120));
    }
  }
  for (const el of document.querySelectorAll("[onclick], [role=button]:not(button), a:not([href])")) {
    problems.push("clickable element that is not a button or link: " + el.outerHTML.slice(0, 120));
  }
  for (const el of document.querySelectorAll(".badge")) {
    if (!el.textContent.trim()) problems.push("badge without text: " + el.outerHTML.slice(0, 120));
  }
  return problems;
})()`

// focusCheck presses Tab on a fresh page: the first stop (the skip link)
// must show a focus outline.
const focusCheck = `(() => {
  const el = document.activeElement;
  if (!el || el === document.body) return "Tab focused nothing";
  const s = getComputedStyle(el);
  if (s.outlineStyle === "none" || parseFloat(s.outlineWidth) === 0) return "no visible focus on " + el.outerHTML.slice(0, 80);
  return "";
})()`

// TestDashboardTour signs in to `posthaste dev` in Chromium and visits
// every page reachable from the navigation plus the detail views of an
// email, a domain, a webhook endpoint and its test event, a contact, a
// segment, a topic, a template, a contact import, and an automation (its
// editor, its runs and a run), at 1280×900 and
// at 390×844 (a phone). It fails on a horizontal scrollbar, a console
// error, a 4xx or 5xx answer, raw Go values in the text, a missing title,
// unlabeled fields and focus that cannot be seen. On the way it uses the
// forms a new user uses: the quick start's API key (then sends with it),
// adding a domain, adding a webhook and sending it a test event.
// Screenshots of every page go to the artifacts directory.
//
// A page added to the navigation joins the tour by itself; detail views
// are listed below.
func TestDashboardTour(t *testing.T) {
	env := browserDevEnv(t)
	// Two IP pools, so that the IP pools page lists addresses warming up.
	env["POSTHASTE_IP_POOLS"] = "shared=127.0.0.1@mta1.tour.test;bulk=127.0.0.2@mta2.tour.test"
	dev := startDev(t, env)
	defer dev.stop(t)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("ok"))
	}))
	defer hooks.Close()

	ctx := newBrowserFor(t, 4*time.Minute)
	require.NoError(t, chromedp.Run(ctx)) // opens the tab
	problems := &tourProblems{}
	problems.listen(ctx)
	require.NoError(t, chromedp.Run(ctx, network.Enable(), cdplog.Enable(), runtime.Enable()))

	type viewport struct {
		name string
		w, h int64
	}
	viewports := []viewport{{"desktop", 1280, 900}, {"phone", 390, 844}}
	// check looks at the page the browser shows now, as name.
	check := func(vp viewport, name string) {
		t.Helper()
		var found []string
		require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(pageCheck, &found)))
		screenshot(t, ctx, "tour-"+vp.name+"-"+name)
		var focus string
		require.NoError(t, chromedp.Run(ctx, chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(focusCheck, &focus)))
		if focus != "" {
			found = append(found, focus)
		}
		found = append(found, problems.take()...)
		for _, p := range found {
			t.Errorf("%s at %dx%d: %s", name, vp.w, vp.h, p)
		}
	}
	visit := func(vp viewport, name, path string) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(dev.base+path), chromedp.WaitReady("body")))
		check(vp, name)
	}

	// Signed out: the sign-in page at both sizes.
	for _, vp := range viewports {
		require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(vp.w, vp.h)))
		visit(vp, "login", "/dashboard/login")
	}
	desktop := viewports[0]
	require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(desktop.w, desktop.h),
		chromedp.Navigate(dev.base+"/"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#step-key`, chromedp.ByID),
	))
	// A new team starts with the quick start: make a key there.
	check(desktop, "quickstart")
	var key, curl string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`form[action="/dashboard/getting-started/key"] button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#new-key`, chromedp.ByID),
		chromedp.Text(`#new-key`, &key, chromedp.ByID),
		chromedp.Text(`#curl-example`, &curl, chromedp.ByID),
	))
	require.True(t, strings.HasPrefix(key, "ph_"), key)
	require.Contains(t, curl, "Bearer "+key, "the example carries the new key")
	require.Contains(t, curl, dev.base+"/emails")
	check(desktop, "quickstart-key")

	// The key sends, as the example says.
	sender := apiClient{t: t, base: dev.base, key: key}
	id := sender.send(map[string]any{"from": "Acme <onboarding@posthaste.test>", "to": "delivered@posthaste.test",
		"subject": "Hello from Posthaste", "html": "<p>It works!</p>"})
	apiClient{t: t, base: dev.base, key: creds.APIKey}.waitFor(id, map[string]string{"delivered@posthaste.test": "delivered"})

	// Add a domain and an endpoint through the forms; test the endpoint.
	var domainURL, webhookURL, eventURL, secret string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(dev.base+"/dashboard/domains"),
		chromedp.SendKeys(`#domain-name`, "tour.example.com", chromedp.ByID),
		chromedp.Click(`form[action="/dashboard/domains"] button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`table.records`, chromedp.ByQuery),
		chromedp.Location(&domainURL),
		chromedp.Navigate(dev.base+"/dashboard/webhooks"),
		chromedp.SendKeys(`#webhook-endpoint`, hooks.URL+"/posthaste", chromedp.ByID),
		chromedp.Click(`input[name=events][value="email.sent"]`, chromedp.ByQuery),
		chromedp.Click(`input[name=events][value="email.delivered"]`, chromedp.ByQuery),
		chromedp.Click(`form[action="/dashboard/webhooks"] button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#secret`, chromedp.ByID),
		chromedp.Location(&webhookURL),
		chromedp.Click(`form[action$="/secret"] button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#signing-secret`, chromedp.ByID),
		chromedp.Text(`#signing-secret`, &secret, chromedp.ByID),
		chromedp.Click(`form[action$="/test"] button`, chromedp.ByQuery),
		chromedp.WaitVisible(`pre.text`, chromedp.ByQuery),
		chromedp.Location(&eventURL),
	))
	require.Contains(t, domainURL, "/dashboard/domains/")
	require.Contains(t, webhookURL, "/dashboard/webhooks/")
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	require.Contains(t, eventURL, "/events/")
	var answer string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`table.list .badge`, &answer, chromedp.ByQuery)))
	require.Equal(t, "200", answer, "the test event reached the endpoint")
	problems.take() // the pages of the forms are checked in the tour below

	// Contacts, segments, topics, templates and an import, through the API.
	seed := apiClient{t: t, base: dev.base, key: creds.APIKey}
	created := func(path string, body map[string]any) string {
		t.Helper()
		status, out := seed.do("POST", path, body)
		require.Equal(t, http.StatusCreated, status, out)
		return out["id"].(string)
	}
	segmentID := created("/segments", map[string]any{"name": "Tour customers"})
	topicID := created("/topics", map[string]any{"name": "Tour news", "description": "Monthly news", "default_subscription": "opt_in"})
	contactID := created("/contacts", map[string]any{"email": "tour.contact@example.com", "first_name": "Tour",
		"last_name": "Contact", "segments": []string{segmentID}})
	templateID := created("/templates", map[string]any{"name": "Tour welcome", "subject": "Hi {{{FIRST_NAME|there}}}",
		"html": "<h1>Welcome, {{{FIRST_NAME|there}}}</h1><p>Thanks for joining.</p>"})
	importID := seed.uploadImport("email,first_name\nimported@example.com,Imp\nnot-an-address,Bad\n", nil)
	seed.waitImport(importID)
	// A template written with the block editor, a draft broadcast (its
	// editor) and a sent one (its report).
	blocksID := created("/templates", map[string]any{"name": "Tour blocks", "components": map[string]any{
		"blocks": []any{map[string]any{"type": "heading", "level": 1, "text": "Hi {{{FIRST_NAME|there}}}"},
			map[string]any{"type": "text", "runs": []any{map[string]any{"text": "News", "bold": true}}},
			map[string]any{"type": "footer", "address": []string{"Tour Inc."}}}}})
	broadcast := map[string]any{"name": "Tour news", "segment_id": segmentID, "from": "Acme <onboarding@posthaste.test>",
		"subject": "News for {{{FIRST_NAME|you}}}", "components": map[string]any{"blocks": []any{
			map[string]any{"type": "heading", "level": 1, "text": "Hello {{{FIRST_NAME|there}}}"},
			map[string]any{"type": "footer", "address": []string{"Tour Inc."}}}}}
	draftID := created("/broadcasts", broadcast)
	broadcast["send"] = true
	sentID := created("/broadcasts", broadcast)
	// An automation with a step of every type, enabled, and a run of it
	// (waiting on its delay), from the tour's template, published for it.
	status, out := seed.do("POST", "/templates/"+templateID+"/publish", nil)
	require.Equal(t, http.StatusOK, status, out)
	stepOf := func(key, typ string, config map[string]any) map[string]any {
		return map[string]any{"key": key, "type": typ, "config": config}
	}
	rule := func(field, op string, value any) map[string]any {
		return map[string]any{"type": "rule", "field": field, "operator": op, "value": value}
	}
	link := func(from, to, typ string) map[string]any { return map[string]any{"from": from, "to": to, "type": typ} }
	automationID := created("/automations", map[string]any{"name": "Tour onboarding", "status": "enabled",
		"steps": []any{
			stepOf("trigger", "trigger", map[string]any{"event_name": "tour.signed_up"}),
			stepOf("wait", "delay", map[string]any{"duration": "1 week"}),
			stepOf("welcome", "send_email", map[string]any{"subject": "Welcome to the tour",
				"template": map[string]any{"id": templateID, "variables": map[string]any{
					"PLAN": map[string]any{"var": "event.plan"}, "SOURCE": "tour"}}}),
			stepOf("plan", "condition", map[string]any{"type": "and", "rules": []any{rule("event.plan", "eq", "pro"),
				rule("event.seats", "gte", 5)}}),
			stepOf("pros", "add_to_segment", map[string]any{"segment_id": segmentID}),
			stepOf("upgrade", "wait_for_event", map[string]any{"event_name": "tour.upgraded", "timeout": "3 days",
				"filter_rule": rule("event.plan", "eq", "pro")}),
			stepOf("update", "contact_update", map[string]any{"first_name": map[string]any{"var": "event.first_name"},
				"properties": map[string]any{"plan": map[string]any{"var": "event.plan"}}}),
			stepOf("bye", "contact_delete", map[string]any{}),
		},
		"connections": []any{link("trigger", "wait", "default"), link("wait", "welcome", "default"),
			link("welcome", "plan", "default"), link("plan", "pros", "condition_met"),
			link("plan", "upgrade", "condition_not_met"), link("upgrade", "update", "event_received"),
			link("upgrade", "bye", "timeout")}})
	status, out = seed.do("POST", "/events/send", map[string]any{"event": "tour.signed_up", "contact_id": contactID,
		"payload": map[string]any{"plan": "pro", "seats": 7}})
	require.Equal(t, http.StatusAccepted, status, out)
	runs, _ := out["runs"].([]any)
	require.Len(t, runs, 1, out)
	automationRun := fmt.Sprint(runs[0])
	// A received email, through the dev inbound MX (e2e_receiving_test.go).
	receivedID := seedReceived(t, env, seed, dashboardID(domainURL))
	// A finished data export, so the Data requests page lists one with
	// its download link.
	seed.waitDataRequest(seed.dataRequest("tour.contact@example.com", "export"))

	// The navigation, as a signed-in page shows it.
	var nav []string
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(
		`[...document.querySelectorAll('header.top nav a, header.top .who a')].map(a => a.getAttribute("href"))`, &nav)))
	require.GreaterOrEqual(t, len(nav), 12, nav)
	require.Contains(t, nav, "/dashboard/audit", "the Audit page is in the navigation")
	require.Contains(t, nav, "/dashboard/data-requests", "the Data requests page is in the navigation")
	require.Contains(t, nav, "/dashboard/automations", "the Automations page is in the navigation")
	path := func(u string) string { return strings.TrimPrefix(u, dev.base) }
	details := [][2]string{
		{"email", "/dashboard/emails/" + id},
		{"domain", path(domainURL)},
		{"domain-delete", strings.TrimSuffix(path(domainURL), "?done=added") + "/delete"},
		{"webhook", path(webhookURL)},
		{"webhook-delete", strings.TrimSuffix(path(webhookURL), "?done=added") + "/delete"},
		{"webhook-event", path(eventURL)},
		{"getting-started", "/dashboard/getting-started"},
		{"contact", "/dashboard/contacts/" + contactID},
		{"contact-delete", "/dashboard/contacts/" + contactID + "/delete"},
		{"contact-imports", "/dashboard/contact-imports"},
		{"contact-import", "/dashboard/contact-imports/" + importID},
		{"segment", "/dashboard/segments/" + segmentID},
		{"segment-delete", "/dashboard/segments/" + segmentID + "/delete"},
		{"topic", "/dashboard/topics/" + topicID},
		{"topic-delete", "/dashboard/topics/" + topicID + "/delete"},
		{"template", "/dashboard/templates/" + templateID},
		{"template-delete", "/dashboard/templates/" + templateID + "/delete"},
		{"received", "/dashboard/receiving/" + receivedID},
		{"template-blocks", "/dashboard/templates/" + blocksID},
		{"broadcast-draft", "/dashboard/broadcasts/" + draftID},
		{"broadcast-sent", "/dashboard/broadcasts/" + sentID},
		{"automation-new", "/dashboard/automations/new"},
		{"automation", "/dashboard/automations/" + automationID},
		{"automation-runs", "/dashboard/automations/" + automationID + "/runs"},
		{"automation-run", "/dashboard/automations/" + automationID + "/runs/" + automationRun},
		{"automation-delete", "/dashboard/automations/" + automationID + "/delete"},
		// The audit log, filtered to the quick start's key.
		{"audit-filtered", "/dashboard/audit?action=api_key.create"},
	}
	for _, vp := range viewports {
		require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(vp.w, vp.h)))
		for _, href := range nav {
			visit(vp, strings.ReplaceAll(strings.Trim(strings.TrimPrefix(href, "/dashboard"), "/"), "/", "-"), href)
		}
		for _, d := range details {
			visit(vp, d[0], d[1])
		}
		// A request of the log, which exists now.
		var logHref string
		require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(dev.base+"/dashboard/logs"),
			chromedp.AttributeValue(`table.list a`, "href", &logHref, nil, chromedp.ByQuery)))
		problems.take()
		visit(vp, "log-entry", logHref)
	}
	for _, p := range problems.take() {
		t.Errorf("after the tour: %s", p)
	}
}
