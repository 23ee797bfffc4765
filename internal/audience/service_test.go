package audience_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type fixture struct {
	st    *store.Store
	svc   *audience.Service
	team  uuid.UUID
	other uuid.UUID
	hook  uuid.UUID
}

// newFixture makes two teams; the first has a webhook endpoint subscribed
// to every audience event, so the events written with each change can be
// read back.
func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	f := fixture{st: st, svc: audience.New(st.Audience), team: uuid.Must(uuid.NewV7()), other: uuid.Must(uuid.NewV7()),
		hook: uuid.Must(uuid.NewV7())}
	for _, team := range []uuid.UUID{f.team, f.other} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: f.hook, TeamID: f.team, Endpoint: "https://hooks.example/x",
		Status: "enabled", Secret: []byte("s"), Events: []string{audience.EventContactCreated, audience.EventContactUpdated,
			audience.EventContactDeleted, audience.EventContactTopicsUpdated, audience.EventTopicCreated,
			audience.EventTopicUpdated, audience.EventTopicDeleted}}))
	return f
}

// events are the types of the events written so far, oldest first.
func (f fixture) events(t *testing.T) []string {
	t.Helper()
	msgs, _, err := f.st.Webhooks.ListWebhookMessages(context.Background(), f.team, f.hook, store.Page{Limit: 100})
	require.NoError(t, err)
	var types []string
	for _, m := range msgs {
		types = append(types, m.Type)
	}
	slices.Reverse(types) // listed newest first
	return types
}

func ptr[T any](v T) *T { return &v }

// requireInvalid checks that err is an *invalid.Error with message (and
// missing when the field is absent).
func requireInvalid(t *testing.T, err error, message string, missing bool) {
	t.Helper()
	var ie *invalid.Error
	require.True(t, errors.As(err, &ie), "%v is not an *invalid.Error", err)
	require.Equal(t, message, ie.Message)
	require.Equal(t, missing, ie.Missing)
}

func TestServiceRejectsBadInput(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("seats"), Type: ptr(store.PropertyNumber)})
	require.NoError(t, err)
	topic, err := f.svc.CreateTopic(ctx, f.team, audience.TopicInput{Name: ptr("News"), DefaultSubscription: ptr(store.TopicOptIn)})
	require.NoError(t, err)
	prop, err := f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("plan"), Type: ptr(store.PropertyString)})
	require.NoError(t, err)
	long := string(make([]byte, 300))
	cases := []struct {
		name    string
		call    func() error
		message string
		missing bool
	}{
		{"contact without email", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("  ")})
			return err
		}, "Missing `email` field.", true},
		{"contact bad email", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("Ann <ann@example.com>")})
			return err
		}, "The `email` field must be an email address such as someone@example.com.", false},
		{"contact long name", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("a@example.com"), LastName: &long})
			return err
		}, "The `last_name` field must be at most 256 characters.", false},
		{"contact bad segment", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("a@example.com"), Segments: []string{"x"}})
			return err
		}, "The `segments` field must be a list of segment ids; \"x\" is not one.", false},
		{"contact bad topic id", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("a@example.com"),
				Topics: []audience.TopicChoice{{ID: "x", Subscription: store.TopicOptIn}}})
			return err
		}, "Each entry of `topics` must have the `id` of a topic; \"x\" is not one.", false},
		{"contact bad subscription", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("a@example.com"),
				Topics: []audience.TopicChoice{{ID: topic.ID.String(), Subscription: "maybe"}}})
			return err
		}, "The `subscription` of topic " + topic.ID.String() + " must be `opt_in` or `opt_out`.", false},
		{"contact unknown property", func() error {
			_, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("a@example.com"),
				Properties: map[string]any{"colour": "red"}})
			return err
		}, "Unknown contact property `colour`: create it with POST /contact-properties first.", false},
		{"contact property of the wrong type", func() error {
			_, err := f.svc.UpdateContact(ctx, f.team, store.ContactRef{Email: "a@example.com"}, audience.ContactInput{
				Properties: map[string]any{"seats": "three"}})
			return err
		}, "The contact property `seats` must be a number.", false},
		{"segment without name", func() error {
			_, err := f.svc.CreateSegment(ctx, f.team, ptr(" "))
			return err
		}, "Missing `name` field.", true},
		{"topic without name", func() error {
			_, err := f.svc.CreateTopic(ctx, f.team, audience.TopicInput{DefaultSubscription: ptr(store.TopicOptIn)})
			return err
		}, "Missing `name` field.", true},
		// The API checks default_subscription before the other fields, the
		// dashboard after them.
		{"topic: default subscription first", func() error {
			_, err := f.svc.CreateTopic(ctx, f.team, audience.TopicInput{Name: ptr(""), DefaultSubscription: ptr("")})
			return err
		}, "The `default_subscription` field must be `opt_in` or `opt_out`.", false},
		{"topic: fields first", func() error {
			_, err := f.svc.CreateTopic(ctx, f.team, audience.TopicInput{Name: ptr(""), DefaultSubscription: ptr(""), FieldsFirst: true})
			return err
		}, "The `name` field must be 1 to 50 characters.", false},
		{"topic default subscription fixed", func() error {
			_, err := f.svc.UpdateTopic(ctx, f.team, topic.ID, audience.TopicInput{DefaultSubscription: ptr(store.TopicOptOut)})
			return err
		}, "The `default_subscription` of a topic cannot be changed after creation.", false},
		{"property without key", func() error {
			_, err := f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Type: ptr(store.PropertyString)})
			return err
		}, "Missing `key` field.", true},
		{"property bad key", func() error {
			_, err := f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("a-b"), Type: ptr(store.PropertyString)})
			return err
		}, "The `key` field must be 1 to 50 letters, digits or underscores.", false},
		{"property bad type", func() error {
			_, err := f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("ab"), Type: ptr("date")})
			return err
		}, "The `type` field must be `string` or `number`.", false},
		{"property bad fallback", func() error {
			_, err := f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("ab"), Type: ptr(store.PropertyNumber),
				FallbackValue: json.RawMessage(`"1"`)})
			return err
		}, "The `fallback_value` field of a number property must be a number.", false},
		{"property type fixed", func() error {
			_, err := f.svc.UpdateProperty(ctx, f.team, prop.ID, audience.PropertyInput{Type: ptr(store.PropertyNumber)})
			return err
		}, "The `key` and `type` of a contact property cannot be changed.", false},
	}
	_, err = f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("a@example.com")})
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireInvalid(t, tc.call(), tc.message, tc.missing)
		})
	}
}

func TestServiceContactsWriteTheirEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	seg, err := f.svc.CreateSegment(ctx, f.team, ptr(" Customers "))
	require.NoError(t, err)
	require.Equal(t, "Customers", seg.Name)
	topic, err := f.svc.CreateTopic(ctx, f.team, audience.TopicInput{Name: ptr(" News "), DefaultSubscription: ptr(store.TopicOptOut)})
	require.NoError(t, err)
	require.Equal(t, "News", topic.Name)
	require.Equal(t, audience.TopicVisibilityPrivate, topic.Visibility)
	_, err = f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("seats"), Type: ptr(store.PropertyNumber),
		FallbackValue: json.RawMessage(`1`)})
	require.NoError(t, err)

	ct, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr(" Ann@Example.COM "), FirstName: ptr("Ann"),
		Properties: map[string]any{"seats": 3.0}, Segments: []string{seg.ID.String()},
		Topics: []audience.TopicChoice{{ID: topic.ID.String(), Subscription: store.TopicOptIn}}})
	require.NoError(t, err)
	require.Equal(t, "ann@example.com", ct.Email)
	require.Equal(t, []uuid.UUID{seg.ID}, ct.SegmentIDs)
	require.Equal(t, map[string]any{"seats": 3.0}, ct.Properties)

	// The address is taken: an AddressTakenError, still a store.ErrConflict.
	_, err = f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("ann@example.com")})
	var taken *audience.AddressTakenError
	require.ErrorAs(t, err, &taken)
	require.Equal(t, "ann@example.com", taken.Email)
	require.ErrorIs(t, err, store.ErrConflict)
	// A segment the team does not have.
	_, err = f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("bob@example.com"),
		Segments: []string{uuid.NewString()}})
	var re *store.RefError
	require.ErrorAs(t, err, &re)
	// Another team's lookups find nothing.
	_, err = f.svc.Contact(ctx, f.other, store.ContactRef{ID: &ct.ID})
	require.ErrorIs(t, err, store.ErrNotFound)

	ref := store.ContactRef{ID: &ct.ID}
	ct, err = f.svc.UpdateContact(ctx, f.team, ref, audience.ContactInput{LastName: ptr("Lee"), Properties: map[string]any{"seats": nil}})
	require.NoError(t, err)
	require.Equal(t, "Lee", ct.LastName)
	require.Empty(t, ct.Properties)
	require.NoError(t, f.svc.RemoveFromSegment(ctx, f.team, ct.ID, seg.ID))
	require.ErrorIs(t, f.svc.RemoveFromSegment(ctx, f.team, ct.ID, seg.ID), store.ErrNotFound)
	require.NoError(t, f.svc.AddToSegment(ctx, f.team, ct.ID, seg.ID))
	choices, err := f.svc.UpdateContactTopics(ctx, f.team, ct.ID, []audience.TopicChoice{{ID: topic.ID.String(), Subscription: store.TopicOptOut}})
	require.NoError(t, err)
	require.Equal(t, []store.TopicChoice{{TopicID: topic.ID, Subscription: store.TopicOptOut}}, choices)
	_, err = f.svc.DeleteContact(ctx, f.team, ref)
	require.NoError(t, err)
	_, err = f.svc.UpdateTopic(ctx, f.team, topic.ID, audience.TopicInput{Name: ptr(" Weekly "), DefaultSubscription: ptr(store.TopicOptOut)})
	require.NoError(t, err)
	_, err = f.svc.DeleteTopic(ctx, f.team, topic.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"topic.created", "contact.created", "contact.updated", "contact.updated", "contact.updated",
		audience.EventContactTopicsUpdated, "contact.deleted", "topic.updated", "topic.deleted"}, f.events(t))
}

