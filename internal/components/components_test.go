package components

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posthaste/posthaste/internal/merge"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestParseRefuses(t *testing.T) {
	cols := func(inner string) string {
		return `{"blocks":[{"type":"text","runs":[{"text":"a"}]},{"type":"spacer","height":4},{"type":"divider"},` +
			`{"type":"columns","columns":[[{"type":"divider"}],[` + inner + `]]}]}`
	}
	many := func(n int) string {
		b := make([]string, n)
		for i := range b {
			b[i] = `{"type":"divider"}`
		}
		return `{"blocks":[` + strings.Join(b, ",") + `]}`
	}
	manyNested := func(n int) string {
		b := make([]string, n)
		for i := range b {
			b[i] = `{"type":"divider"}`
		}
		// n blocks in a column plus the columns block itself and a divider.
		return `{"blocks":[{"type":"columns","columns":[[` + strings.Join(b, ",") + `],[{"type":"divider"}]]}]}`
	}
	tests := []struct {
		name, doc, path, msg string
	}{
		{"not json", `{"blocks":`, "", "unexpected end"},
		{"syntax", `{"blocks":[}`, "", "invalid JSON"},
		{"not an object", `[]`, "", "must be a JSON object"},
		{"trailing data", `{} {}`, "", "unexpected data after"},
		{"too large", `{"settings":{"preview_text":"` + strings.Repeat("a", MaxDocumentSize) + `"}}`, "", "larger than"},
		{"version", `{"version":2}`, "version", "unsupported version 2"},
		{"unknown top field", `{"blocks":[],"title":"x"}`, "title", "unknown field"},
		{"unknown setting", `{"settings":{"colour":"#fff"}}`, "settings.colour", "unknown field"},
		{"setting type", `{"settings":{"content_width":"600"}}`, "settings.content_width", "must be an integer"},
		{"bad colour", `{"settings":{"background_color":"red;background:url(x)"}}`, "settings.background_color", "#rgb or #rrggbb"},
		{"width too small", `{"settings":{"content_width":100}}`, "settings.content_width", "between 320 and 800"},
		{"font", `{"settings":{"font_family":"Comic Sans"}}`, "settings.font_family", "must be one of"},
		{"lang", `{"settings":{"lang":"en\" onload=\"x"}}`, "settings.lang", "language tag"},
		{"preview too long", `{"settings":{"preview_text":"` + strings.Repeat("é", 501) + `"}}`, "settings.preview_text", "at most 500"},
		{"block not object", `{"blocks":[1]}`, "blocks[0]", "must be a JSON object"},
		{"null block", `{"blocks":[null]}`, "blocks[0]", "must be a JSON object"},
		{"missing type", `{"blocks":[{"text":"x"}]}`, "blocks[0].type", "required"},
		{"unknown type", `{"blocks":[{"type":"video","src":"https://x.test"}]}`, "blocks[0].type", `unknown block type "video"`},
		{"raw html block", `{"blocks":[{"type":"html","html":"<b>x</b>"}]}`, "blocks[0].type", "unknown block type"},
		{"unknown block field", `{"blocks":[{"type":"heading","level":1,"text":"x","html":"<b>"}]}`, "blocks[0].html", "unknown field"},
		{"heading level missing", `{"blocks":[{"type":"heading","text":"x"}]}`, "blocks[0].level", "1, 2 or 3"},
		{"heading level 4", `{"blocks":[{"type":"heading","level":4,"text":"x"}]}`, "blocks[0].level", "1, 2 or 3"},
		{"heading level float", `{"blocks":[{"type":"heading","level":1.5,"text":"x"}]}`, "blocks[0].level", "must be an integer"},
		{"heading text missing", `{"blocks":[{"type":"heading","level":1}]}`, "blocks[0].text", "required"},
		{"heading blank", `{"blocks":[{"type":"heading","level":1,"text":"  "}]}`, "blocks[0].text", "required"},
		{"heading two lines", `{"blocks":[{"type":"heading","level":1,"text":"a\nb"}]}`, "blocks[0].text", "single line"},
		{"control character", `{"blocks":[{"type":"heading","level":1,"text":"a\u0000b"}]}`, "blocks[0].text", "control characters"},
		{"heading align", `{"blocks":[{"type":"heading","level":1,"text":"x","align":"justify"}]}`, "blocks[0].align", "left, center or right"},
		{"text without runs", `{"blocks":[{"type":"text"}]}`, "blocks[0].runs", "at least one run"},
		{"run not object", `{"blocks":[{"type":"text","runs":["x"]}]}`, "blocks[0].runs[0]", "must be a JSON object"},
		{"run without text", `{"blocks":[{"type":"text","runs":[{"text":"a"},{"bold":true}]}]}`, "blocks[0].runs[1].text", "required"},
		{"run unknown field", `{"blocks":[{"type":"text","runs":[{"text":"a","underline":true}]}]}`, "blocks[0].runs[0].underline", "unknown field"},
		{"run bold type", `{"blocks":[{"type":"text","runs":[{"text":"a","bold":"yes"}]}]}`, "blocks[0].runs[0].bold", "true or false"},
		{"javascript link", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"javascript:alert(1)"}]}]}`, "blocks[0].runs[0].href", "http, https or mailto"},
		{"data link", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"data:text/html,x"}]}]}`, "blocks[0].runs[0].href", "http, https or mailto"},
		{"relative link", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"/orders"}]}]}`, "blocks[0].runs[0].href", "http, https or mailto"},
		{"link without host", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"https:/x"}]}]}`, "blocks[0].runs[0].href", "with a host"},
		{"link with space", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"https://x.test/a b"}]}]}`, "blocks[0].runs[0].href", "spaces"},
		{"link with quote", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"https://x.test/\"onmouseover=x"}]}]}`, "blocks[0].runs[0].href", "percent-encode"},
		{"broken placeholder", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"https://x.test/{{{ID}}"}]}]}`, "blocks[0].runs[0].href", "malformed merge placeholder"},
		{"empty mailto", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"mailto:"}]}]}`, "blocks[0].runs[0].href", "mailto URL with an address"},
		{"too many runs", `{"blocks":[{"type":"text","runs":[` + strings.Repeat(`{"text":"a"},`, MaxRuns) + `{"text":"a"}]}]}`, "blocks[0].runs", "too many runs"},
		{"button without href", `{"blocks":[{"type":"button","label":"Go"}]}`, "blocks[0].href", "required"},
		{"button without label", `{"blocks":[{"type":"button","href":"https://x.test"}]}`, "blocks[0].label", "required"},
		{"button colour", `{"blocks":[{"type":"button","label":"Go","href":"https://x.test","text_color":"white"}]}`, "blocks[0].text_color", "#rgb"},
		{"button radius", `{"blocks":[{"type":"button","label":"Go","href":"https://x.test","border_radius":99}]}`, "blocks[0].border_radius", "between 0 and 50"},
		{"image http", `{"blocks":[{"type":"image","src":"http://x.test/a.png","alt":"a"}]}`, "blocks[0].src", "https URL"},
		{"image placeholder src", `{"blocks":[{"type":"image","src":"{{{LOGO}}}","alt":"a"}]}`, "blocks[0].src", "https URL"},
		{"image without src", `{"blocks":[{"type":"image","alt":"a"}]}`, "blocks[0].src", "required"},
		{"image without alt", `{"blocks":[{"type":"image","src":"https://x.test/a.png"}]}`, "blocks[0].alt", "required"},
		{"image too wide", `{"blocks":[{"type":"image","src":"https://x.test/a.png","alt":"a","width":601}]}`, "blocks[0].width", "content width (600"},
		{"image bad href", `{"blocks":[{"type":"image","src":"https://x.test/a.png","alt":"a","href":"ftp://x.test"}]}`, "blocks[0].href", "http, https or mailto"},
		{"divider colour", `{"blocks":[{"type":"divider","color":"#12345"}]}`, "blocks[0].color", "#rgb"},
		{"spacer without height", `{"blocks":[{"type":"spacer"}]}`, "blocks[0].height", "1 to 200"},
		{"spacer too high", `{"blocks":[{"type":"spacer","height":201}]}`, "blocks[0].height", "1 to 200"},
		{"columns missing", `{"blocks":[{"type":"columns"}]}`, "blocks[0].columns", "required"},
		{"one column", `{"blocks":[{"type":"columns","columns":[[]]}]}`, "blocks[0].columns", "2 or 3 columns, not 1"},
		{"four columns", `{"blocks":[{"type":"columns","columns":[[],[],[],[]]}]}`, "blocks[0].columns", "2 or 3 columns, not 4"},
		{"nested columns", cols(`{"type":"columns","columns":[[],[]]}`), "blocks[3].columns[1][0].type", "cannot be nested"},
		{"footer in columns", cols(`{"type":"footer","address":["x"]}`), "blocks[3].columns[1][0].type", "only allowed at the top level"},
		{"bad href in a column", cols(`{"type":"button","label":"Go","href":"javascript:x"}`), "blocks[3].columns[1][0].href", "http, https or mailto"},
		{"footer without address", `{"blocks":[{"type":"footer"}]}`, "blocks[0].address", "postal address"},
		{"footer blank line", `{"blocks":[{"type":"footer","address":["a",""]}]}`, "blocks[0].address[1]", "required"},
		{"footer address type", `{"blocks":[{"type":"footer","address":"1 Main St"}]}`, "blocks[0].address", "must be an array"},
		{"footer too long", `{"blocks":[{"type":"footer","address":["1","2","3","4","5","6","7","8","9","10","11"]}]}`, "blocks[0].address", "at most 10"},
		{"unclosed placeholder", `{"blocks":[{"type":"heading","level":1,"text":"Hi {{{FIRST_NAME"}]}`, "blocks[0].text", "without a closing"},
		{"bad placeholder name", `{"blocks":[{"type":"text","runs":[{"text":"a"},{"text":"Hi {{{first name}}}"}]}]}`, "blocks[0].runs[1].text", "not a variable name"},
		{"bad placeholder in a link", `{"blocks":[{"type":"button","label":"a","href":"{{{1URL}}}"}]}`, "blocks[0].href", "not a variable name"},
		{"bad placeholder in preview", `{"settings":{"preview_text":"{{{}}}"}}`, "settings.preview_text", "not a variable name"},
		{"too many blocks", many(MaxBlocks + 1), "blocks[500]", "too many blocks"},
		{"too many blocks in columns", manyNested(MaxBlocks - 1), "blocks[0].columns[1][0]", "too many blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			require.Error(t, err)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "error %v is not a *FieldError", err)
			assert.Equal(t, tt.path, fe.Path, "error: %v", err)
			assert.Contains(t, fe.Message, tt.msg)
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"empty", `{}`},
		{"version 1", `{"version":1,"blocks":[]}`},
		{"placeholder link", `{"blocks":[{"type":"button","label":"Reset","href":"{{{RESET_URL}}}"}]}`},
		{"placeholder with fallback and path", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"{{{BASE|https://x.test}}}/a?b=c"}]}]}`},
		{"placeholder in query", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"https://x.test/?u={{{ID|a b}}}"}]}]}`},
		{"mailto", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"mailto:{{{EMAIL}}}"}]}]}`},
		{"upper-case scheme", `{"blocks":[{"type":"text","runs":[{"text":"a","href":"HTTPS://x.test"}]}]}`},
		{"500 blocks", func() string {
			b := strings.Repeat(`{"type":"divider"},`, MaxBlocks-1)
			return `{"blocks":[` + b + `{"type":"divider"}]}`
		}()},
		{"empty columns", `{"blocks":[{"type":"columns","columns":[[],[]]}]}`},
		{"image as wide as the content", `{"settings":{"content_width":700},"blocks":[{"type":"image","src":"https://x.test/a.png","alt":"a","width":700}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.doc))
			require.NoError(t, err)
			_, _, err = Render(d)
			require.NoError(t, err)
		})
	}
}

