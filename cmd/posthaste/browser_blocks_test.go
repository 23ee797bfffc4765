package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// byLabel is the selector of the control with that aria-label (the block
// editor's documented labels, assets/blocks-editor.js).
func byLabel(label string) string {
	return `[aria-label="` + label + `"]`
}

// keys presses key n times, with the modifiers given.
func keys(key string, n int, mods ...input.Modifier) chromedp.Tasks {
	var tasks chromedp.Tasks
	for range n {
		tasks = append(tasks, chromedp.KeyEvent(key, chromedp.KeyModifiers(mods...)))
	}
	return tasks
}

// clickLabel clicks the control with that aria-label.
func clickLabel(label string) chromedp.Action {
	return chromedp.Click(byLabel(label), chromedp.ByQuery)
}

// typeLabel types into the control with that aria-label.
func typeLabel(label, text string) chromedp.Action {
	return chromedp.SendKeys(byLabel(label), text, chromedp.ByQuery)
}

// blocksDoc is the document the test builds, as the editor writes it.
const blocksDoc = `{
  "version": 1,
  "blocks": [
    {"type": "heading", "level": 1, "text": "Welcome aboard"},
    {"type": "button", "label": "View order", "href": "https://example.com/o/1234"},
    {"type": "text", "runs": [
      {"text": "Hi {{{FIRST_NAME|there}}}, your order "},
      {"text": "#1234", "bold": true},
      {"text": " has shipped. "},
      {"text": "Track it", "href": "https://example.com/t/1234"}
    ]},
    {"type": "image", "src": "https://example.com/logo.png", "alt": "Acme logo", "width": 200},
    {"type": "spacer", "height": 24},
    {"type": "columns", "columns": [
      [{"type": "text", "runs": [{"text": "Left side"}]}],
      [{"type": "heading", "level": 2, "text": "Right side"}]
    ]},
    {"type": "footer", "address": ["Acme Inc.", "1 Main St"]}
  ]
}`