func TestServiceSaveContactPage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	seg, err := f.svc.CreateSegment(ctx, f.team, ptr("Customers"))
	require.NoError(t, err)
	topic, err := f.svc.CreateTopic(ctx, f.team, audience.TopicInput{Name: ptr("News"), DefaultSubscription: ptr(store.TopicOptIn)})
	require.NoError(t, err)
	_, err = f.svc.CreateProperty(ctx, f.team, audience.PropertyInput{Key: ptr("seats"), Type: ptr(store.PropertyNumber)})
	require.NoError(t, err)
	ct, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("ann@example.com")})
	require.NoError(t, err)
	page := audience.ContactPage{Email: " ann@example.com ", FirstName: " Ann ", Properties: map[string]string{"seats": "three"},
		Topics: map[string]string{topic.ID.String(): store.TopicOptOut}, Segments: []uuid.UUID{seg.ID}}

	// A rejected save writes nothing and returns the page as typed.
	shown, err := f.svc.SaveContactPage(ctx, f.team, ct, page)
	requireInvalid(t, err, "The contact property `seats` must be a number.", false)
	require.Equal(t, "Ann", shown.Contact.FirstName)
	require.Equal(t, map[string]any{"seats": "three"}, shown.Contact.Properties)
	require.Equal(t, store.TopicOptOut, shown.Topics[0].Subscription)
	got, err := f.svc.Contact(ctx, f.team, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	require.Empty(t, got.SegmentIDs)
	bad := page
	bad.Topics = map[string]string{topic.ID.String(): "maybe"}
	_, err = f.svc.SaveContactPage(ctx, f.team, ct, bad)
	requireInvalid(t, err, "The `subscription` of topic "+topic.ID.String()+" must be `opt_in` or `opt_out`.", false)

	page.Properties["seats"] = "3"
	_, err = f.svc.SaveContactPage(ctx, f.team, ct, page)
	require.NoError(t, err)
	got, err = f.svc.Contact(ctx, f.team, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	require.Equal(t, "Ann", got.FirstName)
	require.Equal(t, map[string]any{"seats": 3.0}, got.Properties)
	require.Equal(t, []uuid.UUID{seg.ID}, got.SegmentIDs)
	topics, _, err := f.svc.ContactTopics(ctx, f.team, ct.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.TopicOptOut, topics[0].Subscription)
	// Membership changes are reported by the one contact.updated of the save.
	require.Equal(t, []string{"topic.created", "contact.created", "contact.updated", audience.EventContactTopicsUpdated}, f.events(t))
}

// TestServiceAudienceContacts covers the legacy /audiences/{id}/contacts:
// a contact confined to a segment, created into one, another team's
// segment, and the events written.
func TestServiceAudienceContacts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud, err := f.svc.CreateSegment(ctx, f.team, ptr("Registered"))
	require.NoError(t, err)
	beta, err := f.svc.CreateSegment(ctx, f.team, ptr("Beta"))
	require.NoError(t, err)
	theirs, err := f.svc.CreateSegment(ctx, f.other, ptr("Theirs"))
	require.NoError(t, err)

	ct, created, err := f.svc.CreateContactIn(ctx, f.team, aud.ID, audience.ContactInput{Email: ptr("Ann@Example.com"),
		FirstName: ptr("Ann"), Segments: []string{beta.ID.String()}})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, []uuid.UUID{aud.ID}, ct.SegmentIDs, "only the audience of the path")
	// The address under a second audience: the contact joins it, unchanged.
	again, created, err := f.svc.CreateContactIn(ctx, f.team, beta.ID, audience.ContactInput{Email: ptr("ann@example.com"),
		FirstName: ptr("Other")})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, ct.ID, again.ID)
	require.Equal(t, "Ann", again.FirstName)
	require.Equal(t, []uuid.UUID{aud.ID, beta.ID}, again.SegmentIDs)
	// Already in it: the address is taken.
	_, _, err = f.svc.CreateContactIn(ctx, f.team, beta.ID, audience.ContactInput{Email: ptr("ann@example.com")})
	var taken *audience.AddressTakenError
	require.ErrorAs(t, err, &taken)
	other, err := f.svc.CreateContact(ctx, f.team, audience.ContactInput{Email: ptr("bob@example.com")})
	require.NoError(t, err)

	in := func(seg uuid.UUID, ref store.ContactRef) store.ContactRef { ref.Segment = &seg; return ref }
	byID, byEmail := store.ContactRef{ID: &ct.ID}, store.ContactRef{Email: "ANN@example.com"}
	got, err := f.svc.Contact(ctx, f.team, in(aud.ID, byEmail))
	require.NoError(t, err)
	require.Equal(t, ct.ID, got.ID)

	notMember := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrNotFound)
		var re *store.RefError
		require.False(t, errors.As(err, &re), "a missing contact, not a missing audience: %v", err)
	}
	missingAudience := func(t *testing.T, err error) {
		t.Helper()
		var re *store.RefError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "segment", re.What)
	}
	cases := []struct {
		name  string
		team  uuid.UUID
		ref   store.ContactRef
		check func(*testing.T, error)
	}{
		{"not a member", f.team, in(aud.ID, store.ContactRef{ID: &other.ID}),
			notMember},
		{"unknown audience", f.team, in(uuid.New(), byID), missingAudience},
		{"another team's audience", f.team, in(theirs.ID, byID), missingAudience},
		{"another team", f.other, in(aud.ID, byEmail), missingAudience},
		{"another team's own audience", f.other, in(theirs.ID, byEmail),
			notMember},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Contact(ctx, tc.team, tc.ref)
			tc.check(t, err)
			_, err = f.svc.UpdateContact(ctx, tc.team, tc.ref, audience.ContactInput{LastName: ptr("X")})
			tc.check(t, err)
			_, err = f.svc.DeleteContact(ctx, tc.team, tc.ref)
			tc.check(t, err)
		})
	}
	_, _, err = f.svc.CreateContactIn(ctx, f.team, theirs.ID, audience.ContactInput{Email: ptr("eve@example.com")})
	missingAudience(t, err)
	_, _, err = f.svc.CreateContactIn(ctx, f.other, aud.ID, audience.ContactInput{Email: ptr("eve@example.com")})
	missingAudience(t, err)
	_, _, err = f.svc.CreateContactIn(ctx, f.team, aud.ID, audience.ContactInput{Email: ptr("not an address")})
	requireInvalid(t, err, "The `email` field must be an email address such as someone@example.com.", false)

	ct, err = f.svc.UpdateContact(ctx, f.team, in(aud.ID, byID), audience.ContactInput{LastName: ptr("Lee")})
	require.NoError(t, err)
	require.Equal(t, "Lee", ct.LastName)
	_, err = f.svc.DeleteContact(ctx, f.team, in(beta.ID, byEmail))
	require.NoError(t, err)
	_, err = f.svc.Contact(ctx, f.team, byID)
	require.ErrorIs(t, err, store.ErrNotFound, "deleting within an audience deletes the contact")
	require.Equal(t, []string{"contact.created", "contact.updated", "contact.created", "contact.updated",
		"contact.deleted"}, f.events(t))
}
