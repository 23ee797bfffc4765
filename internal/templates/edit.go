// Package templates is the slice of email templates: Service is the one
// way the HTTP API and the dashboard create, read, edit, publish,
// duplicate and delete a team's templates, and Edit checks and applies a
// change the way both accept it: names, aliases, addresses, the body as
// HTML or as a component document (internal/components, rendered into
// html and text when saved), declared variables, and that every variable
// used is declared. Rejections are *invalid.Error naming the field.
package templates

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/components"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/merge"
	"github.com/posthaste/posthaste/internal/store"
)

// Limits of a template (Resend allows 50 variables per template).
const (
	MaxVariables = 50
	MaxName      = 256
	MaxAlias     = 128
	MaxBody      = 4 << 20 // html or text
)

// Edit is a change to a template. Nil fields are left as they are by an
// update; so are an empty Name and HTML, which Resend's Go SDK always
// sends. Components, when not empty or null, is a component document
// given instead of HTML and Text.
type Edit struct {
	Name, Alias, From, Subject, HTML, Text *string
	// ReplyTo nil leaves the addresses; empty removes them.
	ReplyTo    []string
	Components json.RawMessage
	Variables  *[]Variable
	// Form says the edit is the dashboard editor's whole form: an empty
	// name is refused (an API update leaves the name as it is), and HTML
	// given without Text removes the text part once the edit is checked.
	Form bool
}

// Variable is a declared variable as given: Fallback is raw JSON (a
// value of the type), empty or null for none.
type Variable struct {
	Key      string
	Type     string
	Fallback json.RawMessage
}

