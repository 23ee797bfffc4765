package submit

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestDecodeSendRequest(t *testing.T) {
	tests := []struct {
		name string
		body string
		want SendRequest
	}{
		{
			name: "go sdk",
			body: `{"from":"Acme <a@acme.com>","to":["b@x.com"],"subject":"Hi","cc":["c@x.com"],"bcc":["d@x.com"],
				"reply_to":"r@x.com","html":"<p>hi</p>","text":"hi","tags":[{"name":"k","value":"v"}],
				"attachments":[{"content":[104,105],"filename":"a.txt","content_type":"text/plain","inline_content_id":"cid1"}],
				"headers":{"X-Entity-Ref-ID":"123"},"scheduled_at":"2026-11-22T10:00:00Z"}`,
			want: SendRequest{
				From: "Acme <a@acme.com>", To: AddressList{"b@x.com"}, Cc: AddressList{"c@x.com"}, Bcc: AddressList{"d@x.com"},
				ReplyTo: AddressList{"r@x.com"}, Subject: ptr("Hi"), HTML: ptr("<p>hi</p>"), Text: ptr("hi"),
				Tags:        []Tag{{Name: "k", Value: "v"}},
				Attachments: []AttachmentRequest{{Content: Bytes("hi"), Filename: "a.txt", ContentType: "text/plain", ContentID: "cid1"}},
				Headers:     map[string]string{"X-Entity-Ref-ID": "123"}, ScheduledAt: ptr("2026-11-22T10:00:00Z"),
			},
		},
		{
			name: "node sdk buffer and camel case",
			body: `{"from":"a@acme.com","to":"b@x.com","subject":"Hi","text":"t","replyTo":["r@x.com","s@x.com"],"scheduledAt":"in 1 hour",
				"attachments":[{"content":{"type":"Buffer","data":[0,255,16]},"filename":false,"contentType":"image/png","contentId":"logo"}]}`,
			want: SendRequest{
				From: "a@acme.com", To: AddressList{"b@x.com"}, Subject: ptr("Hi"), Text: ptr("t"),
				ReplyTo: AddressList{"r@x.com", "s@x.com"}, ScheduledAt: ptr("in 1 hour"),
				Attachments: []AttachmentRequest{{Content: Bytes{0, 255, 16}, ContentType: "image/png", ContentID: "logo"}},
			},
		},
		{
			name: "python sdk base64 and path",
			body: `{"from":"a@acme.com","to":["b@x.com"],"subject":"Hi","html":"<b>x</b>",
				"attachments":[{"content":"aGVsbG8=","filename":"h.txt"},{"path":"https://example.com/f.pdf","filename":"f.pdf"}]}`,
			want: SendRequest{
				From: "a@acme.com", To: AddressList{"b@x.com"}, Subject: ptr("Hi"), HTML: ptr("<b>x</b>"),
				Attachments: []AttachmentRequest{{Content: Bytes("hello"), Filename: "h.txt"}, {Path: "https://example.com/f.pdf", Filename: "f.pdf"}},
			},
		},
		{
			name: "snake case wins over camel case",
			body: `{"reply_to":"a@x.com","replyTo":"b@x.com","scheduled_at":"s","scheduledAt":"c",
				"attachments":[{"content_id":"one","contentId":"two","content":"AA"}]}`,
			want: SendRequest{
				ReplyTo: AddressList{"a@x.com"}, ScheduledAt: ptr("s"),
				Attachments: []AttachmentRequest{{ContentID: "one", Content: Bytes{0}}},
			},
		},
		{
			name: "nulls and empties",
			body: `{"from":null,"to":null,"cc":"","bcc":[],"reply_to":null,"subject":null,"html":null,"text":"",
				"headers":null,"attachments":null,"tags":null,"scheduled_at":null}`,
			want: SendRequest{Bcc: AddressList{}, Text: ptr("")},
		},
		{
			name: "unknown fields ignored, escaped strings",
			body: `{"from":"a@x.com","react":{"x":1},"region":"eu","subject":"caf\u00e9 \"q\"","attachments":[{"content":"aGk\/","filename":"x"}]}`,
			want: SendRequest{From: "a@x.com", Subject: ptr(`café "q"`), Attachments: []AttachmentRequest{{Content: Bytes("hi?"), Filename: "x"}}},
		},
		{
			name: "empty arrays",
			body: ` {"attachments":[],"tags":[]} `,
			want: SendRequest{Attachments: []AttachmentRequest{}, Tags: []Tag{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeSendRequest([]byte(tt.body))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			var viaJSON SendRequest
			require.NoError(t, json.Unmarshal([]byte(tt.body), &viaJSON))
			require.Equal(t, tt.want, viaJSON)
		})
	}
}

func TestDecodeSendRequestErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		kind  Kind
		field string
		msg   string
	}{
		{"not json", `{"from":`, KindValidation, "", "not valid JSON"},
		{"garbage", `hello`, KindValidation, "", "not valid JSON"},
		{"empty", ``, KindValidation, "", "not valid JSON"},
		{"array body", `[{"from":"a@x.com"}]`, KindValidation, "", "must be a JSON object"},
		{"null body", `null`, KindValidation, "", "must be a JSON object"},
		{"from number", `{"from":1}`, KindValidation, "from", "`from`"},
		{"to number", `{"to":1}`, KindValidation, "to", "`to`"},
		{"to object", `{"to":{"email":"a@x.com"}}`, KindValidation, "to", "`to`"},
		{"cc array of numbers", `{"cc":[1]}`, KindValidation, "cc", "`cc`"},
		{"bcc null element", `{"bcc":["a@x.com",null]}`, KindValidation, "bcc", "`bcc`"},
		{"replyTo bool", `{"replyTo":true}`, KindValidation, "replyTo", "`replyTo`"},
		{"subject array", `{"subject":["x"]}`, KindValidation, "subject", "`subject`"},
		{"html number", `{"html":1}`, KindValidation, "html", "`html`"},
		{"scheduledAt number", `{"scheduledAt":1}`, KindValidation, "scheduledAt", "`scheduledAt`"},
		{"headers array", `{"headers":["a"]}`, KindValidation, "headers", "`headers`"},
		{"headers number value", `{"headers":{"X-A":1}}`, KindValidation, "headers", "`headers`"},
		{"attachments object", `{"attachments":{}}`, KindValidation, "attachments", "`attachments`"},
		{"attachment string", `{"attachments":["x"]}`, KindValidation, "attachments[0]", "`attachments[0]`"},
		{"attachment filename number", `{"attachments":[{"content":"AA","filename":1}]}`, KindValidation, "attachments[0].filename", "`attachments[0].filename`"},
		{"attachment filename true", `{"attachments":[{"content":"AA","filename":true}]}`, KindValidation, "attachments[0].filename", "`attachments[0].filename`"},
		{"attachment contentType number", `{"attachments":[{"content":"AA","contentType":1}]}`, KindValidation, "attachments[0].contentType", "`attachments[0].contentType`"},
		{"attachment bad base64", `{"attachments":[{"content":"a"},{"content":"!!!"}]}`, KindInvalidAttachment, "attachments[0].content", "base64"},
		{"attachment byte too big", `{"attachments":[{"content":[1,256]}]}`, KindInvalidAttachment, "attachments[0].content", "element 1"},
		{"attachment negative byte", `{"attachments":[{"content":[-1]}]}`, KindInvalidAttachment, "attachments[0].content", "element 0"},
		{"attachment float byte", `{"attachments":[{"content":[1.5]}]}`, KindInvalidAttachment, "attachments[0].content", "element 0"},
		{"attachment string byte", `{"attachments":[{"content":["1"]}]}`, KindInvalidAttachment, "attachments[0].content", "element 0"},
		{"attachment wrong buffer", `{"attachments":[{"content":{"type":"Blob","data":[1]}}]}`, KindInvalidAttachment, "attachments[0].content", "Buffer"},
		{"attachment buffer no data", `{"attachments":[{"content":{"type":"Buffer"}}]}`, KindInvalidAttachment, "attachments[0].content", "Buffer"},
		{"attachment content number", `{"attachments":[{"content":12}]}`, KindInvalidAttachment, "attachments[0].content", "base64 string"},
		{"tags object", `{"tags":{"name":"a"}}`, KindValidation, "tags", "`tags`"},
		{"tag number", `{"tags":[1]}`, KindValidation, "tags[0]", "`tags[0]`"},
		{"tag value number", `{"tags":[{"name":"a","value":1}]}`, KindValidation, "tags[0].value", "`tags[0].value`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeSendRequest([]byte(tt.body))
			var e *Error
			require.True(t, errors.As(err, &e), "got %v", err)
			require.Equal(t, tt.kind, e.Kind)
			require.Equal(t, tt.field, e.Field)
			require.Contains(t, e.Message, tt.msg)
		})
	}
}

