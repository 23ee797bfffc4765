package merge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	data := Data{
		Values:    map[string]any{"NAME": `Ann <b>&"Co"`, "PRICE": "499", UnsubscribeURLAlias: "https://x.test/u?a=1&b=2"},
		Fallbacks: map[string]any{"PRODUCT": "item & co", "NAME": "ignored"},
	}
	for _, tc := range []struct {
		name, src string
		mode      Mode
		want      string
		missing   string
	}{
		{"plain text", "no variables {{ not a name }} {x} {{", HTML, "no variables {{ not a name }} {x} {{", ""},
		{"double braces are a reference", "Hi {{ NAME }}", HTML, "Hi Ann &lt;b&gt;&amp;&#34;Co&#34;", ""},
		{"value in text", "Hi {{{NAME}}}!", Text, `Hi Ann <b>&"Co"!`, ""},
		{"value in html is escaped", "<p>Hi {{{NAME}}}</p>", HTML, "<p>Hi Ann &lt;b&gt;&amp;&#34;Co&#34;</p>", ""},
		{"spaces around the name", "{{{ PRICE }}}", Text, "499", ""},
		{"value beats inline fallback", "{{{PRICE|0}}}", Text, "499", ""},
		{"inline fallback", "Hi {{{FIRST_NAME|there}}}", Text, "Hi there", ""},
		{"inline fallback is template html", "{{{FIRST_NAME|<i>you</i>}}}", HTML, "<i>you</i>", ""},
		{"empty inline fallback", "[{{{FIRST_NAME|}}}]", Text, "[]", ""},
		{"declared fallback escaped in html", "{{{PRODUCT}}}", HTML, "item &amp; co", ""},
		{"inline fallback beats declared", "{{{PRODUCT|thing}}}", Text, "thing", ""},
		{"unsubscribe under either name", "{{{RESEND_UNSUBSCRIBE_URL}}} {{{UNSUBSCRIBE_URL}}}", HTML,
			"https://x.test/u?a=1&amp;b=2 https://x.test/u?a=1&amp;b=2", ""},
		{"missing", "a {{{PRICE}}} {{{COUPON}}} {{{OTHER}}}", Text, "", "COUPON"},
		{"missing reserved", "{{{EMAIL}}}", HTML, "", "EMAIL"},
		{"four braces", "{{{{NAME}}}}", Text, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderString(tc.src, data, tc.mode)
			if tc.name == "four braces" {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("got %q, %v; want a syntax error", got, err)
				}
				return
			}
			checkRendered(t, got, err, tc.want, tc.missing)
		})
	}
}

