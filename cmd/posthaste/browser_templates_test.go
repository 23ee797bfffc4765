package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// previewFrame reads the editor's preview frame. Chromium isolates
// sandboxed frames in a process of their own (an out-of-process iframe,
// its own DevTools target), so the frame is read through a context
// attached to that target. When the page reloads, the old frame's target
// may linger in the browser's list for a while beside the new one, so
// every preview frame target is read.
//
// Every read attaches afresh, in the one Run that reads: chromedp runs a
// target's event loop on the context of the Run that attached it, so an
// attachment kept after that Run's timeout answers nothing more. The
// bound is generous because on a busy machine the attach alone (a dozen
// DevTools calls) has taken longer than two seconds on every try.
type previewFrame struct {
	page context.Context
}

// frameText is the text of a frame's body, its white space collapsed. It
// reads textContent, not innerText: innerText depends on layout, and
// Chromium has answered "" for it, a minute long, in a preview frame whose
// document held the text.
const frameText = `document.body ? document.body.textContent.replace(/\s+/g, " ").trim() : ""`

// text is the text of the bodies of the preview frames there are, ""
// while there is none.
func (p *previewFrame) text() (string, error) {
	targets, err := chromedp.Targets(p.page)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, ti := range targets {
		if ti.Type != "iframe" || !strings.Contains(ti.URL, "/preview") {
			continue
		}
		// Never cancelled, which would close the frame: the attachment
		// ends with the browser.
		frame, _ := chromedp.NewContext(p.page, chromedp.WithTargetID(ti.TargetID))
		var text string
		qctx, cancel := context.WithTimeout(frame, 15*time.Second)
		if chromedp.Run(qctx, chromedp.Evaluate(frameText, &text)) == nil {
			texts = append(texts, text)
		}
		cancel()
	}
	return strings.Join(texts, "\n"), nil
}

// wait waits until a preview frame shows want.
func (p *previewFrame) wait(t *testing.T, want string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		text, err := p.text()
		require.NoError(t, err)
		if !strings.Contains(text, want) {
			return fmt.Errorf("the preview never showed %q; last: %q", want, text)
		}
		return nil
	})
}

// TestTemplateEditorPreview creates a template in Chromium, types its HTML
// with a variable and a sample value, watches the sandboxed preview follow
// (the fallback, then the sample, HTML-escaped), sees a missing variable
// named inline, and publishes it.
func TestTemplateEditorPreview(t *testing.T) {
	dev := shared(t, "browser")
	creds := dev.newTeam(t, "posthaste.local")

	ctx := newBrowser(t)
	problems := &tourProblems{}
	require.NoError(t, chromedp.Run(ctx))
	problems.listen(ctx)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(dev.base+"/dashboard/templates"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#template-name`, chromedp.ByID),
		chromedp.SendKeys(`#template-name`, "Welcome"+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#template-form`, chromedp.ByID),
	))
	preview := &previewFrame{page: ctx}
	preview.wait(t, "Hello there,") // the starter body, with its fallback

	require.NoError(t, chromedp.Run(ctx,
		chromedp.Clear(`#tpl-html`, chromedp.ByID),
		chromedp.SendKeys(`#tpl-html`, "<p>Hello {{{NAME|friend}}}, welcome to {{{COMPANY}}}</p>", chromedp.ByID),
	))
	var message string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible(`#preview-error`, chromedp.ByID),
		chromedp.Text(`#preview-error`, &message, chromedp.ByID),
	))
	require.Contains(t, message, "COMPANY", "the undeclared variable is named")
	screenshot(t, ctx, "template-editor-error")

	// Declare COMPANY with a fallback; the preview renders.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`input[name="var_key"]`, "COMPANY", chromedp.ByQuery),
		chromedp.SendKeys(`input[name="var_fallback"]`, "Acme", chromedp.ByQuery),
		chromedp.WaitNotVisible(`#preview-error`, chromedp.ByID),
	))
	preview.wait(t, "Hello friend, welcome to Acme")

	// A sample value replaces the fallback, escaped as HTML.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible(`#sample-NAME`, chromedp.ByID),
		chromedp.SendKeys(`#sample-NAME`, "<b>Ada</b>", chromedp.ByID),
	))
	preview.wait(t, "Hello <b>Ada</b>, welcome to Acme")
	var text string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`#preview-text`, &text, chromedp.ByID)))
	require.Contains(t, text, "Hello <b>Ada</b>, welcome to Acme", "the text part, generated from the HTML")
	screenshot(t, ctx, "template-editor-preview")

	// Publish.
	var status string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`button[name="action"][value="publish"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.notice`, chromedp.ByQuery),
		chromedp.Text(`#template-status`, &status, chromedp.ByID),
	))
	require.Equal(t, "published", strings.TrimSpace(status))
	var html string
	require.NoError(t, chromedp.Run(ctx, chromedp.Value(`#tpl-html`, &html, chromedp.ByID)))
	require.Equal(t, "<p>Hello {{{NAME|friend}}}, welcome to {{{COMPANY}}}</p>", html)
	preview.wait(t, "Hello friend, welcome to Acme")
	for _, p := range problems.take() {
		t.Errorf("browser: %s", p)
	}
}
