package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func newContact(team uuid.UUID, email string) store.Contact {
	return store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: email}
}

func TestContactsUniqueByNormalisedAddressAndIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)

	c, err := st.Audience.CreateContact(ctx, newContact(teamA, "Steve@Example.com"), nil, nil)
	require.NoError(t, err)
	require.Equal(t, "steve@example.com", c.Email)
	_, err = st.Audience.CreateContact(ctx, newContact(teamA, "STEVE@example.COM"), nil, nil)
	require.ErrorIs(t, err, store.ErrConflict, "addresses compare like the suppression list's")
	_, err = st.Audience.CreateContact(ctx, newContact(teamB, "steve@example.com"), nil, nil)
	require.NoError(t, err, "another team may have the same contact")

	got, err := st.Audience.Contact(ctx, teamA, store.ContactRef{Email: "STEVE@EXAMPLE.COM"})
	require.NoError(t, err)
	require.Equal(t, c.ID, got.ID)

	_, err = st.Audience.Contact(ctx, teamB, store.ContactRef{ID: &c.ID})
	require.ErrorIs(t, err, store.ErrNotFound)
	first := "Mallory"
	_, err = st.Audience.UpdateContact(ctx, teamB, store.ContactRef{ID: &c.ID}, store.ContactUpdate{FirstName: &first})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Audience.DeleteContact(ctx, teamB, store.ContactRef{ID: &c.ID})
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err = st.Audience.Contact(ctx, teamA, store.ContactRef{ID: &c.ID})
	require.NoError(t, err)
	require.Empty(t, got.FirstName, "team B changed nothing")

	// Team B's segments and topics cannot be attached to team A's contacts.
	segB, err := st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: teamB, Name: "B"})
	require.NoError(t, err)
	err = st.Audience.AddContactToSegment(ctx, teamA, c.ID, segB.ID)
	var re *store.RefError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, "segment", re.What)
	require.Equal(t, segB.ID, re.ID)
	_, err = st.Audience.Segment(ctx, teamA, segB.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Audience.DeleteSegment(ctx, teamA, segB.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestContactSearchTakesPatternCharactersLiterally(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	for _, e := range []string{"ann_lee@example.com", "annxlee@example.com", "bob@example.com"} {
		_, err := st.Audience.CreateContact(ctx, newContact(team, e), nil, nil)
		require.NoError(t, err)
	}
	list, _, err := st.Audience.ListContacts(ctx, team, store.ContactFilter{Search: "ann_"}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "ann_lee@example.com", list[0].Email)
	list, _, err = st.Audience.ListContacts(ctx, team, store.ContactFilter{Search: "%"}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestTopicBlocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	newTopic := func(def string) store.Topic {
		tp, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: def,
			DefaultSubscription: def, Visibility: "private"})
		require.NoError(t, err)
		return tp
	}
	optIn, optOut := newTopic(store.TopicOptIn), newTopic(store.TopicOptOut)
	mk := func(email string, unsub bool, topics ...store.TopicChoice) {
		c := newContact(team, email)
		c.Unsubscribed = unsub
		_, err := st.Audience.CreateContact(ctx, c, nil, topics)
		require.NoError(t, err)
	}
	mk("default@example.com", false)
	mk("left-in@example.com", false, store.TopicChoice{TopicID: optIn.ID, Subscription: store.TopicOptOut})
	mk("joined-out@example.com", false, store.TopicChoice{TopicID: optOut.ID, Subscription: store.TopicOptIn})
	mk("unsub@example.com", true, store.TopicChoice{TopicID: optOut.ID, Subscription: store.TopicOptIn})
	all := []string{"Default@example.com", "left-in@example.com", "joined-out@example.com", "unsub@example.com", "stranger@example.com"}

	blocked, err := st.Audience.TopicBlocked(ctx, team, optIn.ID, all)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"left-in@example.com": true, "unsub@example.com": true}, blocked)

	blocked, err = st.Audience.TopicBlocked(ctx, team, optOut.ID, all)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"default@example.com": true, "left-in@example.com": true,
		"unsub@example.com": true, "stranger@example.com": true}, blocked)

	_, err = st.Audience.TopicBlocked(ctx, other, optIn.ID, all)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's topic")
}

func TestDeletingAPropertyRemovesItsValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	p, err := st.Audience.CreateContactProperty(ctx, store.ContactProperty{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Key: "company", Type: store.PropertyString, Fallback: "Acme"})
	require.NoError(t, err)
	require.Equal(t, "Acme", p.Fallback)
	c := newContact(team, "a@example.com")
	c.Properties = map[string]any{"company": "Initech", "age": 42.0}
	c, err = st.Audience.CreateContact(ctx, c, nil, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"company": "Initech", "age": 42.0}, c.Properties)
	_, err = st.Audience.DeleteContactProperty(ctx, team, p.ID)
	require.NoError(t, err)
	c, err = st.Audience.Contact(ctx, team, store.ContactRef{ID: &c.ID})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"age": 42.0}, c.Properties)
}