// checkRendered checks a render's result: want, or when missing is set,
// a missing-variable error naming it and no output.
func checkRendered(t *testing.T, got string, err error, want, missing string) {
	t.Helper()
	if missing != "" {
		name, ok := IsMissing(err)
		if !ok || name != missing || got != "" {
			t.Fatalf("got %q, %v; want missing %s and no output", got, err, missing)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestRenderBound(t *testing.T) {
	tpl, err := Parse(strings.Repeat("{{{A}}}", 1000))
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Values: map[string]any{"A": strings.Repeat("x", 1000)}, MaxLen: 999_999}
	if _, err := tpl.Render(d, Text); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	d.MaxLen = 1_000_000
	if out, err := tpl.Render(d, Text); err != nil || len(out) != 1_000_000 {
		t.Fatalf("got %d bytes, %v", len(out), err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{
		"Hi {{{NAME",
		"{{{}}}",
		"{{{ |x}}}",
		"{{{two words}}}",
		"{{{1ST}}}",
		"{{{NAME}}} then {{{",
		"{{{" + strings.Repeat("A", MaxNameLength+1) + "}}}",
	} {
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", src, err)
		}
	}
}

func TestNames(t *testing.T) {
	tpl, err := Parse("{{{B}}} {{{A|x}}} {{{B|y}}} {{{contact.first_name}}}")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(tpl.Names(), ",")
	if got != "B,A,contact.first_name" {
		t.Fatalf("Names() = %s", got)
	}
	if !tpl.HasInlineFallback("A") || tpl.HasInlineFallback("B") {
		t.Fatal("HasInlineFallback wrong")
	}
}

func TestIsReserved(t *testing.T) {
	for _, n := range []string{"FIRST_NAME", "LAST_NAME", "EMAIL", "RESEND_UNSUBSCRIBE_URL", "UNSUBSCRIBE_URL"} {
		if !IsReserved(n) {
			t.Errorf("%s not reserved", n)
		}
	}
	if IsReserved("NAME") {
		t.Error("NAME reserved")
	}
}

// FuzzParse checks that parsing never panics and fails only with a
// *SyntaxError inside the source; that a parsed template renders in both
// modes, within its bounds, once every name has a value (a string, or
// lists of objects for loops); that rendering never reports a missing
// variable then; that a template without `{{` renders as itself; and that
// escaped values never bring markup into HTML. The seeds are the grammar's
// corners; `go test -fuzz FuzzParse ./internal/merge` explores from them.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "plain", "{{{A}}}", "{{{A|b}}}", "x{{{ A |}}}y", "{{{", "}}}", "{{{{A}}}}",
		"{{{A}}}{{{B|<c>}}}", "{{{a.b_c}}}", "{{{|}}}", "{{{A|}}}}", "{{A}}", "{{ A | b }}", "{{", "{{}}",
		"{{#each L}}{{name}}{{this}}{{/each}}", "{{#each L}}{{#each this.sub}}{{this}}{{/each}}{{else}}none{{/each}}",
		"{{#if A}}y{{else}}n{{/if}}", "{{#if A}}{{#if B}}x{{/if}}{{/if}}", "{{#each L}}", "{{/each}}", "{{else}}",
		"{{#if A}}{{else}}{{else}}{{/if}}", "{{#each L}}{{/if}}", "{{#unless A}}", "{{this}}", "{{#each this}}",
		"{{{o.a.0.b}}}", "{{#each L}}{{#each L}}{{#each L}}{{#each L}}{{A}}{{/each}}{{/each}}{{/each}}{{/each}}",
		strings.Repeat("{{#if A}}", MaxDepth+1), "{{ {{{A}}}", "{{ a {{{A", "{{#each L}}{{{this|<i>}}}{{/each}}"} {
		f.Add(s, "v<&>")
	}
	f.Fuzz(func(t *testing.T, src, value string) {
		tpl, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(src) {
				t.Fatalf("Parse(%q): %v", src, err)
			}
			return
		}
		item := map[string]any{"name": value, "sub": []any{value, true}}
		values := map[string]any{}
		for _, n := range tpl.Names() {
			if !ValidName(n) {
				t.Fatalf("Parse(%q) gave invalid name %q", src, n)
			}
			values[n] = value
		}
		for _, vals := range []map[string]any{values, withLists(values, item)} {
			d := Data{Values: vals, MaxLen: 1 << 20}
			text, err := tpl.Render(d, Text)
			if err != nil && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Render(%q) text: %v", src, err)
			}
			h, err := tpl.Render(d, HTML)
			if err != nil && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Render(%q) html: %v", src, err)
			}
			if len(text) > d.MaxLen || len(h) > d.MaxLen {
				t.Fatalf("Render(%q) passed MaxLen", src)
			}
			if !strings.Contains(src, "{{") && (text != src || h != src) {
				t.Fatalf("template without references changed: %q → %q / %q", src, text, h)
			}
			if utf8.ValidString(src) && utf8.ValidString(value) && !utf8.ValidString(text) {
				t.Fatalf("valid UTF-8 in, invalid out: %q", text)
			}
			if strings.ContainsAny(value, "<>&") && !strings.Contains(src, "{{#each") &&
				strings.Count(h, "<") > strings.Count(src, "<") {
				// Escaped values never bring markup: any '<' must come from the template.
				t.Fatalf("html render of %q with %q has unescaped markup: %q", src, value, h)
			}
		}
		if len(tpl.Names()) > 0 {
			if _, err := tpl.Render(Data{}, Text); err == nil && !allInline(tpl) {
				t.Fatalf("Render(%q) without values succeeded", src)
			}
		}
	})
}

