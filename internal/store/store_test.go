package store_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return storetest.New(t)
}

// TestMigrateTwice: migrating a database that has every migration (as
// storetest's copies of its template do) changes nothing and fails
// nothing.
func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	require.NoError(t, st.Migrate(context.Background()), "migrating twice is a no-op")
	newTeam(t, st)
}

func newTeam(t *testing.T, st *store.Store) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(context.Background(), store.Team{ID: id, Name: "t"}))
	return id
}

func newEmail(team uuid.UUID, rcpts ...string) store.Email {
	e := store.Email{
		ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "Ann <onboarding@posthaste.test>",
		FromDomain: "posthaste.test", To: rcpts, Subject: "hi", LastEvent: store.EventQueued,
		CreatedAt: time.Now(), Tags: []store.Tag{{Name: "k", Value: "v"}},
		Attachments: []store.Attachment{{Filename: "a.txt", ContentType: "text/plain", Content: []byte("x")}},
	}
	for _, r := range rcpts {
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: "posthaste.test", Status: store.EventQueued})
	}
	html := "<p>hi</p>"
	e.HTML = &html
	return e
}

func TestEmailLifecycleAndTeamIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	e := newEmail(teamA, "delivered@posthaste.test", "bounced@posthaste.test")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	got, err := st.Emails.GetEmail(ctx, teamA, e.ID)
	require.NoError(t, err)
	require.Equal(t, e.Subject, got.Subject)
	require.Equal(t, "<p>hi</p>", *got.HTML)
	require.Nil(t, got.Text)
	require.Equal(t, []store.Tag{{Name: "k", Value: "v"}}, got.Tags)
	require.Len(t, got.Recipients, 2)

	_, err = st.Emails.GetEmail(ctx, teamB, e.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "team B cannot read team A's email")

	full, err := storetest.EmailForBuild(ctx, st, e.ID)
	require.NoError(t, err)
	require.Len(t, full.Attachments, 1)
	require.Equal(t, []byte("x"), full.Attachments[0].Content)

	msg, err := st.Emails.SaveMessage(ctx, e.TeamID, e.ID, "mid@posthaste.test", []byte("first"))
	require.NoError(t, err)
	require.Equal(t, []byte("first"), msg)
	msg, err = st.Emails.SaveMessage(ctx, e.TeamID, e.ID, "mid2@posthaste.test", []byte("second"))
	require.NoError(t, err)
	require.Equal(t, []byte("first"), msg, "a retried build keeps the first message")

	sent := []store.Event{{Type: store.EventSent}}
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, sent))
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: store.EventDelivered, Recipient: "delivered@posthaste.test"},
		{Type: store.EventBounced, Recipient: "bounced@posthaste.test", Detail: map[string]any{"type": "Permanent"}},
	}))
	// A retried step repeats events: nothing changes.
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, sent))
	// A late transient bounce of a delivered recipient is dropped.
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventBounced, Recipient: "delivered@posthaste.test"}}))

	got, err = st.Emails.GetEmail(ctx, teamA, e.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventBounced, got.LastEvent)
	require.Equal(t, "mid@posthaste.test", got.MessageID)
	status := map[string]string{}
	for _, r := range got.Recipients {
		status[r.Address] = r.Status
	}
	require.Equal(t, map[string]string{"delivered@posthaste.test": "delivered", "bounced@posthaste.test": "bounced"}, status)

	evs, err := st.Emails.Events(ctx, e.ID)
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type+":"+ev.Recipient)
	}
	require.Equal(t, []string{"queued:", "sent:", "delivered:delivered@posthaste.test", "bounced:bounced@posthaste.test"}, types)
	require.Equal(t, "Permanent", evs[3].Detail["type"])
}

