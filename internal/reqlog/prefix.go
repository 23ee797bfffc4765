package reqlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Prefix prepares the first bytes of a body too large to keep whole (total
// bytes in all) for the log, redacted like Body: a JSON prefix is re-read
// token by token, the values of secret fields become "[redacted]" and
// attachment contents "[elided]", and it ends at the last whole token
// before the cut, so no part of a secret cut in half is kept. A prefix
// that is not JSON is kept as text unless it names a secret field or is
// not UTF-8, as in Body. The result is at most MaxBody bytes.
func Prefix(b []byte, total int) *string {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if len(b) > MaxBody {
		b = b[:MaxBody]
	}
	if !mayNeedScrub(b) {
		// Nothing to redact: the prefix as it is, without the rune the
		// cut may have split.
		b = trimPartialRune(b)
		if !utf8.Valid(b) {
			s := fmt.Sprintf("[%d bytes, not UTF-8 text]", total)
			return &s
		}
		s := string(b)
		return &s
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); t[0] == '{' || t[0] == '[' {
		if s, ok := redactPrefix(b); ok {
			return &s
		}
	}
	s := fmt.Sprintf("[%d bytes that are not JSON and may hold secrets, not logged]", total)
	return &s
}

// redactPrefix re-encodes the JSON tokens of a cut body with secrets
// redacted; ok is false when b is not the start of a JSON value.
func redactPrefix(b []byte) (string, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	w := &prefixWriter{}
	for {
		tok, err := d.Token()
		if err != nil {
			// The cut ends the prefix; anything else means it was not
			// JSON after all.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return truncate([]byte(w.out.String())), true
			}
			return "", false
		}
		if !w.token(d, tok) {
			return truncate([]byte(w.out.String())), true
		}
	}
}

// frame is one open object or array of the prefix being re-encoded.
type frame struct {
	object bool
	n      int  // members or elements written
	key    bool // object: the next token is a key
	// inAttachments: this array is an `attachments` value, or this object
	// is one of its elements.
	inAttachments bool
}

type prefixWriter struct {
	out   strings.Builder
	stack []frame
	// pending is the value action decided by the key just read.
	pending string // "", "redact" or "elide"
	// attachmentsNext: the value about to open is an `attachments` array.
	attachmentsNext bool
}

// token writes one token; false ends the prefix (a value being skipped
// was cut).
func (w *prefixWriter) token(d *json.Decoder, tok json.Token) bool {
	top := len(w.stack) - 1
	if delim, ok := tok.(json.Delim); ok && (delim == '}' || delim == ']') {
		w.out.WriteByte(byte(delim))
		w.stack = w.stack[:top]
		w.valueDone()
		return true
	}
	if top >= 0 && w.stack[top].object && w.stack[top].key {
		key, _ := tok.(string)
		if w.stack[top].n > 0 {
			w.out.WriteByte(',')
		}
		w.writeJSON(key)
		w.out.WriteByte(':')
		w.stack[top].key = false
		inAtt := w.stack[top].inAttachments
		switch {
		case secretField(key):
			w.pending = "redact"
		case inAtt && key == "content":
			w.pending = "elide"
		default:
			w.attachmentsNext = key == "attachments"
		}
		return true
	}
	// A value: an array element needs its comma.
	if top >= 0 && !w.stack[top].object && w.stack[top].n > 0 {
		w.out.WriteByte(',')
	}
	if w.pending != "" {
		action := w.pending
		w.pending = ""
		if delim, ok := tok.(json.Delim); ok && (delim == '{' || delim == '[') {
			if !skip(d) {
				return false
			}
		}
		if action == "redact" {
			w.writeJSON(redacted)
		} else {
			w.writeJSON("[elided]")
		}
		w.valueDone()
		return true
	}
	switch t := tok.(type) {
	case json.Delim: // { or [
		inAtt := false
		if t == '[' {
			inAtt = w.attachmentsNext
		} else if top >= 0 && !w.stack[top].object {
			inAtt = w.stack[top].inAttachments
		}
		w.attachmentsNext = false
		w.out.WriteByte(byte(t))
		w.stack = append(w.stack, frame{object: t == '{', key: t == '{', inAttachments: inAtt})
	case json.Number:
		w.attachmentsNext = false
		w.out.WriteString(t.String())
		w.valueDone()
	case string:
		w.attachmentsNext = false
		w.writeJSON(redactURL(t))
		w.valueDone()
	default:
		w.attachmentsNext = false
		w.writeJSON(t)
		w.valueDone()
	}
	return true
}

// valueDone counts a finished value in its container.
func (w *prefixWriter) valueDone() {
	if top := len(w.stack) - 1; top >= 0 {
		w.stack[top].n++
		if w.stack[top].object {
			w.stack[top].key = true
		}
	}
}

func (w *prefixWriter) writeJSON(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	w.out.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// skip reads the rest of an object or array whose opening delimiter was
// just read; false when the input ends first.
func skip(d *json.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if delim, ok := tok.(json.Delim); ok {
			switch delim {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
	}
	return true
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRune(b); len(b) == 0 || r != utf8.RuneError || size != 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}