// TestBlocksEditor builds a component template in Chromium with the
// visual block editor only: every block type, a text block with a bold
// run, a link and a variable with a fallback, columns with blocks inside,
// a move and a delete. It saves, reads the stored document through the
// API, watches the preview show it, and reloads the editor.
func TestBlocksEditor(t *testing.T) {
	dev := shared(t, "browser")
	creds := dev.newTeam(t, "posthaste.local")
	api := apiClient{t: t, base: dev.base, key: creds.APIKey}

	ctx := newBrowserFor(t, 3*time.Minute)
	problems := &tourProblems{}
	require.NoError(t, chromedp.Run(ctx))
	problems.listen(ctx)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(dev.base+"/dashboard/templates"),
		chromedp.WaitVisible(`#email`, chromedp.ByID),
		chromedp.SendKeys(`#email`, creds.Email, chromedp.ByID),
		chromedp.SendKeys(`#password`, creds.Password+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#template-name`, chromedp.ByID),
		chromedp.SendKeys(`#template-name`, "Order shipped"+kb.Enter, chromedp.ByID),
		chromedp.WaitVisible(`#template-form`, chromedp.ByID),
		// The components format shows the visual editor, not the JSON.
		chromedp.Click(`input[name="format"][value="components"]`, chromedp.ByQuery),
		chromedp.WaitVisible(byLabel("Add heading"), chromedp.ByQuery),
		chromedp.WaitNotVisible(`#tpl-components`, chromedp.ByID),
	))

	var changed bool
	// A heading, then a text block: typed, a link on its end, a bold run
	// in the middle, a variable with a fallback after "Hi ".
	require.NoError(t, chromedp.Run(ctx,
		clickLabel("Add heading"),
		typeLabel("Text of block 1", "Welcome aboard"),
		chromedp.SetValue(byLabel("Level of block 1"), "1", chromedp.ByQuery),
		// What choosing an option does: SetValue sets it without the event.
		chromedp.Evaluate(`document.querySelector('[aria-label="Level of block 1"]').dispatchEvent(new Event("change", {bubbles: true}))`, &changed),
		clickLabel("Add text"),
		typeLabel("Text of block 2", "Hi , your order #1234 has shipped. Track it"),
		keys(kb.ArrowLeft, 8, input.ModifierShift),
		clickLabel("Link text of block 2"),
		chromedp.WaitVisible(byLabel("Link URL of block 2"), chromedp.ByQuery),
		typeLabel("Link URL of block 2", "https://example.com/t/1234"),
		clickLabel("Apply link to block 2"),
		chromedp.WaitNotVisible(byLabel("Link URL of block 2"), chromedp.ByQuery),
		chromedp.KeyEvent(kb.Home),
		keys(kb.ArrowRight, len("Hi , your order ")),
		keys(kb.ArrowRight, len("#1234"), input.ModifierShift),
		clickLabel("Bold text of block 2"),
		chromedp.KeyEvent(kb.Home),
		keys(kb.ArrowRight, len("Hi ")),
		chromedp.SetValue(byLabel("Variable"), "FIRST_NAME", chromedp.ByQuery),
		typeLabel("Fallback of the variable", "there"),
		clickLabel("Insert variable"),
	))
	var text, bold, link string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Text(byLabel("Text of block 2"), &text, chromedp.ByQuery),
		chromedp.Text(byLabel("Text of block 2")+` strong`, &bold, chromedp.ByQuery),
		chromedp.Text(byLabel("Text of block 2")+` a[href="https://example.com/t/1234"]`, &link, chromedp.ByQuery),
	))
	require.Equal(t, "Hi {{{FIRST_NAME|there}}}, your order #1234 has shipped. Track it", text)
	require.Equal(t, "#1234", bold)
	require.Equal(t, "Track it", link)

	// The other block types, columns with a block in each column.
	require.NoError(t, chromedp.Run(ctx,
		clickLabel("Add button"),
		typeLabel("Label of block 3", "View order"),
		typeLabel("Link of block 3", "https://example.com/o/1234"),
		clickLabel("Add image"),
		typeLabel("Image URL of block 4", "https://example.com/logo.png"),
		typeLabel("Alternative text of block 4", "Acme logo"),
		typeLabel("Width of block 4", "200"),
		clickLabel("Add divider"),
		clickLabel("Add spacer"),
		clickLabel("Add columns"),
		clickLabel("Add text to block 7 column 1"),
		typeLabel("Text of block 7 column 1 block 1", "Left side"),
		clickLabel("Add heading to block 7 column 2"),
		typeLabel("Text of block 7 column 2 block 1", "Right side"),
		clickLabel("Add footer"),
		typeLabel("Address lines of block 8", "Acme Inc.\n1 Main St"),
		// The button goes above the text; the divider goes.
		clickLabel("Move block 3 up"),
		clickLabel("Delete block 5"),
	))
	var types []string
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(
		`[...document.querySelectorAll(".be-blocks > .be-card")].map(c => c.dataset.type)`, &types)))
	require.Equal(t, []string{"heading", "button", "text", "image", "spacer", "columns", "footer"}, types)

	preview := &previewFrame{page: ctx}
	preview.wait(t, "Welcome aboard")
	preview.wait(t, "Hi there, your order #1234 has shipped.")
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitNotVisible(`#preview-error`, chromedp.ByID)))
	screenshot(t, ctx, "blocks-editor")

	var url string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#template-form .actions button[type="submit"]:not([name])`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.notice`, chromedp.ByQuery),
		chromedp.Location(&url),
	))
	id := strings.TrimPrefix(strings.SplitN(url, "?", 2)[0], dev.base+"/dashboard/templates/")
	status, tpl := api.do("GET", "/templates/"+id, nil)
	require.Equal(t, 200, status, tpl)
	stored, err := json.Marshal(tpl["components"])
	require.NoError(t, err)
	require.JSONEq(t, blocksDoc, string(stored))

	// Reloaded, the editor shows the stored blocks.
	types = nil
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(byLabel("Text of block 3"), chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll(".be-blocks > .be-card")].map(c => c.dataset.type)`, &types),
		chromedp.Text(byLabel("Text of block 3"), &text, chromedp.ByQuery),
		chromedp.Text(byLabel("Text of block 3")+` strong`, &bold, chromedp.ByQuery),
	))
	require.Equal(t, []string{"heading", "button", "text", "image", "spacer", "columns", "footer"}, types)
	require.Equal(t, "Hi {{{FIRST_NAME|there}}}, your order #1234 has shipped. Track it", text)
	require.Equal(t, "#1234", bold)
	var heading, address string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Value(byLabel("Text of block 1"), &heading, chromedp.ByQuery),
		chromedp.Value(byLabel("Address lines of block 7"), &address, chromedp.ByQuery),
		chromedp.Value(byLabel("Text of block 6 column 2 block 1"), &text, chromedp.ByQuery),
	))
	require.Equal(t, "Welcome aboard", heading)
	require.Equal(t, "Acme Inc.\n1 Main St", address)
	require.Equal(t, "Right side", text)
	preview.wait(t, "Hi there, your order #1234 has shipped.")
	for _, p := range problems.take() {
		t.Errorf("browser: %s", p)
	}
}
