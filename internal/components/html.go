package components

import (
	"html"
	"strconv"
	"strings"
)

// Layout in pixels: blocks sit padX inside the content table; a columns row
// is padded colOuter on each side and each column colInner, so that the
// content of the outer columns lines up with the blocks above and below.
const (
	padX     = 24
	colOuter = 16
	colInner = 8
)

// UnsubscribePlaceholder is the merge placeholder the footer links to,
// spelt as in Resend's broadcast documentation.
const UnsubscribePlaceholder = "{{{RESEND_UNSUBSCRIBE_URL}}}"

// Render renders a valid document to its HTML and text parts. A document
// that is not valid is refused with a *FieldError (Parse's documents always
// are). Merge placeholders are left in both parts; see the package
// documentation.
func Render(d Document) (htmlPart, textPart string, err error) {
	if err := d.Validate(); err != nil {
		return "", "", err
	}
	s := resolve(d.Settings)
	h := htmlRenderer{s: s}
	h.document(d.Blocks)
	t := textRenderer{}
	t.blocks(d.Blocks)
	return h.b.String(), t.String(), nil
}

// style holds the settings with their defaults applied.
type style struct {
	background, content, text, link string
	width                           int
	font                            string
	preview, lang                   string
}

func resolve(s Settings) style {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	font := fontStacks["arial"]
	if f, ok := fontStacks[s.FontFamily]; ok {
		font = f
	}
	return style{
		background: or(s.BackgroundColor, "#f4f4f5"),
		content:    or(s.ContentBackgroundColor, "#ffffff"),
		text:       or(s.TextColor, "#111827"),
		link:       or(s.LinkColor, "#2563eb"),
		width:      s.contentWidth(),
		font:       font,
		preview:    s.PreviewText,
		lang:       or(s.Lang, "en"),
	}
}

type htmlRenderer struct {
	b strings.Builder
	s style
}

// w writes trusted markup: constants, validated colours, integers, font
// stacks. Every value from the document goes through esc.
func (h *htmlRenderer) w(parts ...string) {
	for _, p := range parts {
		h.b.WriteString(p)
	}
}

// esc escapes text and attribute values. html.EscapeString escapes < > & ' "
// and leaves braces and "|" alone, so merge placeholders pass through.
func (h *htmlRenderer) esc(s string) { h.b.WriteString(html.EscapeString(s)) }

func px(n int) string { return strconv.Itoa(n) + "px" }

const tableAttrs = ` role="presentation" cellpadding="0" cellspacing="0" border="0"`

func (h *htmlRenderer) document(blocks []Block) {
	s := h.s
	width := strconv.Itoa(s.width)
	h.w(`<!DOCTYPE html>
<html lang="`, s.lang, `" xmlns="http://www.w3.org/1999/xhtml" xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office">
<head>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="x-apple-disable-message-reformatting">
<meta name="format-detection" content="telephone=no, date=no, address=no, email=no">
<title></title>
<!--[if mso]><noscript><xml><o:OfficeDocumentSettings><o:AllowPNG/><o:PixelsPerInch>96</o:PixelsPerInch></o:OfficeDocumentSettings></xml></noscript><![endif]-->
</head>
<body style="margin:0;padding:0;word-spacing:normal;background-color:`, s.background, `;">
`)
	if s.preview != "" {
		// The preheader: shown by inboxes next to the subject, hidden in
		// the message. The filler of zero-width non-joiners and spaces
		// keeps inboxes from appending the body's first words to it.
		h.w(`<div style="display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;mso-hide:all;">`)
		h.esc(s.preview)
		h.w(strings.Repeat("&#8204;&#160;", 60), "</div>\n")
	}
	h.w(`<table`, tableAttrs, ` width="100%" bgcolor="`, s.background, `" style="background-color:`, s.background, `;">
<tr>
<td align="center" style="padding:24px 8px;">
<!--[if mso]><table`, tableAttrs, ` width="`, width, `" align="center"><tr><td><![endif]-->
<table`, tableAttrs, ` width="100%" bgcolor="`, s.content, `" style="max-width:`, px(s.width), `;margin:0 auto;background-color:`, s.content, `;">
<tr>
<td style="padding:16px 0;">
<table`, tableAttrs, ` width="100%">
`)
	for _, b := range blocks {
		h.block(b, s.width-2*padX, padX)
	}
	h.w(`</table>
</td>
</tr>
</table>
<!--[if mso]></td></tr></table><![endif]-->
</td>
</tr>
</table>
</body>
</html>
`)
}