// withLists is values with every name bound to a list of two items.
func withLists(values map[string]any, item map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	for k := range values {
		out[k] = []any{item, item}
	}
	return out
}

func allInline(t *Template) bool {
	for _, n := range t.Names() {
		if !t.HasInlineFallback(n) {
			return false
		}
	}
	return true
}

// BenchmarkRender renders a typical transactional template (about 2 KB
// of HTML, five references) once per iteration.
func BenchmarkRender(b *testing.B) {
	src := strings.Repeat("<tr><td style=\"padding:8px\">row</td></tr>", 40) +
		"<p>Hi {{{FIRST_NAME|there}}}, your order {{{ORDER}}} of {{{PRODUCT}}} ships to {{{EMAIL}}}." +
		" <a href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\">Unsubscribe</a></p>"
	tpl, err := Parse(src)
	if err != nil {
		b.Fatal(err)
	}
	d := Data{Values: map[string]any{"ORDER": "#1234", "PRODUCT": "Fish & Chips", "EMAIL": "a@b.test",
		UnsubscribeURL: "https://x.test/u?t=abc&e=1"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(d, HTML); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderTyped covers the values of every type and the blocks, in the
// grammar of Parse.
func TestRenderTyped(t *testing.T) {
	items := []any{
		map[string]any{"name": "Mug <1>", "price": json.Number("9.5"), "tags": []any{"a", "b"}},
		map[string]any{"name": "Tea", "price": json.Number("0")},
	}
	data := Data{
		Values: map[string]any{
			"ITEMS": items, "EMPTY": []any{}, "VIP": true, "NEW": false, "COUNT": json.Number("0"),
			"ORDER": map[string]any{"id": "A-1", "total": json.Number("12.50"), "ship": map[string]any{"city": "Oslo"}},
			"NAME":  "Ann", "WORDS": []any{"x", "<y>"}, "NOTHING": nil, "flat.key": "flat",
		},
		Fallbacks: map[string]any{"PLAN": "basic", "TAGS": []any{"default"}},
	}
	for _, tc := range []struct {
		name, src string
		mode      Mode
		want      string
		missing   string
	}{
		{"number", "{{{COUNT}}}", Text, "0", ""},
		{"boolean", "{{VIP}}/{{NEW}}", Text, "true/false", ""},
		{"null renders nothing", "[{{NOTHING}}]", Text, "[]", ""},
		{"null takes the inline fallback", "{{NOTHING|none}}", Text, "none", ""},
		{"object as JSON, escaped in html", "{{{ORDER.ship}}} {{WORDS}}", HTML,
			"{&#34;city&#34;:&#34;Oslo&#34;} [&#34;x&#34;,&#34;&lt;y&gt;&#34;]", ""},
		{"dot path", "{{{ORDER.id}}} {{ORDER.total}} {{ORDER.ship.city}}", Text, "A-1 12.50 Oslo", ""},
		{"list index", "{{ITEMS.0.name}} {{WORDS.1}}", Text, "Mug <1> <y>", ""},
		{"path that leads nowhere", "[{{ORDER.nope}}][{{ORDER.id.x}}][{{ITEMS.9}}]", Text, "[][][]", ""},
		{"path that leads nowhere takes the inline fallback", "{{ORDER.nope|-}}", Text, "-", ""},
		{"flat key with a dot", "{{flat.key}}", Text, "flat", ""},
		{"each over objects", "{{#each ITEMS}}<li>{{name}}: {{{price}}}</li>{{/each}}", HTML,
			"<li>Mug &lt;1&gt;: 9.5</li><li>Tea: 0</li>", ""},
		{"each with this", "{{#each WORDS}}[{{this}}]{{/each}}", HTML, "[x][&lt;y&gt;]", ""},
		{"this.field", "{{#each ITEMS}}{{this.name}},{{/each}}", Text, "Mug <1>,Tea,", ""},
		{"nested each", "{{#each ITEMS}}{{name}}({{#each tags}}{{this}}{{/each}}){{/each}}", Text, "Mug <1>(ab)Tea()", ""},
		{"outer variable inside each", "{{#each WORDS}}{{NAME}}{{/each}}", Text, "AnnAnn", ""},
		{"unknown name inside each is empty", "{{#each WORDS}}[{{nope}}]{{/each}}", Text, "[][]", ""},
		{"each else on empty", "{{#each EMPTY}}x{{else}}none{{/each}}", Text, "none", ""},
		{"each over a non-list", "{{#each NAME}}x{{else}}not a list{{/each}}", Text, "not a list", ""},
		{"each over a declared fallback", "{{#each TAGS}}{{this}}{{/each}}", Text, "default", ""},
		{"if true", "{{#if VIP}}gold{{else}}plain{{/if}}", Text, "gold", ""},
		{"if false", "{{#if NEW}}new{{else}}old{{/if}}", Text, "old", ""},
		{"if zero", "{{#if COUNT}}some{{else}}none{{/if}}", Text, "none", ""},
		{"if empty list", "{{#if EMPTY}}some{{/if}}.", Text, ".", ""},
		{"if object", "{{#if ORDER}}yes{{/if}}", Text, "yes", ""},
		{"if string", "{{#if NAME}}hi {{NAME}}{{/if}}", Text, "hi Ann", ""},
		{"if on an item field", "{{#each ITEMS}}{{#if price}}{{name}} {{/if}}{{/each}}", Text, "Mug <1> ", ""},
		{"spaces in tags", "{{ #each WORDS }}{{ this }}{{ /each }}", Text, "x<y>", ""},
		{"missing list", "{{#each LIST}}x{{/each}}", Text, "", "LIST"},
		{"missing condition", "{{#if FLAG}}x{{/if}}", Text, "", "FLAG"},
		{"missing object", "{{CART.total}}", Text, "", "CART.total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderString(tc.src, data, tc.mode)
			checkRendered(t, got, err, tc.want, tc.missing)
		})
	}
}

func TestParseBlockErrors(t *testing.T) {
	for _, src := range []string{
		"{{#each L}}x",
		"{{#if A}}{{/each}}",
		"{{/if}}",
		"{{else}}",
		"{{#if A}}{{else}}{{else}}{{/if}}",
		"{{#unless A}}{{/unless}}",
		"{{#each}}{{/each}}",
		"{{#each a b}}{{/each}}",
		"{{#if 1x}}{{/if}}",
		"{{this}}",
		"{{#if this}}{{/if}}",
		"{{ a {{{B",
		strings.Repeat("{{#if A}}", MaxDepth+1) + strings.Repeat("{{/if}}", MaxDepth+1),
	} {
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", src, err)
		}
	}
	if _, err := Parse(strings.Repeat("{{#if A}}", MaxDepth) + strings.Repeat("{{/if}}", MaxDepth)); err != nil {
		t.Errorf("nesting %d deep: %v", MaxDepth, err)
	}
}

func TestNamesSkipLoopBodies(t *testing.T) {
	tpl, err := Parse("{{#if VIP}}{{A}}{{/if}}{{#each L}}{{name}}{{B}}{{else}}{{C|c}}{{/each}}{{O.x}}")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tpl.Names(), ","); got != "VIP,A,L,C,O.x" {
		t.Fatalf("Names() = %s", got)
	}
	if !tpl.HasInlineFallback("C") || tpl.HasInlineFallback("L") || tpl.HasInlineFallback("VIP") {
		t.Fatal("HasInlineFallback wrong")
	}
}

// TestRenderStepBound: loops within loops that write nothing still stop.
func TestRenderStepBound(t *testing.T) {
	long := make([]any, 1000)
	tpl, err := Parse("{{#each L}}{{#each L}}{{#each L}}{{/each}}{{/each}}{{/each}}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(Data{Values: map[string]any{"L": long}}, Text); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("got %v, want ErrTooComplex", err)
	}
}
