package components

import (
	"encoding/json"
	"strconv"
)

// Limits of one document; see the package documentation.
const (
	MaxDocumentSize = 1 << 20 // bytes of JSON accepted by Parse
	MaxBlocks       = 500     // blocks, counting those inside columns
	MaxRuns         = 200     // runs of one text block
	maxURLLength    = 2048
	maxPreviewText  = 500
	maxAddressLines = 10
)

// Document is a template assembled from components. The zero value of every
// setting means its default. A Document built in Go rather than by Parse is
// validated by Render.
type Document struct {
	Version  int      `json:"version"`
	Settings Settings `json:"settings"`
	Blocks   []Block  `json:"blocks"`
}

// Settings apply to the whole document.
type Settings struct {
	BackgroundColor        string `json:"background_color,omitempty"`
	ContentBackgroundColor string `json:"content_background_color,omitempty"`
	TextColor              string `json:"text_color,omitempty"`
	LinkColor              string `json:"link_color,omitempty"`
	ContentWidth           int    `json:"content_width,omitempty"`
	FontFamily             string `json:"font_family,omitempty"`
	PreviewText            string `json:"preview_text,omitempty"`
	Lang                   string `json:"lang,omitempty"`
}

// Block is one component: *Heading, *Text, *Button, *Image, *Divider,
// *Spacer, *Columns or *Footer. It marshals to JSON with its "type".
type Block interface {
	// Type is the block's "type" in JSON.
	Type() string
}

// Heading is a heading of level 1 to 3.
type Heading struct {
	Level int    `json:"level"`
	Text  string `json:"text"`
	Align string `json:"align,omitempty"`
	Color string `json:"color,omitempty"`
}

// Text is a paragraph of runs.
type Text struct {
	Runs  []Run  `json:"runs"`
	Align string `json:"align,omitempty"`
	Color string `json:"color,omitempty"`
}

// Run is a stretch of text with one formatting; Href makes it a link.
type Run struct {
	Text   string `json:"text"`
	Bold   bool   `json:"bold,omitempty"`
	Italic bool   `json:"italic,omitempty"`
	Href   string `json:"href,omitempty"`
}

// Button is a link shown as a button.
type Button struct {
	Label           string `json:"label"`
	Href            string `json:"href"`
	BackgroundColor string `json:"background_color,omitempty"`
	TextColor       string `json:"text_color,omitempty"`
	// BorderRadius in pixels; nil means 6.
	BorderRadius *int   `json:"border_radius,omitempty"`
	Align        string `json:"align,omitempty"`
}

// Image is an image, optionally a link.
type Image struct {
	Src string `json:"src"`
	Alt string `json:"alt"`
	// Width in pixels; 0 means the available width.
	Width int    `json:"width,omitempty"`
	Href  string `json:"href,omitempty"`
	Align string `json:"align,omitempty"`
}

// Divider is a horizontal rule.
type Divider struct {
	Color string `json:"color,omitempty"`
}

// Spacer is vertical space.
type Spacer struct {
	Height int `json:"height"`
}

// Columns shows 2 or 3 columns of blocks side by side.
type Columns struct {
	Columns [][]Block `json:"columns"`
}

// Footer holds the postal address and the unsubscribe link.
type Footer struct {
	Text             string   `json:"text,omitempty"`
	Address          []string `json:"address"`
	UnsubscribeLabel string   `json:"unsubscribe_label,omitempty"`
	Align            string   `json:"align,omitempty"`
	Color            string   `json:"color,omitempty"`
}

// Block types as they appear in JSON.
const (
	TypeHeading = "heading"
	TypeText    = "text"
	TypeButton  = "button"
	TypeImage   = "image"
	TypeDivider = "divider"
	TypeSpacer  = "spacer"
	TypeColumns = "columns"
	TypeFooter  = "footer"
)

func (*Heading) Type() string { return TypeHeading }
func (*Text) Type() string    { return TypeText }
func (*Button) Type() string  { return TypeButton }
func (*Image) Type() string   { return TypeImage }
func (*Divider) Type() string { return TypeDivider }
func (*Spacer) Type() string  { return TypeSpacer }
func (*Columns) Type() string { return TypeColumns }
func (*Footer) Type() string  { return TypeFooter }

var (
	_ Block = (*Heading)(nil)
	_ Block = (*Text)(nil)
	_ Block = (*Button)(nil)
	_ Block = (*Image)(nil)
	_ Block = (*Divider)(nil)
	_ Block = (*Spacer)(nil)
	_ Block = (*Columns)(nil)
	_ Block = (*Footer)(nil)
)

// flat marshals v, a block's fields, as one object with "type" first.
func flat(typ string, v any) ([]byte, error) {
	fields, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(fields)+len(typ)+12)
	out = append(out, `{"type":`...)
	out = strconv.AppendQuote(out, typ) // block types are ASCII letters
	if len(fields) > 2 {
		out = append(out, ',')
	}
	return append(out, fields[1:]...), nil
}

// The block types marshal through a field-identical type without methods, so
// that json.Marshal does not recurse into MarshalJSON.
type (
	headingFields Heading
	textFields    Text
	buttonFields  Button
	imageFields   Image
	dividerFields Divider
	spacerFields  Spacer
	columnsFields Columns
	footerFields  Footer
)

func (b *Heading) MarshalJSON() ([]byte, error) { return flat(TypeHeading, (*headingFields)(b)) }
func (b *Text) MarshalJSON() ([]byte, error)    { return flat(TypeText, (*textFields)(b)) }
func (b *Button) MarshalJSON() ([]byte, error)  { return flat(TypeButton, (*buttonFields)(b)) }
func (b *Image) MarshalJSON() ([]byte, error)   { return flat(TypeImage, (*imageFields)(b)) }
func (b *Divider) MarshalJSON() ([]byte, error) { return flat(TypeDivider, (*dividerFields)(b)) }
func (b *Spacer) MarshalJSON() ([]byte, error)  { return flat(TypeSpacer, (*spacerFields)(b)) }
func (b *Columns) MarshalJSON() ([]byte, error) { return flat(TypeColumns, (*columnsFields)(b)) }
func (b *Footer) MarshalJSON() ([]byte, error)  { return flat(TypeFooter, (*footerFields)(b)) }
