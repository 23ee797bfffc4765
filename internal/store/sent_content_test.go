package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestSentContentKeepsPositionsAfterAnErasure: an erasure deletes the
// sealed attachment that names the person from an email it anonymises;
// the others still open (each was sealed under its position, not its
// index among those left) and keep their positions, which name them.
func TestSentContentKeepsPositionsAfterAnErasure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, _ := sealedStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	e := newEmail(teamA, "pat@dest.test", "other@dest.test")
	e.Attachments = []store.Attachment{
		{Filename: "a.txt", ContentType: "text/plain", Content: []byte("first")},
		{Filename: "b.txt", ContentType: "text/plain", Content: []byte("to pat@dest.test")},
		{Filename: "c.png", ContentType: "image/png", ContentID: "logo", Content: []byte("third")},
	}
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	c, err := st.Emails.SentContent(ctx, teamA, e.ID)
	require.NoError(t, err)
	require.True(t, c.HasHTML)
	require.Nil(t, c.Source)
	require.Len(t, c.Attachments, 3)
	require.Equal(t, 2, c.Attachments[2].Position)

	_, err = st.Privacy.EraseSubject(ctx, store.Subject{TeamID: teamA, Address: "pat@dest.test"}, 0)
	require.NoError(t, err)
	c, err = st.Emails.SentContent(ctx, teamA, e.ID)
	require.NoError(t, err)
	require.Len(t, c.Attachments, 2)
	require.Equal(t, 0, c.Attachments[0].Position)
	require.Equal(t, "first", string(c.Attachments[0].Content))
	require.Equal(t, 2, c.Attachments[1].Position)
	require.Equal(t, "third", string(c.Attachments[1].Content))
	require.Equal(t, "logo", c.Attachments[1].ContentID)

	_, err = st.Emails.SentContent(ctx, teamB, e.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's email")
}
