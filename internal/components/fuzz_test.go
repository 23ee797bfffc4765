package components

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// checkHTML parses the HTML part as a browser would and checks what no
// document may produce, whatever its values: script elements, event-handler
// attributes, links other than http, https, mailto or a merge placeholder,
// images not on https.
func checkHTML(t testing.TB, s string) {
	t.Helper()
	if strings.Contains(strings.ToLower(s), "<script") {
		t.Fatalf("HTML contains <script:\n%s", s)
	}
	root, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("HTML does not parse: %v", err)
	}
	for n := range root.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		switch n.Data {
		case "script", "iframe", "object", "embed", "form", "style", "link", "base":
			t.Fatalf("HTML contains a <%s> element", n.Data)
		}
		for _, a := range n.Attr {
			key := strings.ToLower(a.Key)
			val := strings.ToLower(a.Val)
			switch {
			case strings.HasPrefix(key, "on"):
				t.Fatalf("<%s> has an event handler %s=%q", n.Data, a.Key, a.Val)
			case key == "href":
				if !strings.HasPrefix(val, "http://") && !strings.HasPrefix(val, "https://") &&
					!strings.HasPrefix(val, "mailto:") && !strings.HasPrefix(val, "{{{") {
					t.Fatalf("<%s> links to %q", n.Data, a.Val)
				}
			case key == "src":
				if !strings.HasPrefix(val, "https://") {
					t.Fatalf("<%s> loads %q", n.Data, a.Val)
				}
			case key == "style":
				if strings.Contains(val, "url(") || strings.Contains(val, "expression(") {
					t.Fatalf("<%s> has style %q", n.Data, a.Val)
				}
			}
		}
	}
}

// FuzzParseRender: Parse never panics, whatever it accepts Render renders,
// and the HTML is safe (checkHTML).
func FuzzParseRender(f *testing.F) {
	matches, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"blocks":[{"type":"text","runs":[{"text":"<script>","href":"{{{U}}}"}]}]}`))
	f.Add([]byte(`{"blocks":[{"type":"columns","columns":[[{"type":"button","label":"a","href":"mailto:a@b"}],[]]}]}`))
	f.Add([]byte(`{"settings":{"preview_text":"-->","lang":"de-CH"},"blocks":[{"type":"image","src":"https://a.test/x","alt":"<!--"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			if _, ok := err.(*FieldError); !ok {
				t.Fatalf("Parse error %T is not a *FieldError: %v", err, err)
			}
			return
		}
		h, _, err := Render(d)
		if err != nil {
			t.Fatalf("Parse accepted a document Render refuses: %v", err)
		}
		checkHTML(t, h)
	})
}

func BenchmarkRender(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "full.json"))
	if err != nil {
		b.Fatal(err)
	}
	d, err := Parse(src)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Render(d); err != nil {
			b.Fatal(err)
		}
	}
}