// TestAcceptStoresEveryFieldAsGiven reads back what a batch stored,
// with values that need quoting in PostgreSQL's array and JSON syntax.
func TestAcceptStoresEveryFieldAsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	text := ""
	plain := newEmail(team, "delivered@posthaste.test")
	plain.Attachments = nil
	odd := newEmail(team, "bounced@posthaste.test", "delivered@posthaste.test")
	odd.To = []string{`"Ann \"Q\" Smith, Jr." <bounced@posthaste.test>`, `{NULL} \ ,"<delivered@posthaste.test>`}
	odd.Cc = []string{"NULL", ""}
	odd.ReplyTo = []string{"Zoë <zoe@example.com>"}
	odd.Subject = `quotes " and \ backslash`
	odd.HTML, odd.Text, odd.GenerateText = nil, &text, false
	odd.Headers = []store.Header{{Name: "X-Entity-Ref-ID", Value: `a"b\c`}}
	odd.Tags = []store.Tag{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}}
	odd.ScheduledAt, odd.LastEvent = &at, store.EventScheduled
	odd.Recipients = append(odd.Recipients, store.Recipient{Address: `"a\"b, {NULL}"@example.com`, Kind: "bcc",
		Domain: "example.com"})
	for i := range odd.Recipients {
		odd.Recipients[i].Status = store.EventScheduled
	}
	odd.Attachments = []store.Attachment{
		{Filename: "a.txt", ContentType: "text/plain", Content: []byte("first")},
		{ContentType: "image/png", ContentID: "logo", Content: []byte{0, 1, 2, 255}},
	}
	batch := uuid.Must(uuid.NewV7())
	_, err := st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{plain, odd}, BatchID: &batch})
	require.NoError(t, err)

	got, err := storetest.EmailForBuild(ctx, st, odd.ID)
	require.NoError(t, err)
	require.Equal(t, odd.To, got.To)
	require.Equal(t, odd.Cc, got.Cc)
	require.Empty(t, got.Bcc)
	require.Equal(t, odd.ReplyTo, got.ReplyTo)
	require.Equal(t, odd.Subject, got.Subject)
	require.Nil(t, got.HTML)
	require.Equal(t, &text, got.Text)
	require.False(t, got.GenerateText)
	require.Equal(t, odd.Headers, got.Headers)
	require.Equal(t, odd.Tags, got.Tags)
	require.True(t, at.Equal(*got.ScheduledAt))
	require.Equal(t, store.EventScheduled, got.LastEvent)
	require.Equal(t, &batch, got.BatchID)
	require.Equal(t, odd.Recipients, got.Recipients)
	for i := range odd.Attachments {
		odd.Attachments[i].Position = i // read back with their places
	}
	require.Equal(t, odd.Attachments, got.Attachments)

	got, err = storetest.EmailForBuild(ctx, st, plain.ID)
	require.NoError(t, err)
	require.Equal(t, plain.To, got.To)
	require.Equal(t, plain.HTML, got.HTML)
	require.Nil(t, got.Text)
	require.Empty(t, got.Headers)
	require.Equal(t, plain.Tags, got.Tags)
	require.Nil(t, got.ScheduledAt)
	require.Empty(t, got.Attachments)
	for _, e := range []store.Email{plain, odd} {
		evs, err := st.Emails.Events(ctx, e.ID)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, e.LastEvent, evs[0].Type)
	}
}

func TestListEmailsPagination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	var ids []uuid.UUID
	for range 5 {
		e := newEmail(team, "delivered@posthaste.test")
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	_, err := storetest.InsertEmail(ctx, st, newEmail(other, "delivered@posthaste.test"))
	require.NoError(t, err)

	page1, more, err := st.Emails.ListEmails(ctx, team, store.Page{Limit: 2})
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, []uuid.UUID{ids[4], ids[3]}, emailIDs(page1))
	require.Nil(t, page1[0].HTML, "lists carry no bodies")

	page2, more, err := st.Emails.ListEmails(ctx, team, store.Page{Limit: 2, After: &ids[3]})
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, []uuid.UUID{ids[2], ids[1]}, emailIDs(page2))

	page3, more, err := st.Emails.ListEmails(ctx, team, store.Page{Limit: 2, After: &ids[1]})
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []uuid.UUID{ids[0]}, emailIDs(page3))

	back, more, err := st.Emails.ListEmails(ctx, team, store.Page{Limit: 2, Before: &ids[1]})
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, []uuid.UUID{ids[3], ids[2]}, emailIDs(back))
}

