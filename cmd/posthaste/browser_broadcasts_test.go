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

// TestBroadcastEditorInBrowser writes a broadcast in Chromium the way a
// marketer does: a segment of sandbox contacts made through the API, a
// new broadcast built with the block editor (a heading and a text with a
// variable added, a block moved, one deleted), the mobile preview, a
// reload that loses nothing, a test to the signed-in member, Send now
// after the confirmation, and the report's counts followed until every
// contact's email is delivered.
func TestBroadcastEditorInBrowser(t *testing.T) {
	dev := shared(t, "browser")
	creds := dev.newTeam(t, "posthaste.local")
	api := apiClient{t: t, base: dev.base, key: creds.APIKey}
	status, seg := api.do("POST", "/segments", map[string]any{"name": "Spring readers"})
	require.Equal(t, 201, status, seg)
	const contacts = 3
	for i := 1; i <= contacts; i++ {
		status, out := api.do("POST", "/contacts", map[string]any{"email": fmt.Sprintf("delivered+%d@posthaste.test", i),
			"first_name": fmt.Sprintf("Reader%d", i), "segments": []any{seg["id"]}})
		require.Equal(t, 201, status, out)
	}

	ctx := newBrowserFor(t, 4*time.Minute)
	problems := &tourProblems{}
	require.NoError(t, chromedp.Run(ctx))
	problems.listen(ctx)
	var url string
	step(t, ctx, problems, "create",
		chromedp.Navigate(dev.base+"/dashboard/broadcasts"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#new-broadcast`, chromedp.ByID),
		chromedp.Click(`#new-broadcast`, chromedp.ByID),
		chromedp.WaitVisible(`#broadcast-form`, chromedp.ByID),
		// The starter document: heading, text, footer, in the block editor.
		chromedp.WaitVisible(byLabel("Address lines of block 3"), chromedp.ByQuery),
		chromedp.WaitNotVisible(`#bc-components`, chromedp.ByID),
		chromedp.Location(&url),
	)
	require.Contains(t, url, "/dashboard/broadcasts/")

	// A heading and a text with a variable after the starter text; the new
	// heading moves up above it, and the starter heading goes.
	step(t, ctx, problems, "blocks",
		clickLabel("Add a block after block 2"),
		clickLabel("Add heading after block 2"),
		typeLabel("Text of block 3", "Spring sale"),
		clickLabel("Add a block after block 3"),
		clickLabel("Add text after block 3"),
		typeLabel("Text of block 4", "See you soon, "),
		chromedp.SetValue(byLabel("Variable"), "FIRST_NAME", chromedp.ByQuery),
		typeLabel("Fallback of the variable", "friend"),
		clickLabel("Insert variable"),
		clickLabel("Move block 3 up"),
		clickLabel("Delete block 1"),
		chromedp.Clear(`#bc-subject`, chromedp.ByID),
		chromedp.SendKeys(`#bc-subject`, "Spring news for {{{FIRST_NAME|you}}}", chromedp.ByID),
		chromedp.SendKeys(`#bc-preview-text`, "Ten days of spring prices", chromedp.ByID),
	)
	wantTypes := []string{"heading", "text", "text", "footer"}
	var types []string
	var text string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Evaluate(`[...document.querySelectorAll(".be-blocks > .be-card")].map(c => c.dataset.type)`, &types),
		chromedp.Text(byLabel("Text of block 3"), &text, chromedp.ByQuery),
	))
	require.Equal(t, wantTypes, types)
	require.Equal(t, "See you soon, {{{FIRST_NAME|friend}}}", text)
	waitSaved(t, ctx)

	// The mobile preview: 375 CSS pixels wide, the saved draft rendered for
	// the member (sample names: the member is no contact).
	var width float64
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#tab-mobile`, chromedp.ByID),
		chromedp.Evaluate(`document.getElementById("preview-frame").getBoundingClientRect().width`, &width),
	))
	require.InDelta(t, 375, width, 1)
	preview := &previewFrame{page: ctx}
	preview.wait(t, "Spring sale")
	preview.wait(t, "See you soon, Jane")
	var subject string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`#preview-subject`, &subject, chromedp.ByID)))
	require.Equal(t, "Spring news for Jane", subject)
	screenshot(t, ctx, "broadcast-editor")

	// An invalid sender is not saved: the status says why and marks the
	// field until it is fixed.
	var saveStatus string
	var emptied bool
	// emptyFrom empties the field without an input event (the keys typed
	// next make those).
	emptyFrom := chromedp.Evaluate(`document.getElementById("bc-from").value = ""; true`, &emptied)
	step(t, ctx, problems, "invalid",
		emptyFrom,
		chromedp.SendKeys(`#bc-from`, "not an address", chromedp.ByID),
		chromedp.WaitVisible(`#save-status.failed`, chromedp.ByQuery),
		chromedp.WaitVisible(`#bc-from[aria-invalid="true"]`, chromedp.ByQuery),
		chromedp.Text(`#save-status`, &saveStatus, chromedp.ByID),
	)
	require.Contains(t, saveStatus, "Invalid from field")
	step(t, ctx, problems, "fixed",
		emptyFrom,
		chromedp.SendKeys(`#bc-from`, "Spring Shop <onboarding@posthaste.test>", chromedp.ByID),
		chromedp.WaitNotPresent(`#bc-from[aria-invalid]`, chromedp.ByQuery),
	)
	waitSaved(t, ctx)

	// Reloaded, nothing is lost: the server's copy is the page.
	var heading, subjectField, previewText, from string
	types = nil
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(byLabel("Text of block 3"), chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll(".be-blocks > .be-card")].map(c => c.dataset.type)`, &types),
		chromedp.Value(byLabel("Text of block 1"), &heading, chromedp.ByQuery),
		chromedp.Text(byLabel("Text of block 3"), &text, chromedp.ByQuery),
		chromedp.Value(`#bc-subject`, &subjectField, chromedp.ByID),
		chromedp.Value(`#bc-preview-text`, &previewText, chromedp.ByID),
		chromedp.Value(`#bc-from`, &from, chromedp.ByID),
	))
	require.Equal(t, "Spring Shop <onboarding@posthaste.test>", from)
	require.Equal(t, wantTypes, types)
	require.Equal(t, "Spring sale", heading)
	require.Equal(t, "See you soon, {{{FIRST_NAME|friend}}}", text)
	require.Equal(t, "Spring news for {{{FIRST_NAME|you}}}", subjectField)
	require.Equal(t, "Ten days of spring prices", previewText)

	// A test to the member: its email is linked.
	var testID string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#test-button`, chromedp.ByID),
		chromedp.WaitVisible(`#test-sent`, chromedp.ByID),
		chromedp.Text(`#test-sent code`, &testID, chromedp.ByQuery),
	))
	status, email := api.do("GET", "/emails/"+testID, nil)
	require.Equal(t, 200, status, email)
	require.Equal(t, "[Test] Spring news for you", email["subject"], "the member is no contact: fallbacks")

	// Send now, after the confirmation naming the segment and its size.
	var question string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#send-button`, chromedp.ByID),
		chromedp.WaitVisible(`#confirm-send`, chromedp.ByID),
		chromedp.Text(`#confirm-send`, &question, chromedp.ByID),
	))
	require.Contains(t, question, "Spring readers")
	require.Contains(t, question, fmt.Sprintf("%d contacts", contacts))
	screenshot(t, ctx, "broadcast-confirm")
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#confirm-button`, chromedp.ByID),
		chromedp.WaitVisible(`#broadcast-report`, chromedp.ByID),
	))

	// The counts follow the sends. Once nothing can change any more the
	// page reloads itself once, so a read may meet the page between two
	// documents ("No node with given id found"): that read is retried.
	var delivered, state string
	reported := false
	defer func() {
		if !reported {
			screenshot(t, ctx, "broadcast-report")
		}
	}()
	eventually(t, 2*time.Minute, func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		readErr := chromedp.Run(rctx,
			chromedp.Text(`[data-count="delivered"]`, &delivered, chromedp.ByQuery),
			chromedp.Text(`#bc-status`, &state, chromedp.ByID),
		)
		if readErr == nil && delivered == fmt.Sprint(contacts) && state == "sent" {
			return nil
		}
		return fmt.Errorf("the report never showed %d delivered and sent; last: %s delivered, status %s (%v)",
			contacts, delivered, state, readErr)
	})
	reported = true
	// Settled, the page shows the recipients as they ended.
	var recipients, row string
	step(t, ctx, problems, "settled",
		chromedp.WaitVisible(`#recipients`, chromedp.ByID),
		chromedp.WaitNotPresent(`#cancel-form`, chromedp.ByID),
		chromedp.Text(`#recipients tbody`, &recipients, chromedp.ByQuery),
	)
	for i := 1; i <= contacts; i++ {
		require.Contains(t, recipients, fmt.Sprintf("delivered+%d@posthaste.test", i))
	}
	screenshot(t, ctx, "broadcast-report")

	// The list shows it sent, with its counts.
	step(t, ctx, problems, "list",
		chromedp.Navigate(dev.base+"/dashboard/broadcasts"),
		chromedp.WaitVisible(`table.broadcasts`, chromedp.ByQuery),
		chromedp.Text(`table.broadcasts tbody tr`, &row, chromedp.ByQuery),
	)
	require.Contains(t, row, "sent")
	require.Contains(t, row, "Spring readers")
	var delivCell string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`table.broadcasts tbody tr td[data-label="Delivered"]`, &delivCell, chromedp.ByQuery)))
	require.Equal(t, fmt.Sprint(contacts), strings.TrimSpace(delivCell))
	screenshot(t, ctx, "broadcasts")
	for _, p := range problems.take() {
		t.Errorf("browser: %s", p)
	}
}

// step runs the actions of one step of the test, for at most a minute;
// on failure it leaves a screenshot and the browser's problems.
func step(t *testing.T, ctx context.Context, problems *tourProblems, name string, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		var html string
		_ = chromedp.Run(ctx, chromedp.OuterHTML("main", &html, chromedp.ByQuery))
		screenshot(t, ctx, "broadcast-failed-"+name)
		t.Fatalf("%s: %v\nbrowser problems: %v\npage: %.3000s", name, err, problems.take(), html)
	}
}

// waitSaved waits until the editor's autosave says the draft is saved.
func waitSaved(t *testing.T, ctx context.Context) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		var status string
		require.NoError(t, chromedp.Run(ctx, chromedp.Text(`#save-status`, &status, chromedp.ByID)))
		if !strings.HasPrefix(status, "Saved") {
			return fmt.Errorf("the draft was never saved; the status says %q", status)
		}
		return nil
	})
}