// The JSON a Document marshals to parses back to the same Document: the
// editor can load, change and save documents through these types.
func TestMarshalRoundTrip(t *testing.T) {
	for _, name := range goldenNames(t) {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", name+".json"))
			require.NoError(t, err)
			d, err := Parse(src)
			require.NoError(t, err)
			out, err := json.Marshal(d)
			require.NoError(t, err)
			again, err := Parse(out)
			require.NoError(t, err, "%s", out)
			require.Equal(t, d, again)
			assert.Contains(t, string(out), `"type":"`)
		})
	}
}

// A Document can be a field of a request body: UnmarshalJSON validates.
func TestUnmarshalJSONValidates(t *testing.T) {
	var body struct {
		Components Document `json:"components"`
	}
	err := json.Unmarshal([]byte(`{"components":{"blocks":[{"type":"button","label":"x","href":"javascript:1"}]}}`), &body)
	var fe *FieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	assert.Equal(t, "blocks[0].href", fe.Path)

	require.NoError(t, json.Unmarshal([]byte(`{"components":{"blocks":[{"type":"spacer","height":3}]}}`), &body))
	assert.Equal(t, []Block{&Spacer{Height: 3}}, body.Components.Blocks)
}

// Render validates documents built in Go, which never went through Parse.
func TestRenderValidatesBuiltDocuments(t *testing.T) {
	tests := []struct {
		name string
		doc  Document
		path string
	}{
		{"javascript link", Document{Blocks: []Block{&Text{Runs: []Run{{Text: "x", Href: "javascript:alert(1)"}}}}}, "blocks[0].runs[0].href"},
		{"css injection", Document{Settings: Settings{TextColor: "red;background:url(https://x.test)"}}, "settings.text_color"},
		{"nil block", Document{Blocks: []Block{nil}}, "blocks[0]"},
		{"typed nil block", Document{Blocks: []Block{(*Heading)(nil)}}, "blocks[0]"},
		{"nested columns", Document{Blocks: []Block{&Columns{Columns: [][]Block{{&Columns{Columns: [][]Block{{}, {}}}}, {}}}}}, "blocks[0].columns[0][0].type"},
		{"invalid utf-8", Document{Blocks: []Block{&Heading{Level: 1, Text: "a\xffb"}}}, "blocks[0].text"},
		{"version", Document{Version: 3}, "version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Render(tt.doc)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			assert.Equal(t, tt.path, fe.Path)
		})
	}
}