func TestBytesDecoding(t *testing.T) {
	payload := []byte{0xfb, 0xff, 0xbf, 'h', 'i', 0}
	tests := []struct {
		name string
		json string
		want Bytes
	}{
		{"std padded", `"+/+/aGkA"`, Bytes{0xfb, 0xff, 0xbf, 'h', 'i', 0}},
		{"url unpadded", `"-_-_aGkA"`, Bytes{0xfb, 0xff, 0xbf, 'h', 'i', 0}},
		{"std padding", `"aGk="`, Bytes("hi")},
		{"no padding", `"aGk"`, Bytes("hi")},
		{"wrapped lines", "\"aGVs\\r\\nbG8=\\n\"", Bytes("hello")},
		{"escaped slash", `"\/\/\/\/"`, Bytes{0xff, 0xff, 0xff}},
		{"empty string", `""`, Bytes{}},
		{"null", `null`, nil},
		{"array", `[251, 255,191 ,104,105,0]`, Bytes(payload)},
		{"empty array", `[ ]`, Bytes{}},
		{"buffer", `{"data":[104,105],"type":"Buffer"}`, Bytes("hi")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bytes
			require.NoError(t, json.Unmarshal([]byte(tt.json), &b))
			require.Equal(t, tt.want, b)
		})
	}

	var b Bytes
	err := json.Unmarshal([]byte(`"a=b="`), &b)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, KindInvalidAttachment, e.Kind)
}

