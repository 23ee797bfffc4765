package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// subjectFixture is one team's data naming a person, with near misses and
// another team's data that an erasure must leave alone.
type subjectFixture struct {
	teamA, teamB                   uuid.UUID
	sub                            store.Subject
	only, shared, nearMiss, others store.Email
	receivedID                     uuid.UUID
}

const subjectAddr = "pat.subject@dest.test"

func newSubjectFixture(t *testing.T, st *store.Store) subjectFixture {
	t.Helper()
	ctx := context.Background()
	f := subjectFixture{teamA: newTeam(t, st), teamB: newTeam(t, st)}
	f.sub = store.Subject{TeamID: f.teamA, Address: subjectAddr}
	insert := func(e store.Email) store.Email {
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		return e
	}
	// The address as the only recipient, in another case than asked.
	f.only = insert(newEmail(f.teamA, "Pat.Subject@Dest.test"))
	// With another recipient; the body names the person too.
	shared := newEmail(f.teamA, "Pat <pat.subject@dest.test>", "other@dest.test")
	shared.Recipients[0].Address = "pat.subject@dest.test"
	html := "<p>Hello pat.subject@dest.test and other@dest.test</p>"
	shared.HTML = &html
	shared.Attachments = append(shared.Attachments, store.Attachment{Filename: "list.txt", ContentType: "text/plain",
		Content: []byte("Guests: PAT.SUBJECT@dest.test, other@dest.test")})
	f.shared = insert(shared)
	f.nearMiss = insert(newEmail(f.teamA, "jimpat.subject@dest.test"))
	f.others = insert(newEmail(f.teamB, subjectAddr))

	for _, team := range []uuid.UUID{f.teamA, f.teamB} {
		_, err := st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: subjectAddr,
			FirstName: "Pat", Properties: map[string]any{}}, nil, nil)
		require.NoError(t, err)
		_, _, err = st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: team,
			Email: subjectAddr, Reason: store.SuppressionManual})
		require.NoError(t, err)
	}
	// A webhook event naming the person.
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA,
		Endpoint: "https://hooks.example/x", Events: []string{"contact.created"}, Status: store.WebhookEnabled,
		Secret: []byte("sealed")}))
	_, err := st.Audience.UpdateContact(ctx, f.teamA, store.ContactRef{Email: subjectAddr}, store.ContactUpdate{}, "contact.created")
	require.NoError(t, err)
	require.NoError(t, st.Insights.EnsureRequestLogPartitions(ctx, time.Now().Add(-24*time.Hour), 3))
	body := `{"email":"PAT.SUBJECT@dest.test","first_name":"Pat"}`
	other := `{"email":"other@dest.test"}`
	var logs []store.RequestLog
	for _, x := range []struct {
		team       uuid.UUID
		path, body string
	}{{f.teamA, "/contacts", body}, {f.teamA, "/contacts/pat.subject%40dest.test", other},
		{f.teamA, "/contacts", other}, {f.teamB, "/contacts", body}} {
		team := x.team
		b := x.body
		logs = append(logs, store.RequestLog{ID: uuid.Must(uuid.NewV7()), TeamID: &team, Method: "POST", Path: x.path,
			Status: 201, ClientAddr: "192.0.2.1", RequestBody: &b, CreatedAt: time.Now()})
	}
	require.NoError(t, st.Insights.InsertRequestLogs(ctx, logs))

	// Mail received from the person at a receiving domain of team A.
	d := newDomain(f.teamA, "shop.test")
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	in := store.NewInbound(st, nil)
	route := inmail.Route{Kind: inmail.RouteReceiving, TeamID: f.teamA, DomainID: d.ID}
	require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: subjectAddr,
		Recipients: []inmail.Recipient{{Address: "support@shop.test", Route: route}}, ReceivedAt: time.Now(),
		Data: []byte("From: Pat <Pat.Subject@dest.test>\r\nSubject: Hi\r\n\r\nraw body\r\n")}))
	ms, err := storetest.InboundMessages(ctx, st, f.teamA, 1)
	require.NoError(t, err)
	// A bounce about the email only to the person: its raw message (sealed
	// at rest) names them, so it is found through that email.
	report := inmail.Route{Kind: inmail.RouteReturnPath, TeamID: f.teamA, DomainID: d.ID, EmailID: f.only.ID}
	require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "",
		Recipients: []inmail.Recipient{{Address: "bounces+x@send.shop.test", Route: report}}, ReceivedAt: time.Now(),
		Data: []byte("Subject: Undelivered\r\n\r\n<pat.subject@dest.test>: no such user\r\n")}))
	f.receivedID = uuid.Must(uuid.NewV7())
	text := "plain body"
	_, _, err = st.Received.InsertReceivedEmail(ctx, store.ReceivedEmail{ID: f.receivedID, TeamID: f.teamA, DomainID: d.ID,
		InboundID: ms[0].ID, From: "Pat <pat.subject@dest.test>", To: []string{"support@shop.test"},
		ReceivedFor: []string{"support@shop.test"}, Subject: "Hi", MessageID: "<m1@dest.test>", Text: &text,
		CreatedAt: time.Now(), Attachments: []store.ReceivedAttachment{{ID: uuid.Must(uuid.NewV7()),
			Filename: "cv.pdf", ContentType: "application/pdf", Content: []byte("%PDF")}}})
	require.NoError(t, err)
	return f
}

