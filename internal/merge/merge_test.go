package merge

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	data := Data{
		Values:    map[string]string{"NAME": `Ann <b>&"Co"`, "PRICE": "499", UnsubscribeURLAlias: "https://x.test/u?a=1&b=2"},
		Fallbacks: map[string]string{"PRODUCT": "item & co", "NAME": "ignored"},
	}
	for _, tc := range []struct {
		name, src string
		mode      Mode
		want      string
		missing   string
	}{
		{"plain text", "no variables {{ here }} {x}", HTML, "no variables {{ here }} {x}", ""},
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
			if tc.missing != "" {
				name, ok := IsMissing(err)
				if !ok || name != tc.missing || got != "" {
					t.Fatalf("got %q, %v; want missing %s and no output", got, err, tc.missing)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRenderBound(t *testing.T) {
	tpl, err := Parse(strings.Repeat("{{{A}}}", 1000))
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Values: map[string]string{"A": strings.Repeat("x", 1000)}, MaxLen: 999_999}
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

// FuzzParse checks that parsing never panics, that a parsed template
// renders in both modes once every name has a value, that rendering with
// all values given never reports a missing variable, and that a template
// without `{{{` renders as itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "plain", "{{{A}}}", "{{{A|b}}}", "x{{{ A |}}}y", "{{{", "}}}", "{{{{A}}}}",
		"{{{A}}}{{{B|<c>}}}", "{{{a.b_c}}}", "{{{|}}}", "{{{A|}}}}"} {
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
		values := map[string]string{}
		for _, n := range tpl.Names() {
			if !ValidName(n) {
				t.Fatalf("Parse(%q) gave invalid name %q", src, n)
			}
			values[n] = value
		}
		text, err := tpl.Render(Data{Values: values}, Text)
		if err != nil {
			t.Fatalf("Render(%q) text: %v", src, err)
		}
		h, err := tpl.Render(Data{Values: values}, HTML)
		if err != nil {
			t.Fatalf("Render(%q) html: %v", src, err)
		}
		if !strings.Contains(src, "{{{") && (text != src || h != src) {
			t.Fatalf("template without references changed: %q → %q / %q", src, text, h)
		}
		if utf8.ValidString(src) && utf8.ValidString(value) && !utf8.ValidString(text) {
			t.Fatalf("valid UTF-8 in, invalid out: %q", text)
		}
		if len(tpl.Names()) > 0 && len(values) > 0 {
			if _, err := tpl.Render(Data{}, Text); err == nil && !allInline(tpl) {
				t.Fatalf("Render(%q) without values succeeded", src)
			}
		}
		if strings.ContainsAny(value, "<>&") && strings.ContainsAny(h, "<>") {
			// Escaped values never bring markup: any '<' must come from the template.
			if strings.Count(h, "<") > strings.Count(src, "<") {
				t.Fatalf("html render of %q with %q has unescaped markup: %q", src, value, h)
			}
		}
	})
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
	d := Data{Values: map[string]string{"ORDER": "#1234", "PRODUCT": "Fish & Chips", "EMAIL": "a@b.test",
		UnsubscribeURL: "https://x.test/u?t=abc&e=1"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(d, HTML); err != nil {
			b.Fatal(err)
		}
	}
}
