package broadcast

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/unsubscribe"
)

func ptr[T any](v T) *T { return &v }

func TestApply(t *testing.T) {
	seg := uuid.Must(uuid.NewV7()).String()
	valid := Edit{SegmentID: &seg, From: ptr("Acme <news@acme.test>"), Subject: ptr("Hi {{{FIRST_NAME|there}}}"),
		HTML: ptr("<p>Hello</p>")}
	for _, tc := range []struct {
		name  string
		edit  func(e *Edit)
		field string // "" → accepted
	}{
		{"valid", func(e *Edit) {}, ""},
		{"no segment", func(e *Edit) { e.SegmentID = nil }, "segment_id"},
		{"bad segment", func(e *Edit) { e.SegmentID = ptr("nope") }, "segment_id"},
		{"bad topic", func(e *Edit) { e.TopicID = ptr("nope") }, "topic_id"},
		{"no from", func(e *Edit) { e.From = nil }, "from"},
		{"bad from", func(e *Edit) { e.From = ptr("not an address") }, "from"},
		{"no subject", func(e *Edit) { e.Subject = nil }, "subject"},
		{"two-line subject", func(e *Edit) { e.Subject = ptr("a\r\nBcc: x@y.test") }, "subject"},
		{"bad reply-to", func(e *Edit) { e.ReplyTo = []string{"x"} }, "reply_to"},
		{"long preview", func(e *Edit) { e.PreviewText = ptr(strings.Repeat("p", MaxPreviewText+1)) }, "preview_text"},
		{"unterminated placeholder", func(e *Edit) { e.HTML = ptr("<p>{{{FIRST_NAME</p>") }, "html"},
		{"components and html", func(e *Edit) { e.Components = json.RawMessage(`{"blocks":[]}`) }, "components"},
		{"bad components", func(e *Edit) { e.HTML = nil; e.Components = json.RawMessage(`{"blocks":[{"type":"x"}]}`) }, "components"},
		{"components", func(e *Edit) {
			e.HTML = nil
			e.Components = json.RawMessage(`{"blocks":[{"type":"heading","level":1,"text":"Hi {{{FIRST_NAME|there}}}"}]}`)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := valid
			tc.edit(&e)
			var b store.Broadcast
			err := e.Apply(&b, true)
			if tc.field == "" {
				require.NoError(t, err)
				require.NotNil(t, b.HTML)
				return
			}
			var ie *invalid.Error
			require.True(t, errors.As(err, &ie), "%v", err)
			require.Equal(t, tc.field, ie.Field)
		})
	}
}

func TestComponentsAreRenderedAndHTMLClearsThem(t *testing.T) {
	var b store.Broadcast
	doc := json.RawMessage(`{"blocks":[{"type":"heading","level":1,"text":"Hi {{{FIRST_NAME|there}}}"}]}`)
	require.NoError(t, Edit{Components: doc}.Apply(&b, false))
	require.Contains(t, *b.HTML, "{{{FIRST_NAME|there}}}")
	require.Contains(t, *b.Text, "Hi {{{FIRST_NAME|there}}}")
	require.JSONEq(t, string(doc), string(b.Components))
	require.NoError(t, Edit{HTML: ptr("<p>x</p>")}.Apply(&b, false))
	require.Nil(t, b.Components, "html written by hand replaces the document")
}

func TestRender(t *testing.T) {
	props := []Property{{Key: "plan", Fallback: ptr("free")}, {Key: "score"}}
	b := store.Broadcast{Subject: "Hi {{{FIRST_NAME|there}}}", PreviewText: "News for {{{contact.first_name|you}}} & co",
		HTML: ptr(`<html><body class="x"><p>{{{contact.first_name}}} {{{LAST_NAME|}}} on {{{plan}}} ({{{contact.score|0}}})` +
			` <a href="{{{RESEND_UNSUBSCRIBE_URL}}}">unsubscribe</a></p></body></html>`),
		Text: ptr("{{{EMAIL}}} {{{contact.plan}}} {{{UNSUBSCRIBE_URL}}}")}
	c := store.BroadcastContact{Email: "ann@x.test", FirstName: "<Ann>", Properties: map[string]any{"score": 4.5}}
	r, err := Render(b, c, props)
	require.NoError(t, err)
	require.Equal(t, "Hi <Ann>", r.Subject, "subjects are text")
	require.Contains(t, *r.HTML, `<body class="x"><div style="display:none`, "the preheader comes first in the body")
	require.Contains(t, *r.HTML, "News for &lt;Ann&gt; &amp; co</div>")
	require.Contains(t, *r.HTML, "<p>&lt;Ann&gt;  on free (4.5)", "values are escaped in HTML; fallbacks apply")
	require.Contains(t, *r.HTML, `href="`+unsubscribe.Placeholder+`"`, "the send path fills each link")
	require.Equal(t, "ann@x.test free "+unsubscribe.Placeholder, *r.Text)

	// A contact without a value for a variable that has no fallback fails, naming it.
	b.HTML = ptr("<p>{{{company}}}</p>")
	_, err = Render(b, c, props)
	require.ErrorContains(t, err, "company")
}

func TestCheckSendable(t *testing.T) {
	seg := uuid.Must(uuid.NewV7())
	ok := store.Broadcast{SegmentID: &seg, From: "a@b.test", Subject: "s", HTML: ptr("<p>{{{plan}}} {{{x|y}}} {{{FIRST_NAME}}}</p>")}
	props := []Property{{Key: "plan"}}
	require.NoError(t, CheckSendable(ok, props))
	for name, b := range map[string]store.Broadcast{
		"segment_id": {From: "a@b.test", Subject: "s", HTML: ptr("x"), SegmentID: nil},
		"from":       {SegmentID: &seg, Subject: "s", HTML: ptr("x")},
		"subject":    {SegmentID: &seg, From: "a@b.test", HTML: ptr("x")},
		"html":       {SegmentID: &seg, From: "a@b.test", Subject: "s"},
	} {
		var ie *invalid.Error
		require.True(t, errors.As(CheckSendable(b, props), &ie), name)
		require.Equal(t, name, ie.Field)
	}
	unknown := ok
	unknown.Subject = "{{{nobody}}}"
	var ie *invalid.Error
	require.True(t, errors.As(CheckSendable(unknown, props), &ie))
	require.Equal(t, "subject", ie.Field)
	require.Contains(t, ie.Message, "nobody")
}
