package submit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// topicStore is a memberStore whose team has one topic.
type topicStore struct {
	memberStore
	topic uuid.UUID
}

func (s *topicStore) Topic(_ context.Context, _, id uuid.UUID) (store.Topic, error) {
	if id != s.topic {
		return store.Topic{}, store.ErrNotFound
	}
	return store.Topic{ID: id}, nil
}

// TestTemplateUnsubscribeURLWithTopic: with a topic_id, the reserved
// unsubscribe variables render as the placeholder each recipient's link
// replaces at delivery; without one, a template using them without a
// fallback is refused naming the variable, as any missing variable.
func TestTemplateUnsubscribeURLWithTopic(t *testing.T) {
	v := store.TemplateContent{
		Subject: ptr("News"),
		HTML:    `<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a> <a href="{{{UNSUBSCRIBE_URL}}}">x</a>`,
		Text:    ptr("Unsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}"),
	}
	topic := uuid.NewString()
	r := SendRequest{From: "a@acme.test", To: AddressList{"b@x.test"}, TopicID: &topic, Template: &TemplateRequest{ID: "t"}}
	out, err := r.WithTemplate(v)
	require.NoError(t, err)
	require.Equal(t, `<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a> <a href="{{{RESEND_UNSUBSCRIBE_URL}}}">x</a>`, *out.HTML)
	require.Equal(t, "Unsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}", *out.Text)

	r.TopicID = nil
	_, err = r.WithTemplate(v)
	var se *Error
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, KindValidation, se.Kind)
	require.Equal(t, "template.variables.RESEND_UNSUBSCRIBE_URL", se.Field)

	// A fallback still renders without a topic.
	v.HTML, v.Text = `<a href="{{{RESEND_UNSUBSCRIBE_URL|https://acme.test/prefs}}}">x</a>`, nil
	out, err = r.WithTemplate(v)
	require.NoError(t, err)
	require.Equal(t, `<a href="https://acme.test/prefs">x</a>`, *out.HTML)
}

// TestTopicSendsNeedAPublicURL: unsubscribe links need the public URL, so
// without it sends with a topic are refused (422) rather than accepted and
// failed later; sends without a topic are not affected.
func TestTopicSendsNeedAPublicURL(t *testing.T) {
	text := "Unsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}"
	topic := uuid.New()
	topicText := topic.String()
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	for _, tt := range []struct {
		name      string
		publicURL string
		topic     *string
		field     string // the *Error field refused, "" for accepted
	}{
		{"topic and public URL", "https://mail.acme.test", &topicText, ""},
		{"topic without public URL", "", &topicText, "topic_id"},
		{"no topic without public URL", "", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &topicStore{topic: topic}
			s := New(Config{Store: st, Now: now, PublicURL: tt.publicURL})
			req := SendRequest{From: "onboarding@posthaste.test", To: []string{"member@example.com"}, Subject: &text,
				Text: &text, TopicID: tt.topic}
			_, err := s.Send(context.Background(), Sender{TeamID: uuid.New()}, req)
			if tt.field == "" {
				require.NoError(t, err)
				require.Len(t, st.accepted, 1)
				return
			}
			var se *Error
			require.True(t, errors.As(err, &se), "%v", err)
			require.Equal(t, KindValidation, se.Kind)
			require.Equal(t, tt.field, se.Field)
			require.Contains(t, se.Message, "POSTHASTE_PUBLIC_URL")
			require.Empty(t, st.accepted)
		})
	}
}
