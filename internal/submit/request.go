package submit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// SendRequest is the JSON body of POST /emails (one element of a batch). It
// decodes with DecodeSendRequest or json.Unmarshal, tolerant of SDK shapes:
// `reply_to` is also read as `replyTo` and `scheduled_at` as `scheduledAt`
// (the snake_case key wins when both are present). Unknown fields are
// ignored. It encodes with json.Marshal into a form it decodes from again.
type SendRequest struct {
	From        string              `json:"from"`
	To          AddressList         `json:"to"`
	Cc          AddressList         `json:"cc"`
	Bcc         AddressList         `json:"bcc"`
	ReplyTo     AddressList         `json:"reply_to"`
	Subject     *string             `json:"subject"`
	HTML        *string             `json:"html"`
	Text        *string             `json:"text"`
	Headers     map[string]string   `json:"headers"`
	Attachments []AttachmentRequest `json:"attachments"`
	Tags        []Tag               `json:"tags"`
	ScheduledAt *string             `json:"scheduled_at"`
	// TopicID scopes the email to one of the team's topics: recipients
	// whose subscription excludes them are suppressed when it is sent.
	// `topicId` is read too.
	TopicID *string `json:"topic_id,omitempty"`
	// Template, when set, renders subject, html and text from a published
	// template (see Service.applyTemplate); html and text must then be
	// absent.
	Template *TemplateRequest `json:"template,omitempty"`
	// TemplateID is the template the email was rendered from, set when
	// Template is applied; it is not read from the body.
	TemplateID *uuid.UUID `json:"-"`
}

// TemplateRequest is the `template` object of a send: the id or alias of
// one of the team's published templates, and the values of its variables,
// each a JSON string or number (kept as its JSON text).
type TemplateRequest struct {
	ID        string                     `json:"id"`
	Variables map[string]json.RawMessage `json:"variables,omitempty"`
}

// AddressList is a list of address strings that decodes from a JSON string
// (one address; "" is no address) or an array of strings; null is empty.
type AddressList []string

// Bytes is binary content that decodes from a base64 string (standard or
// URL-safe alphabet, padded or not, line breaks ignored), a Node.js Buffer
// as JSON (`{"type":"Buffer","data":[...]}`) or an array of byte integers
// 0..255; null is empty. It encodes as a standard base64 string.
type Bytes []byte

// AttachmentRequest is one element of `attachments`. Besides the keys in
// its tags it reads `contentType` for content_type and `contentId`,
// `inline_content_id` and `inlineContentId` (older SDKs) for content_id; a
// `filename` of false (allowed by the Node SDK's types) means none.
type AttachmentRequest struct {
	Content     Bytes  `json:"content,omitempty"`
	Path        string `json:"path,omitempty"`
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
}

// Tag is a name/value pair attached to an email and echoed in webhooks.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// DecodeSendRequest decodes one send object. A body that is not JSON, not
// an object, or has a field of the wrong type is rejected with an *Error of
// KindValidation naming the field (KindInvalidAttachment for attachment
// content that cannot be decoded).
func DecodeSendRequest(data []byte) (SendRequest, error) {
	var r SendRequest
	if err := r.decode(data); err != nil {
		return SendRequest{}, err
	}
	return r, nil
}

// UnmarshalJSON decodes like DecodeSendRequest; its errors are *Error.
func (r *SendRequest) UnmarshalJSON(data []byte) error {
	var out SendRequest
	if err := out.decode(data); err != nil {
		return err
	}
	*r = out
	return nil
}

func (r *SendRequest) decode(data []byte) error {
	// Validated once here; the splitting in decodeValid relies on it.
	if !json.Valid(data) {
		return Errorf(KindValidation, "", "The request body is not valid JSON.")
	}
	return r.decodeValid(data)
}