func TestAddressListDecoding(t *testing.T) {
	tests := []struct {
		json string
		want AddressList
		ok   bool
	}{
		{`"a@x.com"`, AddressList{"a@x.com"}, true},
		{`["a@x.com","b@x.com"]`, AddressList{"a@x.com", "b@x.com"}, true},
		{`null`, nil, true},
		{`""`, nil, true},
		{`[""]`, AddressList{""}, true},
		{`[null]`, nil, false},
		{`1`, nil, false},
		{`[["a@x.com"]]`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			var l AddressList
			err := json.Unmarshal([]byte(tt.json), &l)
			if !tt.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, l)
		})
	}
}

func TestSendRequestMarshalRoundTrip(t *testing.T) {
	in := SendRequest{
		From: "Acme <a@acme.com>", To: AddressList{"b@x.com"}, ReplyTo: AddressList{"r@x.com"},
		Subject: ptr("Hi"), HTML: ptr("<p>x</p>"), Text: ptr(""),
		Headers:     map[string]string{"X-A": "1"},
		Attachments: []AttachmentRequest{{Content: Bytes{0, 1, 2, 255}, Filename: "a.bin", ContentType: "application/x-a", ContentID: "c"}, {Path: "https://x.com/a"}},
		Tags:        []Tag{{Name: "a", Value: "b"}},
		ScheduledAt: ptr("2026-01-01T00:00:00Z"),
	}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := DecodeSendRequest(data)
	require.NoError(t, err)
	require.Equal(t, in, out)
}