// Apply writes e into t; create says whether t is new (name and html, or
// components, are then required). On error t may be partly written: apply
// to a copy, or inside store.UpdateTemplate, which discards it.
func (e Edit) Apply(t *store.Template, create bool) error {
	if e.Form && (e.Name == nil || strings.TrimSpace(*e.Name) == "") {
		return invalid.Missing("name")
	}
	if e.Name != nil && (*e.Name != "" || create) {
		name := strings.TrimSpace(*e.Name)
		if name == "" || len(name) > MaxName {
			return invalid.Errorf("name", "The `name` field must be 1 to %d characters.", MaxName)
		}
		t.Name = name
	} else if create {
		return invalid.Missing("name")
	}
	if e.Alias != nil {
		if *e.Alias == "" {
			t.Alias = nil
		} else {
			if err := CheckAlias(*e.Alias); err != nil {
				return err
			}
			a := *e.Alias
			t.Alias = &a
		}
	}
	c := &t.Content
	if e.From != nil {
		c.From = nonEmpty(*e.From)
		if c.From != nil {
			if _, err := address.Parse(*c.From); err != nil {
				return invalid.Errorf("from", "Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.")
			}
		}
	}
	if e.Subject != nil {
		c.Subject = nonEmpty(*e.Subject)
	}
	if e.ReplyTo != nil {
		for _, a := range e.ReplyTo {
			if _, err := address.Parse(a); err != nil {
				return invalid.Errorf("reply_to", "Invalid `reply_to` field: %q is not an email address.", a)
			}
		}
		c.ReplyTo = append([]string(nil), e.ReplyTo...)
		if len(c.ReplyTo) == 0 {
			c.ReplyTo = nil
		}
	}
	hasHTML := e.HTML != nil && *e.HTML != ""
	if doc := bytes.TrimSpace(e.Components); len(doc) > 0 && string(doc) != "null" {
		if hasHTML || e.Text != nil {
			return invalid.Errorf("components", "Give either `components` or `html` and `text`, not both.")
		}
		d, err := components.Parse(doc)
		if err != nil {
			return invalid.Errorf("components", "Invalid `components` field: %s.", err)
		}
		html, text, err := components.Render(d)
		if err != nil {
			return invalid.Errorf("components", "Invalid `components` field: %s.", err)
		}
		c.HTML, c.Text, c.Components = html, &text, append(json.RawMessage(nil), doc...)
	} else {
		if hasHTML {
			c.HTML, c.Components = *e.HTML, nil
		} else if create {
			return invalid.Missing("html")
		}
		if e.Text != nil {
			text := *e.Text
			c.Text, c.Components = &text, nil
		}
	}
	if e.Variables != nil {
		vars, err := checkVariables(*e.Variables)
		if err != nil {
			return err
		}
		c.Variables = vars
	}
	if c.Variables == nil {
		c.Variables = []store.TemplateVariable{}
	}
	if err := CheckContent(*c); err != nil {
		return err
	}
	if e.Form && e.HTML != nil && e.Text == nil {
		c.Text = nil
	}
	return nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CheckAlias allows 1 to MaxAlias letters, digits, '-', '_' and '.'; an
// alias may not be a UUID, so that a path names a template unambiguously.
func CheckAlias(a string) error {
	bad := a == "" || len(a) > MaxAlias
	for i := 0; i < len(a) && !bad; i++ {
		c := a[i]
		bad = !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}
	if _, err := uuid.Parse(a); err == nil {
		bad = true
	}
	if bad {
		return invalid.Errorf("alias", "Invalid `alias` field. Use 1 to %d letters, digits, `-`, `_` or `.`, and not a UUID.", MaxAlias)
	}
	return nil
}

// checkVariables checks declared variables: a valid name that is not
// reserved, declared once, of one of Resend's types (merge.Types), with a
// fallback of that type or none. Resend requires a fallback of object
// and list variables.
func checkVariables(in []Variable) ([]store.TemplateVariable, error) {
	if len(in) > MaxVariables {
		return nil, invalid.Errorf("variables", "Invalid `variables` field. A template may declare at most %d variables.", MaxVariables)
	}
	out := make([]store.TemplateVariable, 0, len(in))
	seen := map[string]bool{}
	for _, v := range in {
		switch {
		case !merge.ValidName(v.Key):
			return nil, invalid.Errorf("variables", "Invalid variable key %q. Use letters, digits and underscores.", v.Key)
		case merge.IsReserved(v.Key) || v.Key == merge.This || v.Key == "contact":
			return nil, invalid.Errorf("variables", "The variable name %s is reserved and cannot be declared.", v.Key)
		case seen[v.Key]:
			return nil, invalid.Errorf("variables", "The variable %s is declared twice.", v.Key)
		case !slices.Contains(merge.Types, v.Type):
			return nil, invalid.Errorf("variables", "Invalid type for variable %s. Use `string`, `number`, `boolean`, `object` or `list`.", v.Key)
		}
		seen[v.Key] = true
		fb := bytes.TrimSpace(v.Fallback)
		if len(fb) == 0 || string(fb) == "null" {
			fb = nil
		} else {
			val, err := merge.Decode(fb)
			if err != nil || merge.TypeOf(val) != v.Type {
				return nil, invalid.Errorf("variables", "Invalid fallback_value for variable %s. Expected %s.", v.Key, article(v.Type))
			}
		}
		if fb == nil && (v.Type == "object" || v.Type == "list") {
			return nil, invalid.Errorf("variables", "The %s variable %s needs a fallback_value.", v.Type, v.Key)
		}
		var stored json.RawMessage
		if fb != nil {
			stored = append(stored, fb...)
		}
		out = append(out, store.TemplateVariable{Key: v.Key, Type: v.Type, Fallback: stored})
	}
	return out, nil
}

// article is a type name with its indefinite article.
func article(typ string) string {
	if typ == "object" {
		return "an object"
	}
	return "a " + typ
}

// CheckContent parses subject, html and text, and requires every variable
// they use to be declared or reserved (as Resend does).
func CheckContent(c store.TemplateContent) error {
	if len(c.HTML) > MaxBody || (c.Text != nil && len(*c.Text) > MaxBody) {
		return invalid.Errorf("html", "The template's `html` and `text` may be at most %d MB each.", MaxBody>>20)
	}
	declared := map[string]bool{}
	for _, v := range c.Variables {
		declared[v.Key] = true
	}
	for _, f := range []struct {
		name string
		src  *string
	}{{"subject", c.Subject}, {"html", &c.HTML}, {"text", c.Text}} {
		if f.src == nil {
			continue
		}
		tpl, err := merge.Parse(*f.src)
		if err != nil {
			return invalid.Errorf(f.name, "Invalid `%s` field: %s.", f.name, err)
		}
		for _, n := range tpl.Names() {
			if !declaresPath(declared, n) && !merge.IsReserved(n) && !tpl.HasInlineFallback(n) {
				return invalid.Errorf(f.name, "Variable '%s' is used in the template's %s but not defined in the variables list.", n, f.name)
			}
		}
	}
	return nil
}

// declaresPath reports whether path is a declared variable or walks into
// one: "ORDER.total" uses the object ORDER.
func declaresPath(declared map[string]bool, path string) bool {
	for end := len(path); end > 0; end = strings.LastIndexByte(path[:end], '.') {
		if declared[path[:end]] {
			return true
		}
	}
	return false
}