func emailIDs(es []store.Email) []uuid.UUID {
	out := make([]uuid.UUID, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestDrainOutboxStartsEachEntryOnceAcrossConcurrentDrainers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	const n = 60
	for range n {
		_, err := storetest.InsertEmail(ctx, st, newEmail(team, "delivered@posthaste.test"))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	started := map[uuid.UUID]int{}
	failOnce := map[uuid.UUID]bool{}
	start := func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		mu.Lock()
		defer mu.Unlock()
		var res []store.OutboxResult
		for _, it := range items {
			if !failOnce[it.Ref] {
				// The first attempt fails: the entry must stay, due again at once.
				failOnce[it.Ref] = true
				res = append(res, store.OutboxResult{ID: it.ID, Error: "unavailable"})
				continue
			}
			started[it.Ref]++
			res = append(res, store.OutboxResult{ID: it.ID, Done: true})
		}
		return res
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4) // the drainers' first errors, checked here
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				left, err := storetest.OutboxLen(ctx, st)
				if err == nil && left == 0 {
					return
				}
				if err == nil {
					_, err = st.Webhooks.DrainOutbox(ctx, 7, start)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, started, n)
	for id, c := range started {
		require.Equal(t, 1, c, "entry %s", id)
	}
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	k := store.APIKey{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "ci", Prefix: "ph_abc",
		Hash: []byte("hash-1"), Permission: store.PermissionSendingAccess}
	require.NoError(t, st.Accounts.CreateAPIKey(ctx, k))
	dup := k
	dup.ID = uuid.Must(uuid.NewV7())
	require.ErrorIs(t, st.Accounts.CreateAPIKey(ctx, dup), store.ErrConflict)

	got, err := st.Accounts.UseAPIKey(ctx, []byte("hash-1"))
	require.NoError(t, err)
	require.Equal(t, k.ID, got.ID)
	require.NotNil(t, got.LastUsedAt)

	_, err = st.Accounts.RevokeAPIKey(ctx, other, k.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team cannot revoke it")
	hash, err := st.Accounts.RevokeAPIKey(ctx, team, k.ID)
	require.NoError(t, err)
	require.Equal(t, []byte("hash-1"), hash)
	_, err = st.Accounts.UseAPIKey(ctx, []byte("hash-1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	keys, _, err := st.Accounts.ListAPIKeys(ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, keys)
}

// TestEmailForSending: one read gives the email, its stored message once
// saved, and its attachments only when asked for.
func TestEmailForSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	e := newEmail(team, "delivered@posthaste.test")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	got, err := st.Emails.EmailForSending(ctx, e.ID, false)
	require.NoError(t, err)
	require.Equal(t, e.ID, got.Email.ID)
	require.Empty(t, got.Email.Attachments, "not asked for")
	require.Nil(t, got.Message, "not built yet")
	require.Nil(t, got.Domain, "the sandbox sender")

	_, err = st.Emails.SaveMessage(ctx, e.TeamID, e.ID, "m@x", []byte("built"))
	require.NoError(t, err)
	got, err = st.Emails.EmailForSending(ctx, e.ID, true)
	require.NoError(t, err)
	require.Equal(t, []byte("built"), got.Message)
	require.Len(t, got.Email.Attachments, 1)
	atts, err := st.Emails.Attachments(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, got.Email.Attachments, atts)

	_, err = st.Emails.EmailForSending(ctx, uuid.Must(uuid.NewV7()), false)
	require.ErrorIs(t, err, store.ErrNotFound)
}