func TestDecodeLargeByteArray(t *testing.T) {
	const n = 1 << 20
	var b strings.Builder
	b.WriteString(`{"attachments":[{"filename":"big.bin","content":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("255")
	}
	b.WriteString(`]}]}`)
	r, err := DecodeSendRequest([]byte(b.String()))
	require.NoError(t, err)
	require.Len(t, r.Attachments[0].Content, n)
}

// BenchmarkDecodeLargeAttachment decodes 4 MB attachments sent as an array
// of byte integers and as base64.
func BenchmarkDecodeLargeAttachment(b *testing.B) {
	const n = 4 << 20
	var arr strings.Builder
	arr.WriteString(`{"attachments":[{"filename":"big.bin","content":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.WriteString("255")
	}
	arr.WriteString(`]}]}`)
	b64 := `{"attachments":[{"filename":"big.bin","content":"` + base64.StdEncoding.EncodeToString(make([]byte, n)) + `"}]}`
	for _, bb := range []struct {
		name string
		body []byte
	}{{"array", []byte(arr.String())}, {"base64", []byte(b64)}} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				r, err := DecodeSendRequest(bb.body)
				if err != nil || len(r.Attachments[0].Content) != n {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestObjectFields(t *testing.T) {
	tests := []struct {
		json string
		want map[string]string
	}{
		{`{}`, map[string]string{}},
		{` { "a" : 1 , "b":[1,{"c":"}"}] } `, map[string]string{"a": "1", "b": `[1,{"c":"}"}]`}},
		{`{"s":"a\"b\\","t":"\\\\","u":true,"v":null,"w":-1.5e3}`, map[string]string{"s": `"a\"b\\"`, "t": `"\\\\"`, "u": "true", "v": "null", "w": "-1.5e3"}},
		{`{"k":1,"k":2}`, map[string]string{"k": "2"}},
		{`{"\u0066rom":"x","a\"b":"y"}`, map[string]string{"from": `"x"`, `a"b`: `"y"`}},
		{`{"n":{"deep":[[[]]],"s":"[{"}}`, map[string]string{"n": `{"deep":[[[]]],"s":"[{"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.json)))
			got, err := objectFields([]byte(tt.json))
			require.NoError(t, err)
			gotStr := map[string]string{}
			for k, v := range got {
				gotStr[k] = string(v)
			}
			require.Equal(t, tt.want, gotStr)
		})
	}
	for _, bad := range []string{`[]`, `"x"`, `1`, ``} {
		_, err := objectFields([]byte(bad))
		require.Error(t, err, bad)
	}
}

// TestDecodeStringsLikeEncodingJSON: strings decode as encoding/json
// decodes them, escapes and invalid UTF-8 included, whether they take
// the path without escapes or not.
func TestDecodeStringsLikeEncodingJSON(t *testing.T) {
	for _, lit := range []string{`"plain"`, `""`, `"caf\u00e9"`, `"a\"b\\c"`, `"tab\there"`, "\"bad \xff utf-8\"",
		"\"caf\xc3\xa9\"", `"\ud83d\ude00"`, `"\ud800 lone"`, `"<p>\/</p>"`} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(lit), &want), lit)
		body := `{"from":` + lit + `,"subject":` + lit + `,"to":` + lit + `,"cc":[` + lit + `,"x@y.z"],"tags":[{"name":` + lit + `,"value":"v"}]}`
		r, err := DecodeSendRequest([]byte(body))
		require.NoError(t, err, lit)
		require.Equal(t, want, r.From, lit)
		require.Equal(t, &want, r.Subject, lit)
		if want == "" {
			require.Empty(t, r.To, "an empty to is no address")
		} else {
			require.Equal(t, AddressList{want}, r.To, lit)
		}
		require.Equal(t, AddressList{want, "x@y.z"}, r.Cc, lit)
		require.Equal(t, want, r.Tags[0].Name, lit)
	}
	for _, to := range []string{`[null]`, `["a@b.c", 5]`, `[["a@b.c"]]`, `5`, `{"a":"b"}`} {
		_, err := DecodeSendRequest([]byte(`{"to":` + to + `}`))
		var e *Error
		require.True(t, errors.As(err, &e), to)
		require.Equal(t, "to", e.Field, to)
	}
}
