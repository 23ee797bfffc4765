package components

import (
	"strings"
	"unicode/utf8"
)

// textRenderer builds the plain-text part: one paragraph per block that has
// something to say, paragraphs separated by a blank line.
type textRenderer struct {
	paras []string
}

func (t *textRenderer) String() string {
	if len(t.paras) == 0 {
		return ""
	}
	return strings.Join(t.paras, "\n\n") + "\n"
}

func (t *textRenderer) add(p string) {
	if strings.TrimSpace(p) != "" {
		t.paras = append(t.paras, p)
	}
}

const textRule = "----------------------------------------"

func (t *textRenderer) blocks(blocks []Block) {
	for _, b := range blocks {
		t.block(b)
	}
}

func (t *textRenderer) block(b Block) {
	switch b := b.(type) {
	case *Heading:
		switch b.Level {
		case 1:
			t.add(b.Text + "\n" + underline(b.Text, "="))
		case 2:
			t.add(b.Text + "\n" + underline(b.Text, "-"))
		default:
			t.add(b.Text)
		}
	case *Text:
		t.add(runsText(b.Runs))
	case *Button:
		t.add(b.Label + ": " + b.Href)
	case *Image:
		if b.Href != "" {
			t.add(link(b.Alt, b.Href))
		}
	case *Divider:
		t.add(textRule)
	case *Spacer:
	case *Columns:
		for _, col := range b.Columns {
			t.blocks(col)
		}
	case *Footer:
		if f := b.Text; f != "" {
			t.add(f)
		}
		t.add(strings.Join(b.Address, "\n"))
		label := b.UnsubscribeLabel
		if strings.TrimSpace(label) == "" {
			label = "Unsubscribe"
		}
		t.add(label + ": " + UnsubscribePlaceholder)
	}
}

// runsText joins the runs of a paragraph; consecutive runs with the same
// link become one "label (url)".
func runsText(runs []Run) string {
	var b strings.Builder
	for i := 0; i < len(runs); {
		r := runs[i]
		if r.Href == "" {
			b.WriteString(r.Text)
			i++
			continue
		}
		var label strings.Builder
		j := i
		for ; j < len(runs) && runs[j].Href == r.Href; j++ {
			label.WriteString(runs[j].Text)
		}
		b.WriteString(link(label.String(), r.Href))
		i = j
	}
	return b.String()
}

// link writes a link as "label (url)", or the url alone when it is the
// label (the address alone for a mailto link labelled with it). Whitespace around the label stays outside the parentheses.
func link(label, href string) string {
	trimmed := strings.TrimRight(label, " \t\n")
	tail := label[len(trimmed):]
	core := strings.TrimLeft(trimmed, " \t\n")
	head := trimmed[:len(trimmed)-len(core)]
	switch {
	case core == "" || core == href:
		return head + href + tail
	case "mailto:"+core == href:
		return head + core + tail
	}
	return head + core + " (" + href + ")" + tail
}

// underline returns a line as long as s will be once merged, as far as that
// is known here: a placeholder counts as its fallback, or its name.
func underline(s, ch string) string {
	s = placeholderRE.ReplaceAllStringFunc(s, func(p string) string {
		inner := p[3 : len(p)-3]
		if i := strings.IndexByte(inner, '|'); i >= 0 {
			return inner[i+1:]
		}
		return strings.TrimSpace(inner)
	})
	n := utf8.RuneCountInString(s)
	if n > 78 {
		n = 78
	}
	return strings.Repeat(ch, n)
}
