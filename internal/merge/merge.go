// Package merge implements mail merge with Resend's triple-brace template
// syntax: `{{{NAME}}}` is replaced by the value of the variable NAME and
// `{{{NAME|fallback}}}` by the value or, when none is given, the literal
// fallback. Values are HTML-escaped when rendered into HTML and inserted
// as they are into text and subjects. A variable with neither a value nor
// a fallback is an error naming it: a template renders completely or not
// at all. The package is pure: it knows nothing of contacts, teams or the
// store; callers pass every value, including the reserved ones.
package merge

import (
	"errors"
	"fmt"
	"html"
	"strings"
)

// Reserved variable names: filled from the recipient (its contact's
// names, the one `to` address) and the unsubscribe link, never
// declared by a template. UnsubscribeURL is Resend's spelling in its
// broadcast documentation; UnsubscribeURLAlias is accepted as the same
// variable.
const (
	FirstName           = "FIRST_NAME"
	LastName            = "LAST_NAME"
	Email               = "EMAIL"
	UnsubscribeURL      = "RESEND_UNSUBSCRIBE_URL"
	UnsubscribeURLAlias = "UNSUBSCRIBE_URL"
)

// IsReserved reports whether name is one of the reserved variables, which
// a template may use without declaring and may not declare.
func IsReserved(name string) bool {
	switch name {
	case FirstName, LastName, Email, UnsubscribeURL, UnsubscribeURLAlias:
		return true
	}
	return false
}

// MaxNameLength bounds a variable name.
const MaxNameLength = 100

const (
	openDelim  = "{{{"
	closeDelim = "}}}"
)

// Template is a parsed template: literal text and variable references.
// The zero Template renders as "".
type Template struct {
	parts []part
}

type part struct {
	literal  string // when name == ""
	name     string
	fallback *string // the inline fallback after '|', nil when absent
}

// SyntaxError is a malformed template: an unterminated `{{{` or a
// reference whose name is not a variable name.
type SyntaxError struct {
	Offset int // byte offset of the `{{{` at fault
	Reason string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("at byte %d: %s", e.Offset, e.Reason)
}

// MissingError is a variable that has neither a value nor a fallback.
type MissingError struct{ Name string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("missing value for variable %s", e.Name)
}

// ValidName reports whether name can be a variable: 1 to MaxNameLength
// ASCII letters, digits, underscores and dots, not starting with a digit
// or a dot.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		case (c >= '0' && c <= '9') || c == '.':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Parse parses src. Text outside `{{{ … }}}` is literal, braces included
// (`{{name}}` is not a reference). Inside, the name may be surrounded by
// spaces and is followed by an optional `|fallback`, taken as written up
// to the closing `}}}`. Errors are *SyntaxError.
func Parse(src string) (*Template, error) {
	t := &Template{}
	rest, offset := src, 0
	for {
		i := strings.Index(rest, openDelim)
		if i < 0 {
			t.addLiteral(rest)
			return t, nil
		}
		t.addLiteral(rest[:i])
		start := offset + i
		body := rest[i+len(openDelim):]
		j := strings.Index(body, closeDelim)
		if j < 0 {
			return nil, &SyntaxError{Offset: start, Reason: "`{{{` without a closing `}}}`"}
		}
		inner := body[:j]
		p := part{}
		name := inner
		if k := strings.IndexByte(inner, '|'); k >= 0 {
			name = inner[:k]
			fb := inner[k+1:]
			p.fallback = &fb
		}
		p.name = strings.TrimSpace(name)
		if !ValidName(p.name) {
			return nil, &SyntaxError{Offset: start, Reason: fmt.Sprintf("%q is not a variable name", truncate(p.name, 40))}
		}
		t.parts = append(t.parts, p)
		consumed := i + len(openDelim) + j + len(closeDelim)
		rest = rest[consumed:]
		offset += consumed
	}
}

func (t *Template) addLiteral(s string) {
	if s == "" {
		return
	}
	if n := len(t.parts); n > 0 && t.parts[n-1].name == "" {
		t.parts[n-1].literal += s
		return
	}
	t.parts = append(t.parts, part{literal: s})
}

// Names returns the variables the template refers to, each once, in
// order of first use.
func (t *Template) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range t.parts {
		if p.name != "" && !seen[p.name] {
			seen[p.name] = true
			out = append(out, p.name)
		}
	}
	return out
}

// HasInlineFallback reports whether every reference to name in t carries
// a `|fallback`.
func (t *Template) HasInlineFallback(name string) bool {
	for _, p := range t.parts {
		if p.name == name && p.fallback == nil {
			return false
		}
	}
	return true
}

// Data holds what a template is rendered with. A variable's value is, in
// order: Values[name]; the reference's inline fallback; Fallbacks[name].
// The reserved unsubscribe variable is looked up under both of its names.
// Nil maps are empty.
type Data struct {
	Values    map[string]string
	Fallbacks map[string]string
	// MaxLen bounds the rendered output in bytes (a template repeating a
	// reference to a large value would otherwise multiply it); 0 means
	// no bound. Past it Render fails with ErrTooLarge.
	MaxLen int
}

// ErrTooLarge is the error of Render when the output would pass
// Data.MaxLen.
var ErrTooLarge = errors.New("rendered template too large")

// Mode says how values are inserted.
type Mode int

const (
	// Text inserts values as they are: plain-text bodies and subjects.
	Text Mode = iota
	// HTML escapes values (and declared fallbacks) for HTML text and
	// attribute contexts. Inline fallbacks are part of the template's
	// own HTML and are inserted as written.
	HTML
)

// Render renders t. It fails with a *MissingError naming the first
// variable without a value or fallback, or with ErrTooLarge, and then
// returns "".
func (t *Template) Render(d Data, mode Mode) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.name == "" {
			if d.MaxLen > 0 && b.Len()+len(p.literal) > d.MaxLen {
				return "", ErrTooLarge
			}
			b.WriteString(p.literal)
			continue
		}
		v, ok := lookup(d.Values, p.name)
		inline := false
		if !ok && p.fallback != nil {
			v, ok, inline = *p.fallback, true, true
		}
		if !ok {
			v, ok = lookup(d.Fallbacks, p.name)
		}
		if !ok {
			return "", &MissingError{Name: p.name}
		}
		if mode == HTML && !inline {
			v = html.EscapeString(v)
		}
		if d.MaxLen > 0 && b.Len()+len(v) > d.MaxLen {
			return "", ErrTooLarge
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func lookup(m map[string]string, name string) (string, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	switch name {
	case UnsubscribeURL:
		v, ok := m[UnsubscribeURLAlias]
		return v, ok
	case UnsubscribeURLAlias:
		v, ok := m[UnsubscribeURL]
		return v, ok
	}
	return "", false
}

// RenderString parses and renders src in one step.
func RenderString(src string, d Data, mode Mode) (string, error) {
	t, err := Parse(src)
	if err != nil {
		return "", err
	}
	return t.Render(d, mode)
}

// IsMissing returns the name of the missing variable if err is a
// *MissingError.
func IsMissing(err error) (string, bool) {
	var m *MissingError
	if errors.As(err, &m) {
		return m.Name, true
	}
	return "", false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