// decodeValid decodes data, which must be valid JSON, into r, which must
// be zero.
func (r *SendRequest) decodeValid(data []byte) error {
	fields, err := objectFields(data)
	if err != nil {
		return Errorf(KindValidation, "", "The request body must be a JSON object.")
	}
	if r.From, err = stringField(fields, "from"); err != nil {
		return err
	}
	for _, f := range []struct {
		dst   *AddressList
		names []string
	}{
		{&r.To, []string{"to"}},
		{&r.Cc, []string{"cc"}},
		{&r.Bcc, []string{"bcc"}},
		{&r.ReplyTo, []string{"reply_to", "replyTo"}},
	} {
		raw, name := pick(fields, f.names...)
		if raw == nil {
			continue
		}
		*f.dst, err = parseAddressList(raw)
		var tm *tooMany
		if errors.As(err, &tm) {
			return Errorf(KindValidation, name, "Invalid `%s` field. It holds %d addresses; an email may have at most %d recipients.",
				name, tm.N, maxRecipients)
		}
		if err != nil {
			return Errorf(KindValidation, name, "Invalid `%s` field. Expected a string or an array of strings.", name)
		}
	}
	for _, f := range []struct {
		dst   **string
		names []string
	}{
		{&r.Subject, []string{"subject"}},
		{&r.HTML, []string{"html"}},
		{&r.Text, []string{"text"}},
		{&r.ScheduledAt, []string{"scheduled_at", "scheduledAt"}},
		{&r.TopicID, []string{"topic_id", "topicId"}},
	} {
		raw, name := pick(fields, f.names...)
		if *f.dst, err = optionalString(name, raw); err != nil {
			return err
		}
	}
	if raw := fields["headers"]; raw != nil && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.Headers); err != nil {
			return Errorf(KindValidation, "headers", "Invalid `headers` field. Expected an object whose values are strings.")
		}
	}
	if r.Attachments, err = decodeAttachments(fields["attachments"]); err != nil {
		return err
	}
	if r.Tags, err = decodeTags(fields["tags"]); err != nil {
		return err
	}
	if r.Template, err = decodeTemplate(fields["template"]); err != nil {
		return err
	}
	return nil
}

// maxTemplateVariables bounds the variables of one send (Resend allows 50
// per template; the reserved ones come on top).
const maxTemplateVariables = 100

// decodeTemplate decodes the `template` object; absent or null is nil.
func decodeTemplate(raw json.RawMessage) (*TemplateRequest, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	fields, err := objectFields(raw)
	if err != nil {
		return nil, Errorf(KindValidation, "template", "Invalid `template` field. Expected an object with `id` and `variables`.")
	}
	t := &TemplateRequest{}
	if t.ID, err = stringField(fields, "id"); err != nil {
		return nil, Errorf(KindValidation, "template.id", "Invalid `template.id` field. Expected a string.")
	}
	vars := fields["variables"]
	if vars == nil || isNull(vars) {
		return t, nil
	}
	members, err := objectFields(vars)
	if err != nil {
		return nil, Errorf(KindValidation, "template.variables",
			"Invalid `template.variables` field. Expected an object of variable values.")
	}
	if len(members) > maxTemplateVariables {
		return nil, Errorf(KindValidation, "template.variables",
			"Invalid `template.variables` field. At most %d variables are allowed.", maxTemplateVariables)
	}
	// Values may be of any JSON type (Resend's string, number, boolean,
	// object and list); they are checked against the template's declared
	// types when it is rendered.
	t.Variables = make(map[string]json.RawMessage, len(members))
	for k, v := range members {
		t.Variables[k] = bytes.TrimSpace(v)
	}
	return t, nil
}

// UnmarshalJSON decodes a JSON string, an array of strings or null.
func (l *AddressList) UnmarshalJSON(data []byte) error {
	out, err := parseAddressList(data)
	if err != nil {
		return Errorf(KindValidation, "", "Invalid address list. Expected a string or an array of strings.")
	}
	*l = out
	return nil
}

// parseAddressList decodes raw, which must be valid JSON.
func parseAddressList(raw []byte) (AddressList, error) {
	raw = bytes.TrimSpace(raw)
	switch firstByte(raw) {
	case 'n':
		return nil, nil
	case '"':
		s, err := unquote(raw)
		if err != nil || s == "" {
			return nil, err
		}
		return AddressList{s}, nil
	case '[':
		elems, err := arrayElements("", raw, maxListElements)
		if err != nil {
			return nil, err
		}
		list := make(AddressList, len(elems))
		for i, e := range elems {
			if firstByte(e) != '"' {
				return nil, errors.New("not a string in address list")
			}
			if list[i], err = unquote(e); err != nil {
				return nil, err
			}
		}
		return list, nil
	}
	return nil, errors.New("not a string or an array")
}

// UnmarshalJSON decodes base64, a Node.js Buffer object or an array of
// byte integers.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	out, err := parseBytes(data)
	if err != nil {
		return Errorf(KindInvalidAttachment, "", "Invalid content: %s.", err)
	}
	*b = out
	return nil
}

func parseBytes(raw []byte) (Bytes, error) {
	raw = bytes.TrimSpace(raw)
	switch firstByte(raw) {
	case 'n':
		return nil, nil
	case '"':
		return parseBase64(raw)
	case '[':
		return parseByteArray(raw)
	case '{':
		fields, err := objectFields(raw)
		if err != nil {
			return nil, err
		}
		var typ string
		if t := fields["type"]; t != nil {
			if err := json.Unmarshal(t, &typ); err != nil {
				return nil, errors.New("expected a Buffer object with a string `type`")
			}
		}
		data := fields["data"]
		if typ != "Buffer" || data == nil || firstByte(data) != '[' {
			return nil, errors.New(`expected a Buffer object {"type":"Buffer","data":[...]}`)
		}
		return parseByteArray(data)
	}
	return nil, errors.New("expected a base64 string, a Buffer object or an array of bytes")
}

