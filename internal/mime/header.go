package mime

import (
	"fmt"
	"sort"
	"strings"

	"github.com/emersion/go-message"
)

// field is a header field whose value is already encoded (RFC 2047,
// RFC 2231) but not yet folded.
type field struct {
	name, value string
}

// fieldList is a header in the order its fields are written.
type fieldList []field

// header returns a go-message header that writes the fields in order, with
// the names spelled as given rather than in Go's canonical form
// ("Message-ID", not "Message-Id"; RFC 5322 §1.2.2 makes case irrelevant to
// readers, but it is what people and tests expect) and folded by foldField.
func (fl fieldList) header() (message.Header, error) {
	var h message.Header
	// go-message keeps fields in reverse order: each one added is written
	// above the ones before it.
	for i := len(fl) - 1; i >= 0; i-- {
		raw, err := foldField(fl[i].name, fl[i].value)
		if err != nil {
			return message.Header{}, err
		}
		h.AddRaw(raw)
	}
	return h, nil
}

const (
	// RFC 5322 §2.1.1 and RFC 2047 §2: lines of header fields holding
	// encoded-words are at most 76 characters.
	foldLen = 76
	// RFC 5322 §2.1.1: no line is longer than 998 characters.
	maxLineLen = 998
)

// foldField returns "name: value\r\n" folded (RFC 5322 §2.2.3) by inserting
// CRLF before a space: the last one that keeps the line within 76
// characters, else the first one after. Only single spaces between visible
// characters are used, because readers such as go-message and net/mail
// unfold by joining lines with one space, which then restores the value
// exactly; no line is left holding only whitespace (RFC 5322 §3.2.2). When a
// stretch without such a space passes 998 characters it is broken with CRLF
// and a space, the one fold that changes the unfolded value.
//
// The name must be RFC 5322 §3.6.8 ftext and the value must not contain CR
// or LF.
func foldField(name, value string) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < '!' || c > '~' || c == ':' {
			return nil, fmt.Errorf("invalid header name %q", name)
		}
	}
	if strings.ContainsAny(value, "\r\n") {
		return nil, fmt.Errorf("header %s: value contains CR or LF", name)
	}

	s := name + ": " + value
	out := make([]byte, 0, len(s)+len(s)/foldLen*3+2)
	for len(s) > foldLen {
		cut := foldPoint(s)
		if cut < 0 && len(s) <= maxLineLen {
			break
		}
		if cut < 0 || cut > maxLineLen {
			// A stretch with no usable space: break it and start the next
			// line with the space that folding needs.
			out = append(out, s[:maxLineLen]...)
			out = append(out, "\r\n"...)
			s = " " + s[maxLineLen:]
			continue
		}
		out = append(out, s[:cut]...)
		out = append(out, "\r\n"...)
		s = s[cut:]
	}
	out = append(out, s...)
	out = append(out, "\r\n"...)
	return out, nil
}

// foldPoint returns the index of the space before which s, the rest of a
// field starting a new line, is best folded, or -1 when it has none.
func foldPoint(s string) int {
	best := -1
	for i := 1; i < len(s)-1; i++ {
		if s[i] != ' ' || isWSP(s[i-1]) || isWSP(s[i+1]) {
			continue
		}
		if i > foldLen {
			if best < 0 {
				best = i
			}
			return best
		}
		best = i
	}
	return best
}

func isWSP(c byte) bool {
	return c == ' ' || c == '\t'
}

// param is a MIME parameter (RFC 2045 §5.1).
type param struct {
	key, value string
}

// sortedParams returns m as params in key order, for deterministic output.
func sortedParams(m map[string]string) []param {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ps := make([]param, len(keys))
	for i, k := range keys {
		ps[i] = param{k, m[k]}
	}
	return ps
}

// maxParamLen bounds the length of one written parameter, so that a header
// folds at the "; " between parameters within 76 characters.
const maxParamLen = 60

// formatMediaType formats a Content-Type or Content-Disposition value with
// its parameters in the given order. Short printable ASCII values are written
// as tokens or quoted strings (RFC 2045 §5.1); others, such as non-ASCII
// filenames, use RFC 2231 §4 charset encoding, split into RFC 2231 §3
// continuations when long so that no line grows past the folding limits.
func formatMediaType(value string, params []param) string {
	var b strings.Builder
	b.WriteString(value)
	for _, p := range params {
		b.WriteString("; ")
		writeParam(&b, p.key, p.value)
	}
	return b.String()
}

func writeParam(b *strings.Builder, key, value string) {
	switch {
	case value != "" && len(key)+len(value) < maxParamLen && strings.IndexFunc(value, notTokenChar) < 0:
		b.WriteString(key + "=" + value)
		return
	case len(key)+len(value) < maxParamLen && strings.IndexFunc(value, notPrintable) < 0:
		b.WriteString(key + `="`)
		for i := 0; i < len(value); i++ {
			if value[i] == '"' || value[i] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(value[i])
		}
		b.WriteByte('"')
		return
	}

	// RFC 2231 §4: ext-value = charset "'" [language] "'" percent-encoded
	// octets, in sections of at most maxParamLen characters that never split
	// a %XX triplet.
	var sections []string
	cur := "utf-8''"
	for i := 0; i < len(value); i++ {
		enc := string(value[i])
		if !isAttributeChar(value[i]) {
			enc = fmt.Sprintf("%%%02X", value[i])
		}
		if len(cur)+len(enc) > maxParamLen-len(key)-4 {
			sections = append(sections, cur)
			cur = ""
		}
		cur += enc
	}
	sections = append(sections, cur)
	if len(sections) == 1 {
		b.WriteString(key + "*=" + sections[0])
		return
	}
	for i, s := range sections {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(b, "%s*%d*=%s", key, i, s)
	}
}

// tspecials are the RFC 2045 §5.1 characters that end a token.
const tspecials = `()<>@,;:\"/[]?=`

func notTokenChar(r rune) bool {
	return r <= ' ' || r >= 0x7f || strings.ContainsRune(tspecials, r)
}

func notPrintable(r rune) bool {
	return r < ' ' || r >= 0x7f
}

// isAttributeChar reports whether c may appear unencoded in an RFC 2231
// extended value (RFC 2231 §7 attribute-char).
func isAttributeChar(c byte) bool {
	return c > ' ' && c < 0x7f && c != '*' && c != '\'' && c != '%' && !strings.ContainsRune(tspecials, rune(c))
}
