package received

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: any input parses without panicking, within the limits, into
// text fields PostgreSQL accepts (valid UTF-8, no NUL).
func FuzzParse(f *testing.F) {
	f.Add([]byte("From: a@example.org\r\nSubject: hi\r\n\r\nbody\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/html\r\n\r\n<p>\xff</p>\r\n--x\r\n" +
		"Content-Disposition: attachment; filename=\"=?utf-8?q?a=00b?=\"\r\n\r\nzz\r\n--x--\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := Parse(raw, Limits{MaxParts: 20, MaxDepth: 4})
		if err != nil {
			return
		}
		ok := func(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
		check := []string{e.From, e.Subject, e.MessageID}
		check = append(append(append(check, e.To...), e.Cc...), e.ReplyTo...)
		if e.Text != nil {
			check = append(check, *e.Text)
		}
		if e.HTML != nil {
			check = append(check, *e.HTML)
		}
		for k, v := range e.Headers {
			check = append(check, k, v)
		}
		for _, a := range e.Attachments {
			check = append(check, a.Filename, a.ContentType, a.ContentID)
		}
		for _, s := range check {
			if !ok(s) {
				t.Fatalf("a text field PostgreSQL refuses: %q", s)
			}
		}
		if len(e.Attachments) > 20 {
			t.Fatalf("%d attachments over 20 parts", len(e.Attachments))
		}
	})
}