// subjectStores runs test on a store that seals content at rest and on
// one that does not (rows written before sealing).
func subjectStores(t *testing.T, test func(t *testing.T, st *store.Store)) {
	t.Run("sealed", func(t *testing.T) {
		sealed, _, _ := sealedStore(t)
		test(t, sealed)
	})
	t.Run("plain", func(t *testing.T) { test(t, newStore(t)) })
}

func TestSubjectCollect(t *testing.T) { subjectStores(t, testSubjectCollect) }

func testSubjectCollect(t *testing.T, st *store.Store) {
	ctx := context.Background()
	f := newSubjectFixture(t, st)

	ids, err := st.Privacy.SubjectEmailIDs(ctx, f.sub, uuid.Nil, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{f.only.ID, f.shared.ID}, ids, "whole, case-insensitive address; own team only")
	page, err := st.Privacy.SubjectEmailIDs(ctx, f.sub, uuid.Nil, 1)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{f.only.ID}, page)
	next, err := st.Privacy.SubjectEmailIDs(ctx, f.sub, page[0], 1)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{f.shared.ID}, next)

	e, err := st.Privacy.SubjectEmailExport(ctx, f.teamA, f.shared.ID)
	require.NoError(t, err)
	require.Contains(t, string(e.Row), "Hello pat.subject@dest.test", "the body, opened")
	require.NotContains(t, string(e.Row), "_sealed")
	require.Contains(t, string(e.Row), `"events"`)
	require.Len(t, e.Attachments, 2)
	require.Equal(t, "0-a.txt", e.Attachments[0].Name)
	require.Equal(t, "x", string(e.Attachments[0].Content))
	_, err = st.Privacy.SubjectEmailExport(ctx, f.teamB, f.shared.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "team B cannot export team A's email")

	rids, err := st.Privacy.SubjectReceivedIDs(ctx, f.sub, uuid.Nil, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{f.receivedID}, rids)
	re, err := st.Privacy.SubjectReceivedExport(ctx, f.teamA, f.receivedID)
	require.NoError(t, err)
	require.Contains(t, string(re.Message), "Pat.Subject@dest.test")
	require.Len(t, re.Attachments, 1)

	contacts, err := st.Privacy.SubjectContacts(ctx, f.sub)
	require.NoError(t, err)
	require.Len(t, contacts, 1)
	require.Contains(t, string(contacts[0]), `"topics": []`)
	sups, err := st.Privacy.SubjectSuppressions(ctx, f.sub)
	require.NoError(t, err)
	require.Len(t, sups, 1)
	logs, _, err := st.Privacy.SubjectRequestLogs(ctx, f.sub, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, logs, 2, "the body naming it and the path naming it percent-encoded")
	hooks, _, err := st.Privacy.SubjectWebhookMessages(ctx, f.sub, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, hooks, 1)
	require.Contains(t, string(hooks[0]), `"attempts": []`)
}

func TestSubjectErase(t *testing.T) { subjectStores(t, testSubjectErase) }