func goldenNames(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = strings.TrimSuffix(filepath.Base(m), ".json")
	}
	return names
}

// TestRenderGolden renders testdata/NAME.json and compares the parts with
// testdata/NAME.html.golden and testdata/NAME.txt.golden; -update rewrites
// them.
func TestRenderGolden(t *testing.T) {
	for _, name := range goldenNames(t) {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", name+".json"))
			require.NoError(t, err)
			d, err := Parse(src)
			require.NoError(t, err)
			htmlPart, textPart, err := Render(d)
			require.NoError(t, err)
			checkHTML(t, htmlPart)
			for ext, got := range map[string]string{".html.golden": htmlPart, ".txt.golden": textPart} {
				path := filepath.Join("testdata", name+ext)
				if *update {
					require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
					continue
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, string(want), got, "run go test ./internal/components -run TestRenderGolden -update to accept the change")
			}
		})
	}
}

func TestRenderEscapesAndKeepsPlaceholders(t *testing.T) {
	d, err := Parse([]byte(`{
	  "settings": {"preview_text": "<b>preview</b> {{{NAME}}}"},
	  "blocks": [
	    {"type": "heading", "level": 2, "text": "<script>alert(1)</script> {{{FIRST_NAME|Tom & Jerry}}}"},
	    {"type": "text", "runs": [{"text": "a \"quoted\" <img src=x onerror=alert(1)> 'word'", "bold": true, "italic": true, "href": "https://x.test/?a=1&b={{{ID}}}"}]},
	    {"type": "button", "label": "</a><a href=\"javascript:x\">", "href": "{{{CTA_URL|https://x.test/?q=1&r=2}}}"},
	    {"type": "image", "src": "https://x.test/a.png?s=1&t=2", "alt": "\" onerror=\"alert(1)"},
	    {"type": "footer", "address": ["<i>1 Main St</i>"], "unsubscribe_label": "Stop & go"}
	  ]
	}`))
	require.NoError(t, err)
	h, text, err := Render(d)
	require.NoError(t, err)
	checkHTML(t, h)
	for _, want := range []string{
		"&lt;b&gt;preview&lt;/b&gt; {{{NAME}}}",
		"&lt;script&gt;alert(1)&lt;/script&gt; {{{FIRST_NAME|Tom &amp; Jerry}}}",
		`<a href="https://x.test/?a=1&amp;b={{{ID}}}" target="_blank"`,
		`<strong style="font-weight:bold;"><em style="font-style:italic;">a &#34;quoted&#34; &lt;img src=x onerror=alert(1)&gt; &#39;word&#39;</em></strong>`,
		`href="{{{CTA_URL|https://x.test/?q=1&amp;r=2}}}"`,
		`&lt;/a&gt;&lt;a href=&#34;javascript:x&#34;&gt;`,
		`src="https://x.test/a.png?s=1&amp;t=2" alt="&#34; onerror=&#34;alert(1)"`,
		"&lt;i&gt;1 Main St&lt;/i&gt;",
		`<a href="{{{RESEND_UNSUBSCRIBE_URL}}}" target="_blank"`,
		">Stop &amp; go</a>",
	} {
		assert.Contains(t, h, want)
	}
	assert.NotContains(t, h, "<script")
	assert.NotContains(t, h, "<img src=x")

	// The text part is not HTML: values are written as they are.
	for _, want := range []string{
		"<script>alert(1)</script> {{{FIRST_NAME|Tom & Jerry}}}\n" + strings.Repeat("-", 37),
		`a "quoted" <img src=x onerror=alert(1)> 'word' (https://x.test/?a=1&b={{{ID}}})`,
		`</a><a href="javascript:x">: {{{CTA_URL|https://x.test/?q=1&r=2}}}`,
		"<i>1 Main St</i>\n\nStop & go: {{{RESEND_UNSUBSCRIBE_URL}}}\n",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "<b>preview", "the preheader is not part of the text part")
}

