package components

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/posthaste/posthaste/internal/merge"
)

// fontStacks maps the font_family setting to a CSS font stack that ends in a
// generic family, so every mail client has something to fall back to. The
// values are written into style attributes as they are: they must never hold
// a double quote.
var fontStacks = map[string]string{
	"arial":     "Arial, Helvetica, sans-serif",
	"helvetica": "Helvetica, Arial, sans-serif",
	"georgia":   "Georgia, 'Times New Roman', Times, serif",
	"times":     "'Times New Roman', Times, serif",
	"verdana":   "Verdana, Geneva, sans-serif",
	"tahoma":    "Tahoma, Verdana, Segoe, sans-serif",
	"trebuchet": "'Trebuchet MS', 'Lucida Grande', Tahoma, sans-serif",
	"courier":   "'Courier New', Courier, monospace",
	"system":    "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif",
}

var (
	colorRE = regexp.MustCompile(`^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)
	// BCP 47 (RFC 5646) tags, loosely: letters, digits and hyphens.
	langRE = regexp.MustCompile(`^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*$`)
	// A merge placeholder as far as URL checks are concerned: what lies
	// between triple braces is the merge step's business.
	placeholderRE = regexp.MustCompile(`\{\{\{[^{}]*\}\}\}`)
)

// Validate reports the first problem of d as a *FieldError, or nil. Render
// calls it, so a Document built in Go is checked as one that was parsed.
func (d Document) Validate() error {
	if d.Version != 0 && d.Version != 1 {
		return fieldErr("version", "unsupported version %d (this server reads version 1)", d.Version)
	}
	if err := d.Settings.validate("settings"); err != nil {
		return err
	}
	v := validator{width: d.Settings.contentWidth()}
	for i, b := range d.Blocks {
		if err := v.block(b, index("blocks", i), false); err != nil {
			return err
		}
	}
	return nil
}

func (s Settings) contentWidth() int {
	if s.ContentWidth == 0 {
		return 600
	}
	return s.ContentWidth
}

func (s Settings) validate(path string) error {
	for _, c := range []struct{ name, value string }{
		{"background_color", s.BackgroundColor},
		{"content_background_color", s.ContentBackgroundColor},
		{"text_color", s.TextColor},
		{"link_color", s.LinkColor},
	} {
		if err := checkColor(join(path, c.name), c.value); err != nil {
			return err
		}
	}
	if s.ContentWidth != 0 && (s.ContentWidth < 320 || s.ContentWidth > 800) {
		return fieldErr(join(path, "content_width"), "must be between 320 and 800 pixels")
	}
	if _, ok := fontStacks[s.FontFamily]; s.FontFamily != "" && !ok {
		return fieldErr(join(path, "font_family"), "must be one of arial, helvetica, georgia, times, verdana, tahoma, trebuchet, courier, system")
	}
	if err := checkText(join(path, "preview_text"), s.PreviewText, false, false); err != nil {
		return err
	}
	if utf8.RuneCountInString(s.PreviewText) > maxPreviewText {
		return fieldErr(join(path, "preview_text"), "must be at most %d characters", maxPreviewText)
	}
	if s.Lang != "" && !langRE.MatchString(s.Lang) {
		return fieldErr(join(path, "lang"), "must be a language tag such as en or pt-BR")
	}
	return nil
}

type validator struct {
	width int // content width in pixels
	count int // blocks seen
}

func (v *validator) block(b Block, path string, nested bool) error {
	v.count++
	if v.count > MaxBlocks {
		return fieldErr(path, "too many blocks (at most %d, counting those inside columns)", MaxBlocks)
	}
	switch b := b.(type) {
	case *Heading:
		if b == nil {
			break
		}
		if b.Level < 1 || b.Level > 3 {
			return fieldErr(join(path, "level"), "required: 1, 2 or 3")
		}
		return firstErr(
			checkText(join(path, "text"), b.Text, true, false),
			checkAlign(join(path, "align"), b.Align),
			checkColor(join(path, "color"), b.Color),
		)
	case *Text:
		if b == nil {
			break
		}
		if len(b.Runs) == 0 {
			return fieldErr(join(path, "runs"), "required: at least one run")
		}
		if len(b.Runs) > MaxRuns {
			return fieldErr(join(path, "runs"), "too many runs (at most %d)", MaxRuns)
		}
		for i, r := range b.Runs {
			rp := index(join(path, "runs"), i)
			if r.Text == "" {
				return fieldErr(join(rp, "text"), "required")
			}
			if err := checkText(join(rp, "text"), r.Text, false, true); err != nil {
				return err
			}
			if r.Href != "" {
				if err := checkLink(join(rp, "href"), r.Href); err != nil {
					return err
				}
			}
		}
		return firstErr(checkAlign(join(path, "align"), b.Align), checkColor(join(path, "color"), b.Color))
	case *Button:
		if b == nil {
			break
		}
		if b.BorderRadius != nil && (*b.BorderRadius < 0 || *b.BorderRadius > 50) {
			return fieldErr(join(path, "border_radius"), "must be between 0 and 50 pixels")
		}
		return firstErr(
			checkText(join(path, "label"), b.Label, true, false),
			requiredLink(join(path, "href"), b.Href),
			checkColor(join(path, "background_color"), b.BackgroundColor),
			checkColor(join(path, "text_color"), b.TextColor),
			checkAlign(join(path, "align"), b.Align),
		)
	case *Image:
		if b == nil {
			break
		}
		if b.Src == "" {
			return fieldErr(join(path, "src"), "required")
		}
		if err := checkURL(join(path, "src"), b.Src, false, "https"); err != nil {
			return err
		}
		if b.Width < 0 || b.Width > v.width {
			return fieldErr(join(path, "width"), "must be between 1 and the content width (%d pixels)", v.width)
		}
		var href error
		if b.Href != "" {
			href = checkLink(join(path, "href"), b.Href)
		}
		return firstErr(
			checkText(join(path, "alt"), b.Alt, true, false),
			href,
			checkAlign(join(path, "align"), b.Align),
		)
	case *Divider:
		if b == nil {
			break
		}
		return checkColor(join(path, "color"), b.Color)
	case *Spacer:
		if b == nil {
			break
		}
		if b.Height < 1 || b.Height > 200 {
			return fieldErr(join(path, "height"), "required: 1 to 200 pixels")
		}
		return nil
	case *Columns:
		if b == nil {
			break
		}
		if nested {
			return fieldErr(join(path, "type"), "columns cannot be nested inside columns")
		}
		if n := len(b.Columns); n < 2 || n > 3 {
			return fieldErr(join(path, "columns"), "must hold 2 or 3 columns, not %d", n)
		}
		for i, col := range b.Columns {
			cp := index(join(path, "columns"), i)
			for j, inner := range col {
				if err := v.block(inner, index(cp, j), true); err != nil {
					return err
				}
			}
		}
		return nil
	case *Footer:
		if b == nil {
			break
		}
		if nested {
			return fieldErr(join(path, "type"), "a footer is only allowed at the top level")
		}
		if len(b.Address) == 0 {
			return fieldErr(join(path, "address"), "required: at least one line of postal address")
		}
		if len(b.Address) > maxAddressLines {
			return fieldErr(join(path, "address"), "at most %d lines", maxAddressLines)
		}
		for i, line := range b.Address {
			if err := checkText(index(join(path, "address"), i), line, true, false); err != nil {
				return err
			}
		}
		return firstErr(
			checkText(join(path, "text"), b.Text, false, true),
			checkText(join(path, "unsubscribe_label"), b.UnsubscribeLabel, false, false),
			checkAlign(join(path, "align"), b.Align),
			checkColor(join(path, "color"), b.Color),
		)
	}
	return fieldErr(path, "missing or unknown block")
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func checkColor(path, c string) error {
	if c != "" && !colorRE.MatchString(c) {
		return fieldErr(path, "must be a colour written #rgb or #rrggbb")
	}
	return nil
}

func checkAlign(path, a string) error {
	switch a {
	case "", "left", "center", "right":
		return nil
	}
	return fieldErr(path, "must be left, center or right")
}

// checkText refuses invalid UTF-8 and control characters (RFC 5322 §2.3
// forbids NUL and bare CR and LF in a body; the renderer emits its own line
// breaks). A newline is allowed where multiline is set.
func checkText(path, s string, required, multiline bool) error {
	if required && strings.TrimSpace(s) == "" {
		return fieldErr(path, "required")
	}
	if !utf8.ValidString(s) {
		return fieldErr(path, "must be valid UTF-8")
	}
	for _, r := range s {
		if r == '\n' && multiline {
			continue
		}
		if r < 0x20 && r != '\t' || r == 0x7f {
			if r == '\n' {
				return fieldErr(path, "must be a single line")
			}
			return fieldErr(path, "must not contain control characters")
		}
	}
	return checkPlaceholders(path, s)
}

// checkPlaceholders refuses what the merge step would refuse (an unclosed
// "{{{", a name that is not a variable name), so that the error names the
// value's path when the document is saved rather than failing every send.
func checkPlaceholders(path, s string) error {
	if !strings.Contains(s, "{{{") {
		return nil
	}
	if _, err := merge.Parse(s); err != nil {
		return fieldErr(path, "merge placeholder %v", err)
	}
	return nil
}

func requiredLink(path, href string) error {
	if href == "" {
		return fieldErr(path, "required")
	}
	return checkLink(path, href)
}

// checkLink accepts an absolute http, https or mailto URL, or one that
// starts with a merge placeholder.
func checkLink(path, href string) error {
	return checkURL(path, href, true, "http", "https", "mailto")
}

func checkURL(path, s string, placeholderFirst bool, schemes ...string) error {
	if len(s) > maxURLLength {
		return fieldErr(path, "must be at most %d bytes", maxURLLength)
	}
	if !utf8.ValidString(s) {
		return fieldErr(path, "must be valid UTF-8")
	}
	loc := placeholderRE.FindStringIndex(s)
	startsWithPlaceholder := loc != nil && loc[0] == 0
	bare := placeholderRE.ReplaceAllString(s, "x")
	for _, r := range bare {
		switch {
		case r <= ' ' || r == 0x7f || r == 0x85 || r == 0xa0 || r == 0x2028 || r == 0x2029:
			return fieldErr(path, "must not contain spaces or control characters")
		case r == '{' || r == '}':
			return fieldErr(path, "has a malformed merge placeholder (write {{{NAME}}})")
		case r == '"' || r == '<' || r == '>' || r == '\\' || r == '`':
			return fieldErr(path, "must not contain %q (percent-encode it)", r)
		}
	}
	if err := checkPlaceholders(path, s); err != nil {
		return err
	}
	if placeholderFirst && startsWithPlaceholder {
		return nil
	}
	u, err := url.Parse(bare)
	want := "an " + strings.Join(schemes, ", ") + " URL"
	if len(schemes) == 3 {
		want = "an http, https or mailto URL"
	}
	if err != nil || u.Scheme == "" {
		return fieldErr(path, "must be %s", want)
	}
	scheme := strings.ToLower(u.Scheme)
	ok := false
	for _, sc := range schemes {
		ok = ok || sc == scheme
	}
	if !ok {
		return fieldErr(path, "must be %s", want)
	}
	if scheme == "mailto" {
		if u.Opaque == "" {
			return fieldErr(path, "must be a mailto URL with an address")
		}
		return nil
	}
	if u.Host == "" || u.Opaque != "" {
		return fieldErr(path, "must be %s with a host", want)
	}
	return nil
}
