package imports

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// ColumnMap names the CSV column of each contact field. Empty fields
// fall back to the default columns: `email`, `first_name`, `last_name`,
// `unsubscribed`, and every column named like one of the team's
// property keys, compared case-insensitively.
type ColumnMap struct {
	Email        string
	FirstName    string
	LastName     string
	Unsubscribed string
	// Properties maps property keys to columns.
	Properties map[string]string
}

func (m ColumnMap) empty() bool {
	return m.Email == "" && m.FirstName == "" && m.LastName == "" && m.Unsubscribed == "" && len(m.Properties) == 0
}

// ParseColumnMap reads a `column_map` form field: a JSON object with
// `email`, `first_name`, `last_name`, `unsubscribed` (column names; the
// Node SDK's firstName and lastName too) and `properties`, whose values
// are a column name or Resend's `{"column", "type"}`. "" is the zero map.
func ParseColumnMap(raw string) (ColumnMap, error) {
	var m ColumnMap
	if strings.TrimSpace(raw) == "" {
		return m, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		return m, invalid.Errorf("column_map", "The `column_map` field must be a JSON object mapping contact fields to CSV columns.")
	}
	str := func(field string, v json.RawMessage) (string, error) {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || strings.TrimSpace(s) == "" {
			return "", invalid.Errorf("column_map", "The `column_map` field `%s` must name a CSV column.", field)
		}
		return strings.TrimSpace(s), nil
	}
	for k, v := range obj {
		var err error
		switch k {
		case "email":
			m.Email, err = str(k, v)
		case "first_name", "firstName":
			m.FirstName, err = str(k, v)
		case "last_name", "lastName":
			m.LastName, err = str(k, v)
		case "unsubscribed":
			m.Unsubscribed, err = str(k, v)
		case "properties":
			var props map[string]json.RawMessage
			if json.Unmarshal(v, &props) != nil {
				return m, invalid.Errorf("column_map", "The `column_map` field `properties` must map property keys to CSV columns.")
			}
			m.Properties = make(map[string]string, len(props))
			for key, pv := range props {
				var pm struct {
					Column string `json:"column"`
					Type   string `json:"type"`
				}
				col, err := str("properties."+key, pv)
				if err != nil {
					if json.Unmarshal(pv, &pm) != nil || strings.TrimSpace(pm.Column) == "" {
						return m, invalid.Errorf("column_map",
							"The `column_map` property `%s` must be a CSV column name or an object with a `column`.", key)
					}
					switch pm.Type {
					case "", store.PropertyString, store.PropertyNumber, "boolean":
					default:
						return m, invalid.Errorf("column_map",
							"The `type` of `column_map` property `%s` must be `string`, `number` or `boolean`.", key)
					}
					col = strings.TrimSpace(pm.Column)
				}
				m.Properties[key] = col
			}
		default:
			return m, invalid.Errorf("column_map",
				"Unknown `column_map` field `%s`: use email, first_name, last_name, unsubscribed or properties.", k)
		}
		if err != nil {
			return m, err
		}
	}
	return m, nil
}

// ParseSegments reads a `segments` form field: a JSON array of
// `{"id"}` objects or of ids. "" is none.
func ParseSegments(raw string) ([]uuid.UUID, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, invalid.Errorf("segments", "The `segments` field must be a JSON array of `{\"id\"}` objects.")
	}
	out := make([]uuid.UUID, 0, len(list))
	for _, r := range list {
		var s string
		if json.Unmarshal(r, &s) != nil {
			var obj struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(r, &obj) != nil {
				return nil, invalid.Errorf("segments", "The `segments` field must be a JSON array of `{\"id\"}` objects.")
			}
			s = obj.ID
		}
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, invalid.Errorf("segments", "The `segments` field must list segment ids; %q is not one.", s)
		}
		out = append(out, id)
	}
	return out, nil
}

// ParseTopics reads a `topics` form field: a JSON array of
// `{"id", "subscription"}` with subscription `opt_in` or `opt_out`.
func ParseTopics(raw string) ([]store.TopicChoice, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var list []struct {
		ID           string `json:"id"`
		Subscription string `json:"subscription"`
	}
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, invalid.Errorf("topics", "The `topics` field must be a JSON array of `{\"id\", \"subscription\"}` objects.")
	}
	out := make([]store.TopicChoice, 0, len(list))
	for _, t := range list {
		id, err := uuid.Parse(t.ID)
		if err != nil {
			return nil, invalid.Errorf("topics", "Each entry of `topics` must have the `id` of a topic; %q is not one.", t.ID)
		}
		if t.Subscription != store.TopicOptIn && t.Subscription != store.TopicOptOut {
			return nil, invalid.Errorf("topics", "The `subscription` of topic %s must be `opt_in` or `opt_out`.", t.ID)
		}
		out = append(out, store.TopicChoice{TopicID: id, Subscription: t.Subscription})
	}
	return out, nil
}

// layout is where each contact field is in a record: -1 when absent.
type layout struct {
	email, first, last, unsub int
	props                     []propColumn
}

type propColumn struct {
	key   string
	typ   string // store.PropertyString or store.PropertyNumber
	index int
}