func TestTextLinks(t *testing.T) {
	tests := []struct {
		name string
		runs []Run
		want string
	}{
		{"label and url", []Run{{Text: "Read "}, {Text: "the docs", Href: "https://x.test/d"}, {Text: "."}}, "Read the docs (https://x.test/d)."},
		{"url as label", []Run{{Text: "https://x.test/d", Href: "https://x.test/d"}}, "https://x.test/d"},
		{"mailto", []Run{{Text: "Write to "}, {Text: "a@x.test", Href: "mailto:a@x.test"}}, "Write to a@x.test"},
		{"runs of one link", []Run{{Text: "the ", Href: "https://x.test"}, {Text: "docs ", Bold: true, Href: "https://x.test"}, {Text: "now"}}, "the docs (https://x.test) now"},
		{"two links", []Run{{Text: "a", Href: "https://a.test"}, {Text: "b", Href: "https://b.test"}}, "a (https://a.test)b (https://b.test)"},
		{"line break", []Run{{Text: "one\ntwo"}}, "one\ntwo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, text, err := Render(Document{Blocks: []Block{&Text{Runs: tt.runs}}})
			require.NoError(t, err)
			assert.Equal(t, tt.want+"\n", text)
		})
	}
}

// Columns stack on narrow screens without media queries: each column is an
// inline-block whose max-width is its share, inside a font-size:0 cell, and
// Outlook gets a ghost table of fixed widths.
func TestColumnsAreHybrid(t *testing.T) {
	d := Document{Blocks: []Block{&Columns{Columns: [][]Block{
		{&Image{Src: "https://x.test/a.png", Alt: "a", Width: 500}},
		{&Text{Runs: []Run{{Text: "b"}}}},
	}}}}
	h, _, err := Render(d)
	require.NoError(t, err)
	checkHTML(t, h)
	// 600 - 2*24 for the content, then 2*16 around the columns: 568 / 2.
	assert.Contains(t, h, `font-size:0;text-align:center;`)
	assert.Equal(t, 2, strings.Count(h, `<div style="display:inline-block;width:100%;max-width:284px;vertical-align:top;">`))
	assert.Contains(t, h, `<!--[if mso]><table role="presentation" cellpadding="0" cellspacing="0" border="0" width="568"><tr><td width="284" valign="top"><![endif]-->`)
	assert.Contains(t, h, `<!--[if mso]></td><td width="284" valign="top"><![endif]-->`)
	// The image is no wider than its column (284 - 2*8).
	assert.Contains(t, h, `width="268" style="display:block;width:100%;max-width:268px;`)
	assert.NotContains(t, h, "<style")
	assert.NotContains(t, h, "@media")
}

