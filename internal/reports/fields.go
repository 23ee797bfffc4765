package reports

import (
	"bufio"
	"bytes"
	"net/mail"
	"strings"
)

// Field is one "Name: value" line of a header block, its continuation
// lines unfolded (RFC 5322 §2.2.3). Name keeps the spelling it had; Value
// is raw (RFC 2047 encoded-words are not decoded).
type Field struct {
	Name, Value string
}

// fieldGroup is a block of fields, in order.
type fieldGroup []Field

// get returns the value of the first field named name (case-insensitive),
// "" when there is none.
func (g fieldGroup) get(name string) string {
	for _, f := range g {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// values returns the values of every field named name.
func (g fieldGroup) values(name string) []string {
	var out []string
	for _, f := range g {
		if strings.EqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

// parseFieldGroups reads blocks of header-like fields separated by blank
// lines: the body of a message/delivery-status (RFC 3464 §2.1: one
// per-message group, then one group per recipient), of a
// message/feedback-report (RFC 5965 §3.1, one group) or of a
// text/rfc822-headers part (RFC 6522 §4). It is lenient: lines without a
// colon are skipped rather than failing the block, and line ends may be CRLF
// or LF. At most maxGroups groups of at most maxFields fields each are
// returned; reading stops there.
func parseFieldGroups(b []byte, maxGroups, maxFields int) []fieldGroup {
	var (
		groups []fieldGroup
		cur    fieldGroup
	)
	flush := func() bool {
		if len(cur) > 0 {
			groups = append(groups, cur)
			cur = nil
		}
		return len(groups) < maxGroups
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			if !flush() {
				return groups
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			// A continuation line belongs to the field before it.
			if n := len(cur); n > 0 {
				cur[n-1].Value = joinFolded(cur[n-1].Value, strings.TrimSpace(line))
			}
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			continue
		}
		if len(cur) >= maxFields {
			continue
		}
		cur = append(cur, Field{Name: name, Value: strings.TrimSpace(value)})
	}
	flush()
	if len(groups) > maxGroups {
		groups = groups[:maxGroups]
	}
	return groups
}

// maxLineBytes bounds one line of a parsed block; a longer line ends the
// block (bufio.Scanner stops), which keeps the parse bounded.
const maxLineBytes = 64 << 10

func joinFolded(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + " " + b
}

// typedValue splits an RFC 3464 §2.1.2 typed field value, "type; value"
// ("rfc822; a@example.com", "dns; mx.example.com", "smtp; 550 ..."),
// returning the lower-cased type and the value. A value without a type
// (seen in the wild) comes back with an empty type.
func typedValue(v string) (typ, value string) {
	t, rest, ok := strings.Cut(v, ";")
	if !ok || strings.ContainsAny(strings.TrimSpace(t), " \t<>@") {
		return "", strings.TrimSpace(v)
	}
	return strings.ToLower(strings.TrimSpace(t)), strings.TrimSpace(rest)
}

// cleanAddress turns an address as reports write it ("<a@b>",
// "rfc822;a@b", "Name <a@b>", "a@b (comment)") into the bare addr-spec,
// or "" when there is none.
func cleanAddress(v string) string {
	if _, rest := typedValue(v); rest != "" {
		v = rest
	}
	v = strings.TrimSpace(v)
	if v == "" || v == "<>" {
		return ""
	}
	if a, err := mail.ParseAddress(v); err == nil {
		return a.Address
	}
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			v = v[i+1 : i+j]
		}
	}
	if i := strings.IndexAny(v, " \t("); i >= 0 {
		v = v[:i]
	}
	v = strings.Trim(v, "<>\"' \t,;:")
	if !strings.Contains(v, "@") {
		return ""
	}
	return v
}

// cleanMessageID returns a msg-id without its angle brackets (RFC 5322
// §3.6.4), "" when v holds none.
func cleanMessageID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.TrimSpace(v[i+1 : i+j])
		}
	}
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		v = v[:i]
	}
	return strings.Trim(v, "<>")
}

// addressList returns the addresses of an address-list field value, bare;
// unparsable lists fall back to cleanAddress of each comma-separated item.
func addressList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	if list, err := mail.ParseAddressList(v); err == nil {
		out := make([]string, 0, len(list))
		for _, a := range list {
			out = append(out, a.Address)
		}
		return out
	}
	var out []string
	for _, item := range strings.Split(v, ",") {
		if a := cleanAddress(item); a != "" {
			out = append(out, a)
		}
	}
	return out
}