// cell opens a block's row: a td padded top, pad (left and right), bottom.
func (h *htmlRenderer) cell(align string, top, pad, bottom int, extra string) {
	h.w(`<tr>
<td align="`, align, `" style="padding:`, px(top), " ", px(pad), " ", px(bottom), " ", px(pad), ";", extra, `">
`)
}

func (h *htmlRenderer) endCell() { h.w("</td>\n</tr>\n") }

func alignOr(a, def string) string {
	if a == "" {
		return def
	}
	return a
}

func colorOr(c, def string) string {
	if c == "" {
		return def
	}
	return c
}

var headingSizes = [4]struct{ size, line int }{{}, {28, 36}, {22, 30}, {18, 26}}

// block writes one block as a table row; avail is the width of its content
// and pad the horizontal padding of its cell.
func (h *htmlRenderer) block(b Block, avail, pad int) {
	font := h.s.font
	switch b := b.(type) {
	case *Heading:
		align := alignOr(b.Align, "left")
		lvl := strconv.Itoa(b.Level)
		sz := headingSizes[b.Level]
		h.cell(align, 16, pad, 8, "")
		h.w(`<h`, lvl, ` style="margin:0;font-family:`, font, `;font-size:`, px(sz.size), `;line-height:`, px(sz.line),
			`;font-weight:bold;color:`, colorOr(b.Color, h.s.text), `;text-align:`, align, `;word-break:break-word;">`)
		h.esc(b.Text)
		h.w(`</h`, lvl, ">\n")
		h.endCell()
	case *Text:
		align := alignOr(b.Align, "left")
		h.cell(align, 8, pad, 8, "")
		h.w(`<p style="margin:0;font-family:`, font, `;font-size:16px;line-height:24px;color:`, colorOr(b.Color, h.s.text), `;text-align:`, align, `;word-break:break-word;">`)
		for _, r := range b.Runs {
			h.run(r)
		}
		h.w("</p>\n")
		h.endCell()
	case *Button:
		h.button(b, pad)
	case *Image:
		align := alignOr(b.Align, "center")
		width := b.Width
		if width == 0 || width > avail {
			width = avail
		}
		margin := map[string]string{"left": "0", "center": "0 auto", "right": "0 0 0 auto"}[align]
		h.cell(align, 8, pad, 8, "")
		if b.Href != "" {
			h.w(`<a href="`)
			h.esc(b.Href)
			h.w(`" target="_blank" style="text-decoration:none;">`)
		}
		h.w(`<img src="`)
		h.esc(b.Src)
		h.w(`" alt="`)
		h.esc(b.Alt)
		h.w(`" width="`, strconv.Itoa(width), `" style="display:block;width:100%;max-width:`, px(width),
			`;height:auto;margin:`, margin, `;border:0;outline:none;text-decoration:none;font-family:`, font, `;font-size:14px;color:`, h.s.text, `;">`)
		if b.Href != "" {
			h.w("</a>")
		}
		h.w("\n")
		h.endCell()
	case *Divider:
		h.cell("left", 16, pad, 16, "")
		h.w(`<table`, tableAttrs, ` width="100%"><tr><td style="border-top:1px solid `, colorOr(b.Color, "#e5e7eb"),
			`;font-size:1px;line-height:1px;height:1px;">&#160;</td></tr></table>
`)
		h.endCell()
	case *Spacer:
		hp := strconv.Itoa(b.Height)
		h.w(`<tr>
<td height="`, hp, `" style="height:`, hp, `px;line-height:`, hp, `px;font-size:1px;mso-line-height-rule:exactly;">&#160;</td>
</tr>
`)
	case *Columns:
		h.columns(b, avail+2*pad)
	case *Footer:
		h.footer(b, pad)
	}
}

func (h *htmlRenderer) run(r Run) {
	if r.Href != "" {
		h.w(`<a href="`)
		h.esc(r.Href)
		h.w(`" target="_blank" style="color:`, h.s.link, `;text-decoration:underline;">`)
	}
	if r.Bold {
		h.w(`<strong style="font-weight:bold;">`)
	}
	if r.Italic {
		h.w(`<em style="font-style:italic;">`)
	}
	for i, line := range strings.Split(r.Text, "\n") {
		if i > 0 {
			h.w("<br>")
		}
		h.esc(line)
	}
	if r.Italic {
		h.w("</em>")
	}
	if r.Bold {
		h.w("</strong>")
	}
	if r.Href != "" {
		h.w("</a>")
	}
}

