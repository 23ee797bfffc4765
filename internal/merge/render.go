package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"strconv"
	"strings"
)

// Names returns the variables the template refers to outside {{#each}}
// blocks (references, and the paths of blocks), each once, in order of
// first use. Inside a loop a name may be a field of the item, so those
// are not listed.
func (t *Template) Names() []string {
	var out []string
	seen := map[string]bool{}
	var walk func([]*node)
	walk = func(list []*node) {
		for _, n := range list {
			if n.kind == literal {
				continue
			}
			if !seen[n.text] {
				seen[n.text] = true
				out = append(out, n.text)
			}
			if n.kind == cond {
				walk(n.body)
			}
			if n.kind != ref {
				walk(n.alt)
			}
		}
	}
	walk(t.nodes)
	return out
}

// HasInlineFallback reports whether every use of name outside {{#each}}
// blocks is a reference carrying a `|fallback`.
func (t *Template) HasInlineFallback(name string) bool {
	ok := true
	var walk func([]*node)
	walk = func(list []*node) {
		for _, n := range list {
			switch n.kind {
			case ref:
				if n.text == name && n.fallback == nil {
					ok = false
				}
			case cond, each:
				if n.text == name {
					ok = false
				}
				if n.kind == cond {
					walk(n.body)
				}
				walk(n.alt)
			}
		}
	}
	walk(t.nodes)
	return ok
}

// Data holds what a template is rendered with. A variable's value is, in
// order: Values[name]; the reference's inline fallback; Fallbacks[name].
// A path's value is found under its longest prefix that is a key (so a
// flat key "contact.first_name" works as well as an object "contact"),
// then walked into. The reserved unsubscribe variable is looked up under
// both of its names. Nil maps are empty.
//
// Values are what encoding/json decodes into any with UseNumber: string,
// json.Number, bool, nil, map[string]any and []any; float64 and int are
// accepted too.
type Data struct {
	Values    map[string]any
	Fallbacks map[string]any
	// MaxLen bounds the rendered output in bytes (a template repeating a
	// reference to a large value would otherwise multiply it); 0 means
	// no bound. Past it Render fails with ErrTooLarge.
	MaxLen int
}

// ErrTooLarge is the error of Render when the output would pass
// Data.MaxLen.
var ErrTooLarge = errors.New("rendered template too large")

// ErrTooComplex is the error of Render past MaxSteps.
var ErrTooComplex = errors.New("template takes too many steps to render (loops over long lists)")

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
// top-level variable without a value or fallback, ErrTooLarge or
// ErrTooComplex, and then returns "".
//
// A reference renders its value as text: strings as they are, numbers as
// given, booleans as true or false, null and a path that leads nowhere
// as nothing, objects and lists as compact JSON. Inside {{#each}} the
// item's fields come first, then the enclosing loops' items, then the
// variables; a name none of them has renders as nothing there.
func (t *Template) Render(d Data, mode Mode) (string, error) {
	r := renderer{d: d, mode: mode}
	if err := r.render(t.nodes); err != nil {
		return "", err
	}
	return r.b.String(), nil
}

type renderer struct {
	d      Data
	mode   Mode
	b      strings.Builder
	steps  int
	scopes []any // the items of the enclosing loops, innermost last
}

func (r *renderer) write(s string) error {
	if r.d.MaxLen > 0 && r.b.Len()+len(s) > r.d.MaxLen {
		return ErrTooLarge
	}
	r.b.WriteString(s)
	return nil
}

func (r *renderer) step() error {
	r.steps++
	if r.steps > MaxSteps {
		return ErrTooComplex
	}
	return nil
}

