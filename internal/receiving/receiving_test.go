package receiving_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/store"
)

// fakeStore serves attachment contents from a map and counts the reads.
type fakeStore struct {
	receiving.Store
	content map[uuid.UUID][]byte
	reads   int
}

func (f *fakeStore) ReceivedAttachmentContent(_ context.Context, _, _, id uuid.UUID) (store.ReceivedAttachment, error) {
	f.reads++
	c, ok := f.content[id]
	if !ok {
		return store.ReceivedAttachment{}, store.ErrNotFound
	}
	return store.ReceivedAttachment{ID: id, Content: c}, nil
}

func (f *fakeStore) InboundUsage(_ context.Context, _ uuid.UUID, now time.Time) (inmail.Usage, error) {
	return inmail.Usage{Messages: int64(now.Day())}, nil
}

// TestInlineImages: the API (any inline attachment the HTML refers to) and
// the dashboard's preview (images only) embed what each did before the
// Service, within one budget, and leave unreferenced ones unread.
func TestInlineImages(t *testing.T) {
	t.Parallel()
	png, css, unused, big := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	f := &fakeStore{content: map[uuid.UUID][]byte{png: []byte("PNG"), css: []byte("p{}"), unused: []byte("x"),
		big: []byte("BIG")}}
	html := `<img src="cid:logo"><link href="cid:style"><img src="cid:huge">`
	e := store.ReceivedEmail{ID: uuid.New(), TeamID: uuid.New(), HTML: &html, Attachments: []store.ReceivedAttachment{
		{ID: png, ContentType: "image/png", ContentID: "logo", Size: 3},
		{ID: css, ContentType: "text/css", ContentID: "style", Size: 3},
		{ID: unused, ContentType: "image/gif", ContentID: "nowhere", Size: 1},
		{ID: big, ContentType: "image/png", ContentID: "huge", Size: receiving.MaxInlineBytes},
	}}
	s := receiving.New(f)
	for _, tc := range []struct {
		name  string
		o     receiving.InlineOptions
		want  string
		reads int
	}{
		{"api", receiving.InlineOptions{},
			`<img src="data:image/png;base64,UE5H"><link href="data:text/css;base64,cHt9"><img src="cid:huge">`, 2},
		{"dashboard", receiving.InlineOptions{ImagesOnly: true},
			`<img src="data:image/png;base64,UE5H"><link href="cid:style"><img src="cid:huge">`, 1},
	} {
		f.reads = 0
		got, err := s.InlineImages(context.Background(), e, tc.o)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
		require.Equal(t, tc.reads, f.reads, tc.name)
	}

	delete(f.content, png)
	_, err := s.InlineImages(context.Background(), e, receiving.InlineOptions{})
	require.True(t, errors.Is(err, store.ErrNotFound), "a failed read is the caller's error: %v", err)
}

func TestUsageIsOfTheDayGiven(t *testing.T) {
	t.Parallel()
	u, err := receiving.New(&fakeStore{}).Usage(context.Background(), uuid.New(), time.Date(2025, 3, 7, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, int64(7), u.Messages)
}