// parseBase64 decodes a JSON string holding base64 in either alphabet, with
// or without padding. Whitespace (as in MIME-wrapped base64) is ignored.
func parseBase64(raw []byte) (Bytes, error) {
	if len(raw) < 2 || raw[len(raw)-1] != '"' {
		return nil, errors.New("not a JSON string")
	}
	var s []byte
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 {
		s = inner
	} else {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, err
		}
		s = []byte(str)
	}
	if bytes.ContainsAny(s, " \t\r\n") {
		s = bytes.Join(bytes.Fields(s), nil)
	}
	s = bytes.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if bytes.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	out := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(out, s)
	if err != nil {
		return nil, errors.New("not valid base64")
	}
	return out[:n], nil
}

// parseByteArray decodes a JSON array of integers 0..255 without building a
// value per element: SDKs send whole files this way.
func parseByteArray(raw []byte) (Bytes, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, errors.New("expected an array of bytes")
	}
	out := make(Bytes, 0, len(raw)/3)
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for {
		start := i
		v := 0
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' && i-start < 4 {
			v = v*10 + int(raw[i]-'0')
			i++
		}
		digits := i - start
		if digits == 0 || digits > 3 || v > 255 || (digits > 1 && raw[start] == '0') {
			return nil, fmt.Errorf("element %d is not an integer from 0 to 255", len(out))
		}
		out = append(out, byte(v))
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return nil, errors.New("unterminated array of bytes")
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			if skipSpace(raw, i+1) != len(raw) {
				return nil, errors.New("trailing data after array of bytes")
			}
			return out, nil
		default:
			return nil, fmt.Errorf("element %d is not an integer from 0 to 255", len(out)-1)
		}
	}
}

// UnmarshalJSON decodes one attachment object.
func (a *AttachmentRequest) UnmarshalJSON(data []byte) error {
	out, err := decodeAttachment("attachment", data)
	if err != nil {
		return err
	}
	*a = out
	return nil
}

func decodeAttachments(raw json.RawMessage) ([]AttachmentRequest, error) {
	return decodeArray("attachments", raw, MaxAttachments, decodeAttachment, func(n int) error {
		return Errorf(KindValidation, "attachments",
			"Invalid `attachments` field. An email may have at most %d attachments; this request has %d.", MaxAttachments, n)
	})
}