func (r *renderer) render(list []*node) error {
	for _, n := range list {
		if err := r.step(); err != nil {
			return err
		}
		var err error
		switch n.kind {
		case literal:
			err = r.write(n.text)
		case ref:
			err = r.reference(n)
		case cond:
			var v any
			if v, err = r.value(n.text); err == nil {
				if Truthy(v) {
					err = r.render(n.body)
				} else {
					err = r.render(n.alt)
				}
			}
		case each:
			err = r.loop(n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) loop(n *node) error {
	v, err := r.value(n.text)
	if err != nil {
		return err
	}
	items, _ := v.([]any)
	if len(items) == 0 {
		return r.render(n.alt)
	}
	for _, item := range items {
		if err := r.step(); err != nil {
			return err
		}
		r.scopes = append(r.scopes, item)
		err := r.render(n.body)
		r.scopes = r.scopes[:len(r.scopes)-1]
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) reference(n *node) error {
	v, ok := r.scoped(n.text)
	if !ok {
		v, ok = top(r.d.Values, n.text)
	}
	if (!ok || v == nil) && n.fallback != nil {
		return r.write(*n.fallback) // the template's own text: not escaped

	}
	if !ok {
		v, ok = top(r.d.Fallbacks, n.text)
	}
	if !ok && len(r.scopes) == 0 {
		return &MissingError{Name: n.text}
	}
	s := TextOf(v)
	if r.mode == HTML {
		s = html.EscapeString(s)
	}
	return r.write(s)
}

// value is the value of a block's path: nil when it leads nowhere inside
// a loop, a *MissingError when a top-level variable has no value or
// fallback.
func (r *renderer) value(path string) (any, error) {
	v, ok := r.scoped(path)
	if !ok {
		v, ok = top(r.d.Values, path)
	}
	if !ok {
		v, ok = top(r.d.Fallbacks, path)
	}
	if !ok && len(r.scopes) == 0 {
		return nil, &MissingError{Name: path}
	}
	return v, nil
}

// scoped finds path among the items of the enclosing loops: `this` is
// the innermost item, another head is a field of the innermost item that
// has it.
func (r *renderer) scoped(path string) (any, bool) {
	head, rest, _ := strings.Cut(path, ".")
	if head == This {
		if len(r.scopes) == 0 {
			return nil, false
		}
		return walk(r.scopes[len(r.scopes)-1], rest), true
	}
	for i := len(r.scopes) - 1; i >= 0; i-- {
		if m, ok := r.scopes[i].(map[string]any); ok {
			if v, ok := m[head]; ok {
				return walk(v, rest), true
			}
		}
	}
	return nil, false
}

// top finds path among variables m under its longest prefix (ending at
// a dot) that is a key, and walks the rest.
func top(m map[string]any, path string) (any, bool) {
	for end := len(path); end > 0; {
		if v, ok := lookup(m, path[:end]); ok {
			rest := ""
			if end < len(path) {
				rest = path[end+1:]
			}
			return walk(v, rest), true
		}
		end = strings.LastIndexByte(path[:end], '.')
	}
	return nil, false
}

func lookup(m map[string]any, name string) (any, bool) {
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
	return nil, false
}

// walk follows the dotted path rest from v: a segment is a key of an
// object or the index of a list item. A path that leads nowhere is nil.
func walk(v any, rest string) any {
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, ".")
		switch x := v.(type) {
		case map[string]any:
			v = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// Truthy is whether {{#if}} renders its body for v: false, null, "", a
// zero number and an empty list are falsy; everything else, an empty
// object included, is truthy (Handlebars' and Mustachio's rule).
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case float64:
		return x != 0
	case int:
		return x != 0
	case []any:
		return len(x) > 0
	}
	return true
}

// TextOf is v as a reference renders it: strings as they are, numbers as
// written, booleans as true or false, nil as nothing, objects and lists
// as compact JSON (keys sorted).
func TextOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
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

// Types are the types a template variable is declared with (Resend's).
var Types = []string{"string", "number", "boolean", "object", "list"}

// TypeOf is the declared type a value is of: one of Types, or "null".
func TypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number, float64, int:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "list"
	}
	return "object"
}

// Decode decodes one JSON value as Data holds values: numbers as
// json.Number, so that they render as written.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}