// button is a padding-based "bulletproof" button: the cell carries the
// colour (bgcolor for Outlook), the link the padding, and mso-padding-alt
// gives Outlook, which ignores padding on links, the same size.
func (h *htmlRenderer) button(b *Button, pad int) {
	align := alignOr(b.Align, "center")
	bg := colorOr(b.BackgroundColor, "#111827")
	fg := colorOr(b.TextColor, "#ffffff")
	radius := 6
	if b.BorderRadius != nil {
		radius = *b.BorderRadius
	}
	// The cell's align places the table; align="center" on the table
	// itself helps old clients, while left or right would make it float.
	tableAlign := ""
	if align == "center" {
		tableAlign = ` align="center"`
	}
	margin := map[string]string{"left": "0", "center": "0 auto", "right": "0 0 0 auto"}[align]
	h.cell(align, 16, pad, 16, "")
	h.w(`<table`, tableAttrs, tableAlign, ` style="margin:`, margin, `;">
<tr>
<td align="center" bgcolor="`, bg, `" style="border-radius:`, px(radius), `;background-color:`, bg, `;mso-padding-alt:12px 24px;">
<a href="`)
	h.esc(b.Href)
	h.w(`" target="_blank" style="display:inline-block;padding:12px 24px;font-family:`, h.s.font,
		`;font-size:16px;line-height:20px;font-weight:bold;color:`, fg, `;text-decoration:none;border-radius:`, px(radius), `;">`)
	h.esc(b.Label)
	h.w(`</a>
</td>
</tr>
</table>
`)
	h.endCell()
}

// columns uses the hybrid technique: inline-block columns of max-width
// their share sit side by side when the container is wide enough and wrap
// (stack) when it is not, with no media query; Outlook, which ignores
// inline-block and max-width, gets a fixed-width ghost table instead. The
// container's font-size:0 removes the gaps between inline blocks; every
// block sets its own font size.
func (h *htmlRenderer) columns(c *Columns, outer int) {
	inner := outer - 2*colOuter
	colW := inner / len(c.Columns)
	cw := strconv.Itoa(colW)
	h.cell("center", 8, colOuter, 8, "font-size:0;text-align:center;")
	h.w(`<!--[if mso]><table`, tableAttrs, ` width="`, strconv.Itoa(colW*len(c.Columns)), `"><tr><td width="`, cw, `" valign="top"><![endif]-->
`)
	for i, col := range c.Columns {
		if i > 0 {
			h.w(`<!--[if mso]></td><td width="`, cw, `" valign="top"><![endif]-->
`)
		}
		h.w(`<div style="display:inline-block;width:100%;max-width:`, px(colW), `;vertical-align:top;">
`)
		if len(col) > 0 {
			h.w(`<table`, tableAttrs, ` width="100%">
`)
			for _, b := range col {
				h.block(b, colW-2*colInner, colInner)
			}
			h.w("</table>\n")
		}
		h.w("</div>\n")
	}
	h.w(`<!--[if mso]></td></tr></table><![endif]-->
`)
	h.endCell()
}

func (h *htmlRenderer) footer(f *Footer, pad int) {
	align := alignOr(f.Align, "center")
	color := colorOr(f.Color, "#6b7280")
	label := f.UnsubscribeLabel
	if strings.TrimSpace(label) == "" {
		label = "Unsubscribe"
	}
	p := `<p style="margin:0 0 12px 0;font-family:` + h.s.font + `;font-size:12px;line-height:18px;color:` + color + `;text-align:` + align + `;">`
	h.cell(align, 24, pad, 8, "")
	if f.Text != "" {
		h.w(p)
		for i, line := range strings.Split(f.Text, "\n") {
			if i > 0 {
				h.w("<br>")
			}
			h.esc(line)
		}
		h.w("</p>\n")
	}
	h.w(p)
	for i, line := range f.Address {
		if i > 0 {
			h.w("<br>")
		}
		h.esc(line)
	}
	h.w("</p>\n", p, `<a href="`, UnsubscribePlaceholder, `" target="_blank" style="color:`, color, `;text-decoration:underline;">`)
	h.esc(label)
	h.w("</a></p>\n")
	h.endCell()
}