// The rendered parts go through the mail merge as the sending path does:
// placeholders survive rendering, values are escaped by the merge in the
// HTML part, and a fallback written in the document shows as written.
func TestRenderThenMerge(t *testing.T) {
	d, err := Parse([]byte(`{"blocks":[
	  {"type":"heading","level":1,"text":"Hi {{{FIRST_NAME|Tom & Jerry}}}"},
	  {"type":"button","label":"Go","href":"{{{CTA_URL}}}"},
	  {"type":"footer","address":["1 Main St"]}
	]}`))
	require.NoError(t, err)
	h, text, err := Render(d)
	require.NoError(t, err)

	withValue := merge.Data{Values: map[string]any{
		"FIRST_NAME": "<Ann>", "CTA_URL": "https://x.test/?a=1&b=2", merge.UnsubscribeURL: "https://u.test/t?s=1&v=2",
	}}
	got, err := merge.RenderString(h, withValue, merge.HTML)
	require.NoError(t, err)
	checkHTML(t, got)
	assert.Contains(t, got, ">Hi &lt;Ann&gt;</h1>")
	assert.Contains(t, got, `href="https://x.test/?a=1&amp;b=2"`)
	assert.Contains(t, got, `href="https://u.test/t?s=1&amp;v=2"`)

	withoutName := merge.Data{Values: map[string]any{"CTA_URL": "https://x.test", merge.UnsubscribeURL: "https://u.test"}}
	got, err = merge.RenderString(h, withoutName, merge.HTML)
	require.NoError(t, err)
	assert.Contains(t, got, ">Hi Tom &amp; Jerry</h1>", "the fallback is escaped once")

	got, err = merge.RenderString(text, withoutName, merge.Text)
	require.NoError(t, err)
	assert.Equal(t, "Hi Tom & Jerry\n==============\n\nGo: https://x.test\n\n1 Main St\n\nUnsubscribe: https://u.test\n", got)
}
