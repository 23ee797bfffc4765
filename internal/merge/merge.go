// Package merge implements mail merge: Resend's triple-brace references,
// `{{{NAME}}}` and `{{{NAME|fallback}}}`, and, where Resend documents
// nothing, the blocks of Postmark's Mustachio: `{{#each LIST}}…{{/each}}`,
// `{{#if VALUE}}…{{else}}…{{/if}}`, double-brace references `{{NAME}}`,
// dot paths into objects and `{{this}}` for a list's item. The grammar
// is spelled out in Parse. Values are typed as JSON values are (strings,
// numbers, booleans, objects, lists); they are HTML-escaped when rendered
// into HTML and inserted as they are into text and subjects. A top-level
// variable with neither a value nor a fallback is an error naming it: a
// template renders completely or not at all. Rendering is bounded in
// output (Data.MaxLen) and in work (MaxSteps), so that no template and no
// value can make it run away. The package is pure: it knows nothing of
// contacts, teams or the store; callers pass every value, including the
// reserved ones.
package merge

import (
	"fmt"
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
	// This is a list's item inside {{#each}}; Resend reserves the name.
	This = "this"
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

// Limits of a template.
const (
	// MaxNameLength bounds a variable name or path.
	MaxNameLength = 100
	// MaxDepth bounds how deeply blocks nest.
	MaxDepth = 16
	// MaxSteps bounds the work of one Render: every part rendered and
	// every loop pass counts one step (loops within loops over long lists
	// could otherwise spin without writing anything).
	MaxSteps = 1_000_000
)

// Template is a parsed template: literal text, references and blocks.
// The zero Template renders as "".
type Template struct {
	nodes []*node
}

type kind uint8

const (
	literal kind = iota
	ref
	each
	cond
)

type node struct {
	kind     kind
	text     string  // literal text; the path of a ref, each or cond
	fallback *string // a ref's inline fallback after '|', nil when absent
	body     []*node // each, cond
	alt      []*node // after {{else}}
}

// SyntaxError is a malformed template: an unterminated `{{{`, a reference
// whose name is not a variable name, an unknown or unbalanced block tag.
type SyntaxError struct {
	Offset int // byte offset of the tag at fault
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

// ValidName reports whether name can be a variable or a path: 1 to
// MaxNameLength ASCII letters, digits, underscores and dots, not starting
// with a digit or a dot.
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

// Head is the first segment of a path: "order" of "order.total".
func Head(path string) string {
	h, _, _ := strings.Cut(path, ".")
	return h
}

// Parse parses src. The grammar:
//
//   - `{{{PATH}}}` and `{{{PATH|fallback}}}` are references; the fallback
//     is taken as written up to the closing `}}}`. A `{{{` without its
//     `}}}`, or with something other than a path inside, is an error.
//   - `{{PATH}}` and `{{PATH|fallback}}` are the same references.
//   - `{{#each PATH}}…{{else}}…{{/each}}` repeats its body for each item
//     of the list PATH (the optional else part renders when it is empty);
//     `{{#if PATH}}…{{else}}…{{/if}}` renders its body when PATH is
//     truthy, else the else part. Blocks nest up to MaxDepth.
//   - Any other `{{…}}` is literal text, except that a tag starting with
//     `#` or `/` must be one of the above.
//
// A PATH is a name (see ValidName) whose dots walk into objects and, by
// a number, into lists: `order.items.0.name`. Inside {{#each}}, `this`
// is the item and `this.NAME` its field. Spaces around a tag's contents
// are ignored. Errors are *SyntaxError.
func Parse(src string) (*Template, error) {
	p := parser{src: src}
	return p.parse()
}

type parser struct {
	src   string
	root  []*node
	stack []*node // open blocks, innermost last
	inAlt []bool  // whether each open block is past its {{else}}
	opens []int   // offsets of the open blocks' tags
}

func (p *parser) eachDepth() int {
	n := 0
	for _, b := range p.stack {
		if b.kind == each {
			n++
		}
	}
	return n
}

func (p *parser) add(n *node) {
	list := &p.root
	if k := len(p.stack); k > 0 {
		if p.inAlt[k-1] {
			list = &p.stack[k-1].alt
		} else {
			list = &p.stack[k-1].body
		}
	}
	if n.kind == literal {
		if n.text == "" {
			return
		}
		if l := len(*list); l > 0 && (*list)[l-1].kind == literal {
			(*list)[l-1].text += n.text
			return
		}
	}
	*list = append(*list, n)
}

func (p *parser) parse() (*Template, error) {
	src := p.src
	i := 0
	for i < len(src) {
		j := strings.Index(src[i:], "{{")
		if j < 0 {
			break
		}
		pos := i + j
		if strings.HasPrefix(src[pos:], "{{{") {
			k := strings.Index(src[pos+3:], "}}}")
			if k < 0 {
				return nil, &SyntaxError{Offset: pos, Reason: "`{{{` without a closing `}}}`"}
			}
			n, err := p.reference(src[pos+3:pos+3+k], pos)
			if err != nil {
				return nil, err
			}
			p.add(&node{kind: literal, text: src[i:pos]})
			p.add(n)
			i = pos + 3 + k + 3
			continue
		}
		k := strings.Index(src[pos+2:], "}}")
		if k < 0 {
			if t := strings.Index(src[pos:], "{{{"); t >= 0 {
				return nil, &SyntaxError{Offset: pos + t, Reason: "`{{{` without a closing `}}}`"}
			}
			break
		}
		inner := strings.TrimSpace(src[pos+2 : pos+2+k])
		end := pos + 2 + k + 2
		switch {
		case strings.HasPrefix(inner, "#"):
			n, err := p.open(inner, pos)
			if err != nil {
				return nil, err
			}
			p.add(&node{kind: literal, text: src[i:pos]})
			p.add(n)
			p.stack, p.inAlt, p.opens = append(p.stack, n), append(p.inAlt, false), append(p.opens, pos)
		case strings.HasPrefix(inner, "/"):
			p.add(&node{kind: literal, text: src[i:pos]})
			if err := p.close(inner, pos); err != nil {
				return nil, err
			}
		case inner == "else":
			p.add(&node{kind: literal, text: src[i:pos]})
			k := len(p.stack)
			if k == 0 || p.inAlt[k-1] {
				return nil, &SyntaxError{Offset: pos, Reason: "`{{else}}` outside an {{#if}} or {{#each}} block, or twice in one"}
			}
			p.inAlt[k-1] = true
		default:
			n, err := p.reference(inner, pos)
			if err != nil && ValidName(n.text) {
				return nil, err // `this` outside a loop
			}
			if err != nil {
				// Not a reference: the braces are text, as in a template
				// written before double braces meant anything.
				p.add(&node{kind: literal, text: src[i : pos+2]})
				i = pos + 2
				continue
			}
			p.add(&node{kind: literal, text: src[i:pos]})
			p.add(n)
		}
		i = end
	}
	if len(p.stack) > 0 {
		k := len(p.stack) - 1
		return nil, &SyntaxError{Offset: p.opens[k], Reason: fmt.Sprintf("{{#%s}} is not closed", tagName(p.stack[k].kind))}
	}
	p.add(&node{kind: literal, text: src[i:]})
	return &Template{nodes: p.root}, nil
}

func tagName(k kind) string {
	if k == each {
		return "each"
	}
	return "if"
}

// reference parses the inside of a reference: a path and an optional
// fallback. On error the node is returned too, for its path.
func (p *parser) reference(inner string, pos int) (*node, error) {
	n := &node{kind: ref}
	name := inner
	if k := strings.IndexByte(inner, '|'); k >= 0 {
		name = inner[:k]
		fb := inner[k+1:]
		n.fallback = &fb
	}
	n.text = strings.TrimSpace(name)
	if err := p.checkPath(n.text, pos); err != nil {
		return n, err
	}
	return n, nil
}

func (p *parser) checkPath(path string, pos int) error {
	if !ValidName(path) {
		return &SyntaxError{Offset: pos, Reason: fmt.Sprintf("%q is not a variable name", truncate(path, 40))}
	}
	if Head(path) == This && p.eachDepth() == 0 {
		return &SyntaxError{Offset: pos, Reason: "`this` is only an item inside {{#each}}"}
	}
	return nil
}

// open parses the tag starting a block ("#each PATH" or "#if PATH").
func (p *parser) open(tag string, pos int) (*node, error) {
	var word, arg string
	if f := strings.Fields(tag[1:]); len(f) == 2 {
		word, arg = f[0], f[1]
	} else if len(f) > 0 {
		word, arg = f[0], strings.Join(f[1:], " ")
	}
	var n *node
	switch word {
	case "each":
		n = &node{kind: each, text: arg}
	case "if":
		n = &node{kind: cond, text: arg}
	default:
		return nil, &SyntaxError{Offset: pos, Reason: fmt.Sprintf("unknown block {{#%s}}: use {{#each LIST}} or {{#if VALUE}}", truncate(word, 20))}
	}
	if err := p.checkPath(arg, pos); err != nil {
		return nil, err
	}
	if len(p.stack) >= MaxDepth {
		return nil, &SyntaxError{Offset: pos, Reason: fmt.Sprintf("blocks nest deeper than %d", MaxDepth)}
	}
	return n, nil
}

// close ends the innermost block, which must be of the tag's kind.
func (p *parser) close(tag string, pos int) error {
	word := strings.TrimSpace(tag[1:])
	k := len(p.stack)
	if (word != "each" && word != "if") || k == 0 || tagName(p.stack[k-1].kind) != word {
		return &SyntaxError{Offset: pos, Reason: fmt.Sprintf("{{/%s}} does not close an open block", truncate(word, 20))}
	}
	p.stack, p.inAlt, p.opens = p.stack[:k-1], p.inAlt[:k-1], p.opens[:k-1]
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
