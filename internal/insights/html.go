package insights

import (
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/publicsuffix"
)

// htmlBody is what the rules read of an HTML part.
type htmlBody struct {
	text   string   // visible text, whitespace collapsed
	images int      // <img> elements
	links  []string // href of <a> and <area> elements
}

func parseHTML(s string) htmlBody {
	var b htmlBody
	if s == "" {
		return b
	}
	z := html.NewTokenizer(strings.NewReader(s))
	var text strings.Builder
	skip := 0 // depth inside <script>, <style>, <head>'s <title>
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			b.text = strings.Join(strings.Fields(text.String()), " ")
			return b
		case html.TextToken:
			if skip == 0 {
				text.Write(z.Text())
				text.WriteByte(' ')
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch tag := string(name); tag {
			case "script", "style", "title":
				if tt == html.StartTagToken {
					skip++
				}
			case "img":
				b.images++
			case "a", "area":
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					if string(k) == "href" {
						b.links = append(b.links, strings.TrimSpace(string(v)))
					}
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "title":
				if skip > 0 {
					skip--
				}
			}
		}
	}
}

var textURL = regexp.MustCompile(`(?i)\bhttps?://[^\s<>"'()\[\]]+`)

// textLinks returns the http(s) URLs written in a text part.
func textLinks(s string) []string { return textURL.FindAllString(s, -1) }

// linkHost returns the lower-case host of an http(s) link; "" for other
// links (mailto:, tel:, anchors, relative ones).
func linkHost(link string) string {
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}

// registrable returns the registrable domain of host (eTLD+1: "a.b.co.uk"
// → "b.co.uk"), or host itself when it has none (an IP address, a public
// suffix).
func registrable(host string) string {
	if r, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return r
	}
	return host
}

// shortenerHosts are public URL shorteners.
var shortenerHosts = map[string]bool{
	"bit.ly": true, "bitly.com": true, "tinyurl.com": true, "goo.gl": true, "t.co": true, "ow.ly": true,
	"is.gd": true, "v.gd": true, "buff.ly": true, "rebrand.ly": true, "cutt.ly": true, "shorturl.at": true,
	"tiny.cc": true, "bl.ink": true, "t.ly": true, "s.id": true, "rb.gy": true, "lnkd.in": true,
	"soo.gd": true, "qr.ae": true, "adf.ly": true, "shorte.st": true, "tr.im": true, "cli.gs": true,
	"x.co": true, "mcaf.ee": true, "su.pr": true, "db.tt": true, "qr.net": true, "1url.com": true,
	"tiny.one": true, "rotf.lol": true, "short.io": true, "shorturl.com": true, "u.to": true, "clck.ru": true,
	"bit.do": true, "po.st": true, "ift.tt": true, "dlvr.it": true, "trib.al": true, "wp.me": true,
}

func isShortener(host string) bool {
	return shortenerHosts[strings.TrimPrefix(host, "www.")]
}
