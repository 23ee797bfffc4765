package mime

import "github.com/inbucket/html2text"

// TextFromHTML renders HTML as plain text for the text/plain alternative:
// block elements become line breaks, links become "text ( url )", list items
// start with "* ", script, style and head are dropped and entities are
// decoded. It uses github.com/inbucket/html2text, which parses with
// golang.org/x/net/html as a browser would. Lines end in "\n"; Build turns
// them into CRLF.
//
// The converter can only fail on a failing reader or table rendering, neither
// of which happens here; should it fail anyway, TextFromHTML returns "" and a
// message built with GenerateText has no text alternative.
func TextFromHTML(html string) string {
	text, err := html2text.FromString(html)
	if err != nil {
		return ""
	}
	return text
}
