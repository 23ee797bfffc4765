package mime

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextFromHTML(t *testing.T) {
	tests := []struct {
		name, html, want string
	}{
		{"empty", "", ""},
		{"plain text", "hello", "hello"},
		{"link", `<p>See <a href="https://example.com/a?b=1&amp;c=2">the docs</a>.</p>`, "See the docs ( https://example.com/a?b=1&c=2 )."},
		{"link showing its url", `<a href="https://example.com">https://example.com</a>`, "https://example.com"},
		{"mailto link", `<a href="mailto:help@example.com">write to us</a>`, "write to us ( help@example.com )"},
		{"paragraphs with attributes", `<p class="a" style="margin:0">one</p><p style="x">two</p>`, "one\n\ntwo"},
		{"divs", `<div>one</div><div>two</div>`, "one\ntwo"},
		{"line breaks", `a<br>b<br/>c<br />d`, "a\nb\nc\nd"},
		{"table rows", `<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>`, "a b c"},
		{"list", `<ul><li>one</li><li>two</li></ul>`, "* one\n* two"},
		{"heading", `<h2>Title</h2><p>body</p>`, "-----\nTitle\n-----\n\nbody"},
		{"script, style and head dropped", `<html><head><title>T</title><style>p{color:red}</style></head><body><script>if (a<b && c>d) alert(1)</script>kept</body></html>`, "kept"},
		{"entities", `caf&eacute; &amp; cr&#232;me &#x2014; 5&nbsp;&euro; &lt;b&gt;`, "café & crème — 5\u00a0€ <b>"},
		{"whitespace collapsed", "a\n   b\t\tc", "a b c"},
		{"image without text", `<img src="cid:logo" alt="Logo">`, ""},
		{"unclosed tags", `<p>one<p>two<b>bold`, "one\n\ntwo *bold*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, TextFromHTML(tt.html))
		})
	}
}