// planColumns checks the header against the column map (or the default
// columns) and the team's property definitions.
func planColumns(header []string, m ColumnMap, defs map[string]store.ContactProperty) (layout, error) {
	idx := map[string]int{}
	dup := map[string]bool{}
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte order mark some spreadsheets write
		}
		k := strings.ToLower(strings.TrimSpace(h))
		if _, seen := idx[k]; seen {
			dup[k] = true
			continue
		}
		idx[k] = i
	}
	find := func(col string, required bool) (int, error) {
		k := strings.ToLower(col)
		i, ok := idx[k]
		switch {
		case !ok && required:
			return -1, &invalid.Error{Field: "file", Message: fmt.Sprintf(
				"The CSV header has no `%s` column; name the column of email addresses with `column_map`.", col)}
		case !ok:
			return -1, &invalid.Error{Field: "column_map", Message: fmt.Sprintf(
				"The CSV header has no `%s` column named in `column_map`.", col)}
		case dup[k]:
			return -1, &invalid.Error{Field: "file", Message: fmt.Sprintf(
				"The CSV header has more than one `%s` column.", col)}
		}
		return i, nil
	}
	l := layout{email: -1, first: -1, last: -1, unsub: -1}
	var err error
	if m.empty() {
		if l.email, err = find("email", true); err != nil {
			return l, err
		}
		optional := func(col string) int {
			if i, ok := idx[col]; ok && !dup[col] {
				return i
			}
			return -1
		}
		l.first, l.last, l.unsub = optional("first_name"), optional("last_name"), optional("unsubscribed")
		keys := sortedKeys(defs)
		for _, k := range keys {
			if i := optional(strings.ToLower(k)); i >= 0 && i != l.email && i != l.first && i != l.last && i != l.unsub {
				l.props = append(l.props, propColumn{key: k, typ: defs[k].Type, index: i})
			}
		}
		return l, nil
	}
	email := m.Email
	if email == "" {
		email = "email"
	}
	if l.email, err = find(email, true); err != nil {
		return l, err
	}
	for _, f := range []struct {
		col string
		dst *int
	}{{m.FirstName, &l.first}, {m.LastName, &l.last}, {m.Unsubscribed, &l.unsub}} {
		if f.col == "" {
			continue
		}
		if *f.dst, err = find(f.col, false); err != nil {
			return l, err
		}
	}
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		def, ok := defs[k]
		if !ok {
			return l, invalid.Errorf("column_map",
				"Unknown contact property `%s` in `column_map`: create it with POST /contact-properties first.", k)
		}
		i, err := find(m.Properties[k], false)
		if err != nil {
			return l, err
		}
		l.props = append(l.props, propColumn{key: k, typ: def.Type, index: i})
	}
	return l, nil
}

// maxNameLength bounds first_name and last_name, as the contacts API does.
const maxNameLength = 256

// parseRow validates one record; row is its number in the file (the
// header is row 1). A row that cannot become a contact comes back as an
// ImportRowError.
func (l layout) parseRow(row int, rec []string) (store.ImportRow, *store.ImportRowError) {
	cell := func(i int) string {
		if i < 0 || i >= len(rec) {
			return ""
		}
		return strings.TrimSpace(rec[i])
	}
	raw := cell(l.email)
	fail := func(email, format string, args ...any) (store.ImportRow, *store.ImportRowError) {
		if !utf8.ValidString(email) || len(email) > 320 {
			email = ""
		}
		return store.ImportRow{}, &store.ImportRowError{Row: row, Email: email, Reason: fmt.Sprintf(format, args...)}
	}
	if raw == "" {
		return fail("", "The row has no email address.")
	}
	a, err := address.ParseBare(raw)
	if err != nil {
		return fail(raw, "%q is not an email address.", clip(raw))
	}
	r := store.ImportRow{Row: row, Email: address.Normalize(a.Addr())}
	for _, f := range []struct {
		name string
		i    int
		dst  **string
	}{{"first_name", l.first, &r.FirstName}, {"last_name", l.last, &r.LastName}} {
		v := cell(f.i)
		if v == "" {
			continue
		}
		if !utf8.ValidString(v) {
			return fail(r.Email, "The `%s` is not valid UTF-8.", f.name)
		}
		if len(v) > maxNameLength {
			return fail(r.Email, "The `%s` is longer than %d characters.", f.name, maxNameLength)
		}
		*f.dst = &v
	}
	if v := cell(l.unsub); v != "" {
		b, ok := parseBool(v)
		if !ok {
			return fail(r.Email, "The `unsubscribed` value %q is not true or false.", clip(v))
		}
		r.Unsubscribed = &b
	}
	for _, p := range l.props {
		v := cell(p.index)
		if v == "" {
			continue
		}
		if !utf8.ValidString(v) {
			return fail(r.Email, "The contact property `%s` is not valid UTF-8.", p.key)
		}
		if r.Properties == nil {
			r.Properties = map[string]any{}
		}
		if p.typ == store.PropertyNumber {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				return fail(r.Email, "The contact property `%s` must be a number; %q is not one.", p.key, clip(v))
			}
			r.Properties[p.key] = n
			continue
		}
		r.Properties[p.key] = v
	}
	return r, nil
}

// parseBool reads the spellings of a boolean spreadsheets export.
func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "true", "yes", "y", "1":
		return true, true
	case "false", "no", "n", "0":
		return false, true
	}
	return false, false
}

// clip shortens a cell quoted in a reason.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	s = s[:64]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