func testSubjectErase(t *testing.T, st *store.Store) {
	ctx := context.Background()
	f := newSubjectFixture(t, st)

	counts, err := st.Privacy.EraseSubject(ctx, f.sub, 1)
	require.NoError(t, err)
	require.Equal(t, 1, counts[store.ErasedEmails])
	require.Equal(t, 1, counts[store.AnonymizedEmails])
	require.Equal(t, 1, counts[store.ErasedContacts])
	require.Equal(t, 1, counts[store.ErasedSuppressions])
	require.Equal(t, 1, counts[store.ErasedReceived])
	require.Equal(t, 1, counts[store.ErasedInbound], "the bounce about the erased email")
	left, err := storetest.InboundMessages(ctx, st, f.teamA, 10)
	require.NoError(t, err)
	require.Empty(t, left)
	require.Equal(t, 2, counts[store.ScrubbedRequestLogs])
	require.Equal(t, 1, counts[store.ScrubbedWebhooks])
	hooks, _, err := st.Privacy.SubjectWebhookMessages(ctx, f.sub, uuid.Nil, 10)
	require.NoError(t, err)
	require.Empty(t, hooks)

	_, err = st.Emails.GetEmail(ctx, f.teamA, f.only.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "an email only to the person is deleted")
	shared, err := st.Emails.GetEmail(ctx, f.teamA, f.shared.ID)
	require.NoError(t, err)
	require.Equal(t, []string{store.ErasedPlaceholder, "other@dest.test"}, shared.To,
		"the display name goes with the address")
	require.Equal(t, "<p>Hello "+store.ErasedPlaceholder+" and other@dest.test</p>", *shared.HTML)
	kept, err := st.Privacy.SubjectEmailExport(ctx, f.teamA, f.shared.ID)
	require.NoError(t, err)
	require.Len(t, kept.Attachments, 1, "the attachment naming the person is deleted")
	require.Equal(t, "0-a.txt", kept.Attachments[0].Name)
	var addrs []string
	for _, r := range shared.Recipients {
		addrs = append(addrs, r.Address)
	}
	require.Equal(t, []string{store.ErasedPlaceholder, "other@dest.test"}, addrs)
	near, err := st.Emails.GetEmail(ctx, f.teamA, f.nearMiss.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"jimpat.subject@dest.test"}, near.To, "another address is not touched")
	_, err = st.Emails.GetEmail(ctx, f.teamB, f.others.ID)
	require.NoError(t, err, "team B's email stays")
	_, err = storetest.SuppressionByEmail(ctx, st, f.teamB, subjectAddr)
	require.NoError(t, err, "team B's suppression stays")
	_, err = storetest.SuppressionByEmail(ctx, st, f.teamA, subjectAddr)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Received.GetReceivedEmail(ctx, f.teamA, f.receivedID)
	require.ErrorIs(t, err, store.ErrNotFound)

	for _, sub := range []store.Subject{f.sub} {
		ids, err := st.Privacy.SubjectEmailIDs(ctx, sub, uuid.Nil, 10)
		require.NoError(t, err)
		require.Empty(t, ids)
		logs, _, err := st.Privacy.SubjectRequestLogs(ctx, sub, uuid.Nil, 10)
		require.NoError(t, err)
		require.Empty(t, logs)
		contacts, err := st.Privacy.SubjectContacts(ctx, sub)
		require.NoError(t, err)
		require.Empty(t, contacts)
	}
	bLogs, _, err := st.Privacy.SubjectRequestLogs(ctx, store.Subject{TeamID: f.teamB, Address: subjectAddr}, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, bLogs, 1, "team B's request log stays")
	all, _, err := st.Insights.ListRequestLogs(ctx, f.teamA, store.LogFilter{}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, l := range all {
		full, err := st.Insights.GetRequestLog(ctx, f.teamA, l.ID)
		require.NoError(t, err)
		require.NotContains(t, strings.ToLower(full.Path+*full.RequestBody), "pat.subject")
	}

	again, err := st.Privacy.EraseSubject(ctx, f.sub, 0)
	require.NoError(t, err)
	for k, n := range again {
		require.Zero(t, n, "a second run finds nothing left (%s)", k)
	}

	// The other recipient of the shared email is erased too: the email's
	// recipients stay distinct (they were both the placeholder once, which
	// the email's shape refuses).
	_, err = st.Privacy.EraseSubject(ctx, store.Subject{TeamID: f.teamA, Address: "other@dest.test"}, 0)
	require.NoError(t, err)
	shared, err = st.Emails.GetEmail(ctx, f.teamA, f.shared.ID)
	require.NoError(t, err)
	addrs = nil
	for _, r := range shared.Recipients {
		addrs = append(addrs, r.Address)
	}
	require.Equal(t, []string{store.ErasedPlaceholder, "erased+2@erased.invalid"}, addrs)
	require.Equal(t, "<p>Hello "+store.ErasedPlaceholder+" and "+store.ErasedPlaceholder+"</p>", *shared.HTML)
}