// decodeArray decodes a JSON array (null → nil) element by element,
// naming each element field[i] in errors. An array of more than max
// elements is refused with tooMany(n) before any element is decoded.
func decodeArray[T any](field string, raw json.RawMessage, max int, decode func(string, []byte) (T, error),
	tooManyErr func(n int) error) ([]T, error) {
	items, err := arrayElements(field, raw, max)
	var tm *tooMany
	if errors.As(err, &tm) {
		return nil, tooManyErr(tm.N)
	}
	if err != nil || items == nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, item := range items {
		if out[i], err = decode(fmt.Sprintf("%s[%d]", field, i), item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeAttachment(field string, raw []byte) (AttachmentRequest, error) {
	var a AttachmentRequest
	fields, err := objectFields(raw)
	if err != nil {
		return a, Errorf(KindValidation, field, "Invalid `%s` field. Expected an object.", field)
	}
	if c := fields["content"]; c != nil {
		if a.Content, err = parseBytes(c); err != nil {
			return a, Errorf(KindInvalidAttachment, field+".content", "Invalid `%s.content` field: %s.", field, err)
		}
	}
	for _, f := range []struct {
		dst   *string
		names []string
	}{
		{&a.Path, []string{"path"}},
		{&a.Filename, []string{"filename"}},
		{&a.ContentType, []string{"content_type", "contentType"}},
		{&a.ContentID, []string{"content_id", "contentId", "inline_content_id", "inlineContentId"}},
	} {
		raw, name := pick(fields, f.names...)
		if f.dst == &a.Filename && bytes.Equal(bytes.TrimSpace(raw), []byte("false")) {
			continue
		}
		s, err := optionalString(field+"."+name, raw)
		if err != nil {
			return a, err
		}
		if s != nil {
			*f.dst = *s
		}
	}
	return a, nil
}

// UnmarshalJSON decodes {"name": "...", "value": "..."}.
func (t *Tag) UnmarshalJSON(data []byte) error {
	out, err := decodeTag("tag", data)
	if err != nil {
		return err
	}
	*t = out
	return nil
}

func decodeTags(raw json.RawMessage) ([]Tag, error) {
	return decodeArray("tags", raw, maxTags, decodeTag, tooManyTags)
}

func decodeTag(field string, raw []byte) (Tag, error) {
	var t Tag
	fields, err := objectFields(raw)
	if err != nil {
		return t, Errorf(KindValidation, field, "Invalid `%s` field. Expected an object with `name` and `value`.", field)
	}
	if t.Name, err = stringField(fields, "name"); err != nil {
		return t, Errorf(KindValidation, field+".name", "Invalid `%s.name` field. Expected a string.", field)
	}
	if t.Value, err = stringField(fields, "value"); err != nil {
		return t, Errorf(KindValidation, field+".value", "Invalid `%s.value` field. Expected a string.", field)
	}
	return t, nil
}

// objectFields splits a JSON object into its members, later duplicates
// winning. The values alias raw. raw must be valid JSON (json.Valid, or
// given to an UnmarshalJSON method); splitting it by hand instead of with
// encoding/json spares a scan per nesting level of what may be megabytes
// of attachment content.
func objectFields(raw []byte) (map[string]json.RawMessage, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errors.New("not an object")
	}
	fields := map[string]json.RawMessage{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return fields, nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			break
		}
		end := skipString(raw, i)
		key, err := unquote(raw[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			break
		}
		i = skipSpace(raw, i+1)
		if i >= len(raw) {
			break
		}
		end = skipValue(raw, i)
		fields[key] = raw[i:end:end]
		i = skipSpace(raw, end)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
			continue
		case '}':
			return fields, nil
		}
		break
	}
	return nil, errors.New("malformed object")
}

// tooMany is the error of arrayElements for an array of more elements
// than allowed; N counts them all.
type tooMany struct{ N int }

func (e *tooMany) Error() string { return fmt.Sprintf("%d elements", e.N) }

// maxListElements bounds the address lists before they are checked, so
// that a request body of tiny elements cannot make millions of them; the
// limits on recipients are far lower.
const maxListElements = 1000

// arrayElements splits a JSON array field; null or absent is nil. The
// elements alias raw, which must be valid JSON. An array of more than max
// elements is a *tooMany: the elements past max are counted, not kept.
func arrayElements(field string, raw json.RawMessage, max int) ([]json.RawMessage, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	bad := Errorf(KindValidation, field, "Invalid `%s` field. Expected an array.", field)
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, bad
	}
	items := []json.RawMessage{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return items, nil
	}
	n := 0
	for i < len(raw) {
		end := skipValue(raw, i)
		if n++; n <= max {
			items = append(items, raw[i:end:end])
		}
		i = skipSpace(raw, end)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
			continue
		case ']':
			if n > max {
				return nil, &tooMany{N: n}
			}
			return items, nil
		}
		break
	}
	return nil, bad
}

// skipValue returns the index just past the JSON value that starts at
// raw[i].
func skipValue(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return skipString(raw, i)
	case '{', '[':
		depth := 0
		for i < len(raw) {
			switch raw[i] {
			case '"':
				i = skipString(raw, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number, true, false or null.
	for i < len(raw) && strings.IndexByte(",}] \t\r\n", raw[i]) < 0 {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string that starts with
// the quote at raw[i] (or len(raw) if it is unterminated).
func skipString(raw []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(raw[i:], '"')
		if j < 0 {
			return len(raw)
		}
		q := i + j
		backslashes := 0
		for k := q - 1; k >= i && raw[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// unquote decodes a JSON string, quotes included, taken from valid JSON.
// Without escapes, valid UTF-8 is its own content; anything else goes
// through encoding/json, which also turns invalid UTF-8 into U+FFFD.
func unquote(quoted []byte) (string, error) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", errors.New("not a JSON string")
	}
	if inner := quoted[1 : len(quoted)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err
}

// pick returns the first of names present in fields, and that name; when
// none is present it returns nil and the first name.
func pick(fields map[string]json.RawMessage, names ...string) (json.RawMessage, string) {
	for _, n := range names {
		if raw, ok := fields[n]; ok {
			return raw, n
		}
	}
	return nil, names[0]
}

// stringField decodes a string member; absent or null is "".
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	s, err := optionalString(name, fields[name])
	if err != nil || s == nil {
		return "", err
	}
	return *s, nil
}

// optionalString decodes a string; absent or null is nil.
func optionalString(field string, raw json.RawMessage) (*string, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	s, err := unquote(bytes.TrimSpace(raw))
	if err != nil {
		return nil, Errorf(KindValidation, field, "Invalid `%s` field. Expected a string.", field)
	}
	return &s, nil
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

func firstByte(raw []byte) byte {
	if i := skipSpace(raw, 0); i < len(raw) {
		return raw[i]
	}
	return 0
}

// skipSpace returns the index of the first non-whitespace byte at or after i
// (JSON whitespace, RFC 8259 §2).
func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\r', '\n':
			i++
			continue
		}
		return i
	}
	return i
}
