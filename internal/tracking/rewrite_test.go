package tracking

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	xhtml "golang.org/x/net/html"
)

// fakeLinks tracks link i as https://t.test/c/<i>.
func fakeLinks(i int, _ string) (string, error) { return fmt.Sprintf("https://t.test/c/%d", i), nil }

func TestTrackable(t *testing.T) {
	for href, want := range map[string]string{
		"https://example.test/a?b=1":     "https://example.test/a?b=1",
		"HTTP://Example.test":            "HTTP://Example.test",
		"  https://example.test/x \n ":   "https://example.test/x",
		"mailto:a@example.test":          "",
		"tel:+15551234":                  "",
		"#top":                           "",
		"/relative":                      "",
		"//example.test/scheme-less":     "",
		"javascript:alert(1)":            "",
		"ftp://example.test/f":           "",
		"https:opaque":                   "",
		"https://":                       "",
		"https://example.test/{{{var}}}": "",
		"https://example.test/\x7f":      "",
		"":                               "",
	} {
		got, ok := Trackable(href)
		require.Equal(t, want != "", ok, href)
		require.Equal(t, want, got, href)
	}
	_, ok := Trackable("https://example.test/" + strings.Repeat("a", MaxURLLength))
	require.False(t, ok, "too long")
}

func TestRewrite(t *testing.T) {
	const px = `<img src="https://t.test/o/P" width="1" height="1" alt="" ` +
		`style="display:block;width:1px;height:1px;border:0;margin:0;padding:0;" />`
	unsub := func(u string) bool { return strings.HasPrefix(u, "https://mail.test/unsubscribe/") }
	for _, tc := range []struct {
		name  string
		in    string
		want  string
		links []string
	}{
		{"document",
			`<!DOCTYPE html><html><head><title>Hi</title></head><body><p>Hello <a href="https://shop.test/a?x=1&amp;y=2" class="b">shop</a></p></body></html>`,
			`<!DOCTYPE html><html><head><title>Hi</title></head><body><p>Hello <a href="https://t.test/c/0" class="b">shop</a></p>` + px + `</body></html>`,
			[]string{"https://shop.test/a?x=1&y=2"}},
		{"fragment without body",
			`<p>Hi <A HREF='HTTPS://Shop.test/B'>b</A></p>`,
			`<p>Hi <a href="https://t.test/c/0">b</A></p>` + px,
			[]string{"HTTPS://Shop.test/B"}},
		{"html without body",
			`<html><p><a href=https://shop.test/u>u</a></p></html>`,
			`<html><p><a href="https://t.test/c/0">u</a></p>` + px + `</html>`,
			[]string{"https://shop.test/u"}},
		{"left alone",
			`<body><a href="mailto:a@b.test">m</a><a href="tel:1">t</a><a href="#x">x</a><a name="n">n</a>` +
				`<a href="https://mail.test/unsubscribe/TOKEN">u</a><a href="javascript:void(0)">j</a><a href=/rel>r</a></body>`,
			`<body><a href="mailto:a@b.test">m</a><a href="tel:1">t</a><a href="#x">x</a><a name="n">n</a>` +
				`<a href="https://mail.test/unsubscribe/TOKEN">u</a><a href="javascript:void(0)">j</a><a href=/rel>r</a>` + px + `</body>`,
			nil},
		{"comments, scripts, styles and text are not links",
			`<body><!-- <a href="https://c.test/">c</a> --><script>var s = '<a href="https://s.test/">';</script>` +
				`<style>a[href="https://st.test/"]{}</style><textarea><a href="https://ta.test/"></textarea>` +
				`<p>see https://text.test/ and &lt;a href="https://esc.test/"&gt;</p><a href="https://real.test/">r</a></body>`,
			`<body><!-- <a href="https://c.test/">c</a> --><script>var s = '<a href="https://s.test/">';</script>` +
				`<style>a[href="https://st.test/"]{}</style><textarea><a href="https://ta.test/"></textarea>` +
				`<p>see https://text.test/ and &lt;a href="https://esc.test/"&gt;</p><a href="https://t.test/c/0">r</a>` + px + `</body>`,
			[]string{"https://real.test/"}},
		{"two hrefs: the first is followed, the second dropped",
			`<a href="https://one.test/" href="https://two.test/" title='a "q"'>x</a>`,
			`<a href="https://t.test/c/0" title="a &#34;q&#34;">x</a>` + px,
			[]string{"https://one.test/"}},
		{"the last body end is used",
			`<body><p>&lt;/body&gt;</p><a href="https://a.test">a</a></body><!-- </body> --></body>tail`,
			`<body><p>&lt;/body&gt;</p><a href="https://t.test/c/0">a</a></body><!-- </body> -->` + px + `</body>tail`,
			[]string{"https://a.test"}},
		{"several links keep their order",
			`<a href="https://a.test/1">1</a><a href="https://a.test/2"/><a href="https://a.test/1">again</a>`,
			`<a href="https://t.test/c/0">1</a><a href="https://t.test/c/1"/><a href="https://t.test/c/2">again</a>` + px,
			[]string{"https://a.test/1", "https://a.test/2", "https://a.test/1"}},
		{"unterminated tag at the end is kept",
			`<p>x</p><a href="https://a.test/`,
			`<p>x</p><a href="https://a.test/` + px,
			nil},
		{"attribute values are escaped again",
			`<a href="https://a.test/?q=&quot;x&quot;&lt;" data-x="<>&amp;">x</a>`,
			`<a href="https://t.test/c/0" data-x="&lt;&gt;&amp;">x</a>` + px,
			[]string{`https://a.test/?q="x"<`}},
		{"empty", ``, px, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, links, err := Rewrite(tc.in, Options{Link: fakeLinks, Keep: unsub, Pixel: "https://t.test/o/P"})
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.links, links)
		})
	}
}

