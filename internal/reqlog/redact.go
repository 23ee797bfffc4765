package reqlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// MaxBody is the most of a request or response body the log keeps.
const MaxBody = 64 << 10

// redacted replaces the value of a secret field.
const redacted = "[redacted]"

// secretField reports whether a JSON field's value is a secret: passwords,
// tokens (the `token` of a created API key), signing secrets, keys.
func secretField(name string) bool {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "password"), strings.Contains(n, "secret"), strings.Contains(n, "token"),
		n == "authorization", n == "api_key", n == "apikey", n == "private_key", n == "key":
		return true
	}
	return false
}

// secretParam reports whether a URL query parameter is a secret: the
// signature of a signed download URL (data exports, received emails and
// their attachments), or a parameter named like a secret field.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	return n == "signature" || n == "sig" || secretField(n)
}

// redactURL returns s, a JSON string value, with the values of the
// secret query parameters (secretParam) of the URL it may be replaced by
// "[redacted]": a signed URL is as good as a key until it expires.
func redactURL(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	query, frag := s[q+1:], ""
	if i := strings.IndexByte(query, '#'); i >= 0 {
		query, frag = query[:i], query[i:]
	}
	params := strings.Split(query, "&")
	changed := false
	for i, p := range params {
		k, _, _ := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); err == nil && secretParam(name) {
			params[i], changed = k+"="+redacted, true
		}
	}
	if !changed {
		return s
	}
	return s[:q+1] + strings.Join(params, "&") + frag
}

// Body prepares a body for the log: a JSON body has its secret fields
// replaced by "[redacted]", the signatures of the signed URLs it holds too
// (redactURL), and the content of its attachments replaced by a note of
// their size; the result is cut at MaxBody bytes. A body that is not
// JSON is kept as text, cut at MaxBody (on a UTF-8 boundary), unless it names
// a secret field or is not UTF-8: then only its size is noted. An empty body
// is nil.
func Body(b []byte) *string {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if !mayNeedScrub(b) {
		if !utf8.Valid(b) {
			s := fmt.Sprintf("[%d bytes, not UTF-8 text]", len(b))
			return &s
		}
		s := truncate(b)
		return &s
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err == nil && !d.More() {
		v = scrub(v, false)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err == nil {
			b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		}
	} else {
		// Not JSON, yet it names something secret: it cannot be redacted
		// field by field, so it is not kept.
		s := fmt.Sprintf("[%d bytes that are not JSON and may hold secrets, not logged]", len(b))
		return &s
	}
	s := truncate(b)
	return &s
}

// scrubNeedles are the lower-cased names secretField and scrub act on; a
// body containing none of them is logged as it is, without decoding it.
var scrubNeedles = [][]byte{[]byte("password"), []byte("secret"), []byte("token"), []byte("authorization"),
	[]byte("api_key"), []byte("apikey"), []byte("private_key"), []byte(`"key"`), []byte("attachments"),
	[]byte("signature"), []byte("sig="), []byte("key=")}

// mayNeedScrub reports whether b might hold a field to redact or elide.
// It errs towards true (a needle in a value also matches); JSON escapes
// in field names are not looked through.
func mayNeedScrub(b []byte) bool {
	lower := bytes.ToLower(b)
	for _, n := range scrubNeedles {
		if bytes.Contains(lower, n) {
			return true
		}
	}
	return false
}

func truncate(b []byte) string {
	if len(b) <= MaxBody {
		return string(b)
	}
	cut := MaxBody
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut])
}

// scrub redacts secrets in v; inAttachments is true inside an
// `attachments` array, whose objects' `content` is elided.
func scrub(v any, inAttachments bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			switch {
			case secretField(k):
				t[k] = redacted
			case inAttachments && k == "content":
				t[k] = elided(val)
			default:
				t[k] = scrub(val, k == "attachments")
			}
		}
		return t
	case []any:
		for i := range t {
			t[i] = scrub(t[i], inAttachments)
		}
		return t
	case string:
		return redactURL(t)
	}
	return v
}

// elided describes attachment content without its bytes.
func elided(v any) string {
	switch t := v.(type) {
	case string:
		return fmt.Sprintf("[elided: %d characters]", len(t))
	case []any:
		return fmt.Sprintf("[elided: %d bytes]", len(t))
	case map[string]any: // a Node Buffer: {"type":"Buffer","data":[...]}
		if d, ok := t["data"].([]any); ok {
			return fmt.Sprintf("[elided: %d bytes]", len(d))
		}
	}
	return "[elided]"
}
