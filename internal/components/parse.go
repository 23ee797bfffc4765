package components

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FieldError is the error of Parse, UnmarshalJSON, Validate and Render for a
// document that is not valid. Path names the value in the JSON document, for
// example "blocks[3].columns[1][0].href"; it is empty for the document as a
// whole.
type FieldError struct {
	Path    string
	Message string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

func fieldErr(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Message: fmt.Sprintf(format, args...)}
}

// join appends a field name to a path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Parse decodes and validates a document (see the package documentation for
// its format). Its errors are *FieldError.
func Parse(data []byte) (Document, error) {
	var d Document
	if err := d.UnmarshalJSON(data); err != nil {
		return Document{}, err
	}
	return d, nil
}

// UnmarshalJSON decodes and validates a document, as Parse does, so that a
// Document may be a field of a request body.
func (d *Document) UnmarshalJSON(data []byte) error {
	if len(data) > MaxDocumentSize {
		return fieldErr("", "document is larger than %d bytes", MaxDocumentSize)
	}
	doc, err := decodeDocument(data)
	if err != nil {
		return err
	}
	if err := doc.Validate(); err != nil {
		return err
	}
	*d = doc
	return nil
}

// decodeDocument decodes the JSON into a Document, refusing unknown fields
// and block types, and counting blocks as it goes so that no more than
// MaxBlocks are decoded.
func decodeDocument(data []byte) (Document, error) {
	if !isObject(data) {
		return Document{}, fieldErr("", "document must be a JSON object")
	}
	var raw struct {
		Version  *int              `json:"version"`
		Settings json.RawMessage   `json:"settings"`
		Blocks   []json.RawMessage `json:"blocks"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Document{}, jsonError("", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Document{}, fieldErr("", "unexpected data after the document")
	}
	d := Document{Version: 1}
	if len(raw.Settings) > 0 && string(raw.Settings) != "null" {
		if !isObject(raw.Settings) {
			return Document{}, fieldErr("settings", "must be a JSON object")
		}
		if err := strict(raw.Settings, &d.Settings, "settings"); err != nil {
			return Document{}, err
		}
	}
	if raw.Version != nil {
		if *raw.Version != 1 {
			return Document{}, fieldErr("version", "unsupported version %d (this server reads version 1)", *raw.Version)
		}
	}
	dc := decoder{}
	blocks, err := dc.blocks(raw.Blocks, "blocks", false)
	if err != nil {
		return Document{}, err
	}
	d.Blocks = blocks
	return d, nil
}

type decoder struct {
	count int // blocks decoded so far
}

func (dc *decoder) blocks(raws []json.RawMessage, path string, nested bool) ([]Block, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	out := make([]Block, 0, len(raws))
	for i, raw := range raws {
		b, err := dc.block(raw, index(path, i), nested)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (dc *decoder) block(raw json.RawMessage, path string, nested bool) (Block, error) {
	dc.count++
	if dc.count > MaxBlocks {
		return nil, fieldErr(path, "too many blocks (at most %d, counting those inside columns)", MaxBlocks)
	}
	if !isObject(raw) {
		return nil, fieldErr(path, "block must be a JSON object")
	}
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, jsonError(path, err)
	}
	if head.Type == nil {
		return nil, fieldErr(join(path, "type"), "required")
	}
	switch *head.Type {
	case TypeHeading:
		var v struct {
			Type string `json:"type"`
			headingFields
		}
		err := strict(raw, &v, path)
		return (*Heading)(&v.headingFields), err
	case TypeText:
		var v struct {
			Type  string            `json:"type"`
			Runs  []json.RawMessage `json:"runs"`
			Align string            `json:"align"`
			Color string            `json:"color"`
		}
		if err := strict(raw, &v, path); err != nil {
			return nil, err
		}
		if len(v.Runs) > MaxRuns {
			return nil, fieldErr(join(path, "runs"), "too many runs (at most %d)", MaxRuns)
		}
		t := &Text{Align: v.Align, Color: v.Color, Runs: make([]Run, len(v.Runs))}
		for i, r := range v.Runs {
			rp := index(join(path, "runs"), i)
			if !isObject(r) {
				return nil, fieldErr(rp, "run must be a JSON object")
			}
			if err := strict(r, &t.Runs[i], rp); err != nil {
				return nil, err
			}
		}
		return t, nil
	case TypeButton:
		var v struct {
			Type string `json:"type"`
			buttonFields
		}
		err := strict(raw, &v, path)
		return (*Button)(&v.buttonFields), err
	case TypeImage:
		var v struct {
			Type string `json:"type"`
			imageFields
		}
		err := strict(raw, &v, path)
		return (*Image)(&v.imageFields), err
	case TypeDivider:
		var v struct {
			Type string `json:"type"`
			dividerFields
		}
		err := strict(raw, &v, path)
		return (*Divider)(&v.dividerFields), err
	case TypeSpacer:
		var v struct {
			Type string `json:"type"`
			spacerFields
		}
		err := strict(raw, &v, path)
		return (*Spacer)(&v.spacerFields), err
	case TypeFooter:
		if nested {
			return nil, fieldErr(join(path, "type"), "a footer is only allowed at the top level")
		}
		var v struct {
			Type string `json:"type"`
			footerFields
		}
		err := strict(raw, &v, path)
		return (*Footer)(&v.footerFields), err
	case TypeColumns:
		if nested {
			return nil, fieldErr(join(path, "type"), "columns cannot be nested inside columns")
		}
		var v struct {
			Type    string              `json:"type"`
			Columns [][]json.RawMessage `json:"columns"`
		}
		if err := strict(raw, &v, path); err != nil {
			return nil, err
		}
		if v.Columns == nil {
			return nil, fieldErr(join(path, "columns"), "required")
		}
		if n := len(v.Columns); n < 2 || n > 3 {
			return nil, fieldErr(join(path, "columns"), "must hold 2 or 3 columns, not %d", n)
		}
		c := &Columns{Columns: make([][]Block, len(v.Columns))}
		for i, col := range v.Columns {
			blocks, err := dc.blocks(col, index(join(path, "columns"), i), true)
			if err != nil {
				return nil, err
			}
			c.Columns[i] = blocks
		}
		return c, nil
	default:
		return nil, fieldErr(join(path, "type"), "unknown block type %q", *head.Type)
	}
}

// strict decodes one JSON object, refusing unknown fields.
func strict(raw json.RawMessage, v any, path string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(path, err)
	}
	return nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// jsonError turns an encoding/json error into a FieldError under path.
func jsonError(path string, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fieldErr(path, "invalid JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.As(err, &typ):
		// Field is the Go path of JSON names, with the names of embedded
		// structs (the *Fields types of the blocks) in it.
		p := path
		for _, name := range strings.Split(typ.Field, ".") {
			if name != "" && !strings.HasSuffix(name, "Fields") {
				p = join(p, name)
			}
		}
		return fieldErr(p, "must be %s, not a JSON %s", describeGoType(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr(path, "unexpected end of JSON")
	}
	// DisallowUnknownFields reports `json: unknown field "name"`.
	const unknown = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknown) && strings.HasSuffix(msg, `"`) {
		return fieldErr(join(path, msg[len(unknown):len(msg)-1]), "unknown field")
	}
	return fieldErr(path, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

func describeGoType(kind string) string {
	switch kind {
	case "int", "int64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "a " + kind
}