func TestRewriteNothingToDo(t *testing.T) {
	in := `<html><body><a href="https://a.test/">a</a></body></html>`
	got, links, err := Rewrite(in, Options{})
	require.NoError(t, err)
	require.Equal(t, in, got)
	require.Empty(t, links)

	got, links, err = Rewrite(in, Options{Pixel: "https://t.test/o/P"})
	require.NoError(t, err)
	require.Contains(t, got, `<a href="https://a.test/">a</a><img src="https://t.test/o/P"`)
	require.Empty(t, links)
}

func TestRewriteBoundsLinks(t *testing.T) {
	var b strings.Builder
	for i := 0; i < MaxLinks+5; i++ {
		fmt.Fprintf(&b, `<a href="https://a.test/%d">x</a>`, i)
	}
	got, links, err := Rewrite(b.String(), Options{Link: fakeLinks})
	require.NoError(t, err)
	require.Len(t, links, MaxLinks)
	require.Contains(t, got, fmt.Sprintf(`<a href="https://a.test/%d">`, MaxLinks))
	require.NotContains(t, got, fmt.Sprintf(`<a href="https://a.test/%d">`, MaxLinks-1))
}

func TestRewriteLinkError(t *testing.T) {
	_, _, err := Rewrite(`<a href="https://a.test/">x</a>`, Options{Link: func(int, string) (string, error) {
		return "", fmt.Errorf("boom")
	}})
	require.ErrorContains(t, err, "boom")
}

func TestLinksTrack(t *testing.T) {
	s := testSealer(t, 1)
	l := Links{Host: "links.example.test", Sealer: s}
	team, email := uuid.New(), uuid.New()
	body := `<html><body><a href="https://shop.test/x">x</a><a href="https://unsub.test/u">u</a></body></html>`
	keep := func(u string) bool { return u == "https://unsub.test/u" }

	got, links, err := l.Track(body, team, email, 2, true, true, keep)
	require.NoError(t, err)
	require.Equal(t, []string{"https://shop.test/x"}, links)
	hrefs, imgs := parseLinks(t, got)
	require.Len(t, hrefs, 2)
	require.Equal(t, "https://unsub.test/u", hrefs[1])
	tok, err := s.Open(strings.TrimPrefix(hrefs[0], "https://links.example.test"+ClickPath))
	require.NoError(t, err)
	require.Equal(t, Token{Kind: Click, TeamID: team, EmailID: email, Recipient: 2, URL: "https://shop.test/x",
		Host: "links.example.test"}, tok)
	require.Len(t, imgs, 1)
	tok, err = s.Open(strings.TrimPrefix(imgs[0], "https://links.example.test"+OpenPath))
	require.NoError(t, err)
	require.Equal(t, Token{Kind: Open, TeamID: team, EmailID: email, Recipient: 2, Host: "links.example.test"}, tok)

	got, links, err = l.Track(body, team, email, 0, true, false, keep)
	require.NoError(t, err)
	require.Empty(t, links)
	hrefs, imgs = parseLinks(t, got)
	require.Equal(t, []string{"https://shop.test/x", "https://unsub.test/u"}, hrefs)
	require.Len(t, imgs, 1)

	got, _, err = l.Track(body, team, email, 0, false, true, keep)
	require.NoError(t, err)
	_, imgs = parseLinks(t, got)
	require.Empty(t, imgs)
}

// parseLinks returns the hrefs of the <a> and the srcs of the <img> of an
// HTML document, as a browser parses it.
func parseLinks(t testing.TB, doc string) (hrefs, imgs []string) {
	t.Helper()
	n, err := xhtml.Parse(strings.NewReader(doc))
	require.NoError(t, err)
	for d := range n.Descendants() {
		if d.Type != xhtml.ElementNode {
			continue
		}
		for _, a := range d.Attr {
			switch {
			case d.Data == "a" && a.Key == "href":
				hrefs = append(hrefs, a.Val)
			case d.Data == "img" && a.Key == "src":
				imgs = append(imgs, a.Val)
			}
		}
	}
	return hrefs, imgs
}

// FuzzRewrite checks, for any body, that rewriting without a pixel and
// with links kept changes nothing; and that with every link tracked, a
// browser finds no trackable link left untracked that it found before
// (the rewritten body parses with the same number of <a href>), every
// tracked href is a tracker's, and the pixel is there.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		`<html><body><a href="https://a.test/">a</a></body></html>`,
		`<a href=https://a.test/ href=https://b.test/>`,
		`<!-- <a href="https://x.test"> --><a href='http://y.test'>`,
		`<script><a href="https://s.test"></script><a href="https://t.test">`,
		`<a href="https://a.test/"`,
		`<body></body></body><A HREF="HTTPS://A.TEST">`,
		`<svg><a href="https://svg.test/">s</a></svg><math><a xlink:href="https://m.test">`,
		`<plaintext><a href="https://p.test/">`,
		"<a href=\"https://a.test/\x00\">",
		`<table><a href="https://a.test/"><tr><td>x</table>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		same, links, err := Rewrite(body, Options{Link: fakeLinks, Keep: func(string) bool { return true }})
		require.NoError(t, err)
		require.Equal(t, body, same)
		require.Empty(t, links)

		got, links, err := Rewrite(body, Options{Link: fakeLinks, Pixel: "https://t.test/o/P"})
		require.NoError(t, err)
		require.Contains(t, got, PixelHTML("https://t.test/o/P"))
		for i := range links {
			require.Contains(t, got, fmt.Sprintf(`href="https://t.test/c/%d"`, i))
		}
		require.LessOrEqual(t, len(links), MaxLinks)
	})
}
