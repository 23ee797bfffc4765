package store_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/datakey"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// sealedStore returns a store opened the way every process opens it, with
// a fresh master key (Config.MasterKey), which seals content; a store of
// the same database without a key; and a direct connection for reading
// the columns as stored.
func sealedStore(t *testing.T) (sealed, plain *store.Store, db *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	plain, url := storetest.NewWithURL(t)
	key, err := seal.NewKey()
	require.NoError(t, err)
	raw, err := seal.ParseKey(key)
	require.NoError(t, err)
	box, err := seal.New(raw)
	require.NoError(t, err)
	db, err = pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	return storetest.Open(t, store.Config{URL: url, MasterKey: box}), plain, db
}

// rawBytes returns every bytea and text value of the rows query selects,
// as stored.
func rawBytes(t *testing.T, db *pgx.Conn, query string, args ...any) [][]byte {
	t.Helper()
	rows, err := db.Query(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		vals := rows.RawValues()
		for _, v := range vals {
			out = append(out, append([]byte(nil), v...))
		}
	}
	require.NoError(t, rows.Err())
	return out
}

func requireNoPlaintext(t *testing.T, vals [][]byte, marker string) {
	t.Helper()
	require.NotEmpty(t, vals)
	for _, v := range vals {
		require.False(t, bytes.Contains(v, []byte(marker)), "%q stored in plaintext", marker)
	}
}

func TestSentContentIsSealedAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, plain, db := sealedStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)

	html, text := "<p>html-marker-41</p>", "text-marker-41"
	e := newEmail(teamA, "delivered@posthaste.test")
	e.HTML, e.Text = &html, &text
	e.Attachments = []store.Attachment{{Filename: "a.bin", ContentType: "application/octet-stream", Content: []byte("attachment-marker-41")},
		{Filename: "b.bin", ContentType: "application/octet-stream", Content: []byte("second-attachment-marker-41")}}
	smtp := newEmail(teamA, "delivered@posthaste.test")
	smtp.HTML, smtp.Attachments = nil, nil
	smtp.Source = []byte("Subject: s\r\n\r\nsource-marker-41\r\n")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	_, err = storetest.InsertEmail(ctx, st, smtp)
	require.NoError(t, err)
	require.Equal(t, "<p>html-marker-41</p>", *e.HTML, "the caller's email is left as it was")
	_, err = st.Emails.SaveMessage(ctx, teamA, e.ID, "m@x", []byte("Subject: b\r\n\r\nmessage-marker-41\r\n"))
	require.NoError(t, err)

	// As stored: no plaintext, and the text columns empty.
	for _, q := range []struct{ sql, marker string }{
		{`SELECT html, text_body, html_sealed, text_sealed FROM email WHERE id = $1`, "html-marker-41"},
		{`SELECT html, text_body, html_sealed, text_sealed FROM email WHERE id = $1`, "text-marker-41"},
		{`SELECT content FROM attachment WHERE email_id = $1`, "attachment-marker-41"},
		{`SELECT data FROM email_message WHERE email_id = $1`, "message-marker-41"},
	} {
		requireNoPlaintext(t, rawBytes(t, db, q.sql, e.ID), q.marker)
	}
	requireNoPlaintext(t, rawBytes(t, db, `SELECT data FROM email_source WHERE email_id = $1`, smtp.ID), "source-marker-41")
	var htmlCol, textCol *string
	require.NoError(t, db.QueryRow(ctx, `SELECT html, text_body FROM email WHERE id = $1`, e.ID).Scan(&htmlCol, &textCol))
	require.Nil(t, htmlCol)
	require.Nil(t, textCol)
	var keys int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM team_data_key WHERE team_id = $1`, teamA).Scan(&keys))
	require.Equal(t, 1, keys, "one data key for the team's values")

	// Read back: the plaintext.
	got, err := st.Emails.GetEmail(ctx, teamA, e.ID)
	require.NoError(t, err)
	require.Equal(t, html, *got.HTML)
	require.Equal(t, text, *got.Text)
	send, err := st.Emails.EmailForSending(ctx, e.ID, true)
	require.NoError(t, err)
	require.Equal(t, html, *send.Email.HTML)
	require.Equal(t, []byte("attachment-marker-41"), send.Email.Attachments[0].Content)
	require.Equal(t, []byte("second-attachment-marker-41"), send.Email.Attachments[1].Content)
	require.Equal(t, "Subject: b\r\n\r\nmessage-marker-41\r\n", string(send.Message))
	atts, err := st.Emails.Attachments(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, []byte("attachment-marker-41"), atts[0].Content)
	msg, err := st.Emails.Message(ctx, e.ID)
	require.NoError(t, err)
	require.Contains(t, string(msg), "message-marker-41")
	build, err := storetest.EmailForBuild(ctx, st, smtp.ID)
	require.NoError(t, err)
	require.Equal(t, smtp.Source, build.Source)
	again, err := st.Emails.SaveMessage(ctx, teamA, e.ID, "m@x", []byte("other"))
	require.NoError(t, err)
	require.Contains(t, string(again), "message-marker-41", "a retried build gets the first message, opened")

	_, err = st.Emails.GetEmail(ctx, teamB, e.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = plain.Emails.GetEmail(ctx, teamA, e.ID)
	require.Error(t, err, "without the master key sealed content cannot be read")

	// A sealed value moved to another row does not open.
	other := newEmail(teamA, "delivered@posthaste.test")
	_, err = storetest.InsertEmail(ctx, st, other)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE email SET html_sealed = (SELECT html_sealed FROM email WHERE id = $1) WHERE id = $2`, e.ID, other.ID)
	require.NoError(t, err)
	_, err = st.Emails.GetEmail(ctx, teamA, other.ID)
	require.ErrorIs(t, err, datakey.ErrOpen)
	// Nor does it in another team's row.
	b := newEmail(teamB, "delivered@posthaste.test")
	_, err = storetest.InsertEmail(ctx, st, b)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE attachment SET content = (SELECT content FROM attachment WHERE email_id = $1 AND position = 0)
		WHERE email_id = $2`, e.ID, b.ID)
	require.NoError(t, err)
	_, err = st.Emails.Attachments(ctx, b.ID)
	require.ErrorIs(t, err, datakey.ErrOpen)
}

func TestRowsWrittenUnsealedStayReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, plain, db := sealedStore(t)
	team := newTeam(t, st)
	e := newEmail(team, "delivered@posthaste.test")
	_, err := storetest.InsertEmail(ctx, plain, e) // as before sealing, or without a master key
	require.NoError(t, err)
	_, err = plain.Emails.SaveMessage(ctx, team, e.ID, "m@x", []byte("old message"))
	require.NoError(t, err)
	var html *string
	require.NoError(t, db.QueryRow(ctx, `SELECT html FROM email WHERE id = $1`, e.ID).Scan(&html))
	require.Equal(t, "<p>hi</p>", *html, "without a sealer the body is stored as it is")

	got, err := st.Emails.EmailForSending(ctx, e.ID, true)
	require.NoError(t, err)
	require.Equal(t, "<p>hi</p>", *got.Email.HTML)
	require.Equal(t, []byte("x"), got.Email.Attachments[0].Content)
	require.Equal(t, []byte("old message"), got.Message)
}

func TestInboundAndReceivedContentIsSealedAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, db := sealedStore(t)
	team := newTeam(t, st)
	d := newDomain(team, "recv.test")
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	_, err := db.Exec(ctx, `UPDATE domain SET status = 'verified', receiving = 'enabled' WHERE id = $1`, d.ID)
	require.NoError(t, err)
	in := store.NewInbound(st, nil)
	rt := inroute.New(st.Received, st.Emails, verpKey, nil)
	r, err := rt.Route(ctx, "support@recv.test")
	require.NoError(t, err)
	raw := []byte("From: ann@example.org\r\nSubject: Hi\r\n\r\nraw-marker-42\r\n")
	require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), MailFrom: "ann@example.org",
		Recipients: []inmail.Recipient{{Address: "support@recv.test", Route: r}}, ReceivedAt: time.Now(), Data: raw}))
	ms, err := storetest.InboundMessages(ctx, st, team, 1)
	require.NoError(t, err)
	require.Equal(t, raw, ms[0].Raw)
	byID, err := st.Received.InboundByID(ctx, ms[0].ID)
	require.NoError(t, err)
	require.Equal(t, raw, byID.Raw)
	requireNoPlaintext(t, rawBytes(t, db, `SELECT raw FROM inbound_message WHERE id = $1`, ms[0].ID), "raw-marker-42")

	text, html := "received-text-42", "<p>received-html-42</p>"
	re := store.ReceivedEmail{ID: uuid.Must(uuid.NewV7()), TeamID: team, DomainID: d.ID, InboundID: ms[0].ID,
		From: "ann@example.org", ReceivedFor: []string{"support@recv.test"}, Subject: "Hi", MessageID: "<m@x>",
		Text: &text, HTML: &html, CreatedAt: time.Now(),
		Attachments: []store.ReceivedAttachment{{ID: uuid.Must(uuid.NewV7()), Filename: "f.txt", ContentType: "text/plain",
			Content: []byte("received-attachment-42")}}}
	_, inserted, err := st.Received.InsertReceivedEmail(ctx, re)
	require.NoError(t, err)
	require.True(t, inserted)
	for _, m := range []string{"received-text-42", "received-html-42"} {
		requireNoPlaintext(t, rawBytes(t, db, `SELECT text_body, html_body, text_sealed, html_sealed FROM received_email
			WHERE id = $1`, re.ID), m)
	}
	requireNoPlaintext(t, rawBytes(t, db, `SELECT content FROM received_attachment WHERE received_email_id = $1`, re.ID),
		"received-attachment-42")

	got, err := st.Received.GetReceivedEmail(ctx, team, re.ID)
	require.NoError(t, err)
	require.Equal(t, text, *got.Text)
	require.Equal(t, html, *got.HTML)
	list, _, err := st.Received.ListReceivedEmails(ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, text, *list[0].Text)
	att, err := st.Received.ReceivedAttachmentContent(ctx, team, re.ID, re.Attachments[0].ID)
	require.NoError(t, err)
	require.Equal(t, []byte("received-attachment-42"), att.Content)
	gotRaw, err := st.Received.ReceivedRaw(ctx, team, re.ID)
	require.NoError(t, err)
	require.Equal(t, raw, gotRaw)
}

// countingKeys counts the data-key queries a keyring makes.
type countingKeys struct {
	*store.Store
	mu      sync.Mutex
	queries int
}

func (c *countingKeys) count() {
	c.mu.Lock()
	c.queries++
	c.mu.Unlock()
}

func (c *countingKeys) CurrentDataKey(ctx context.Context, team uuid.UUID) (datakey.Record, error) {
	c.count()
	return c.Store.CurrentDataKey(ctx, team)
}

func (c *countingKeys) AddDataKey(ctx context.Context, r datakey.Record) (datakey.Record, error) {
	c.count()
	return c.Store.AddDataKey(ctx, r)
}

func (c *countingKeys) DataKey(ctx context.Context, id uuid.UUID) (datakey.Record, error) {
	c.count()
	return c.Store.DataKey(ctx, id)
}

// TestSealingAddsNoQueryPerEmail: a team's first acceptance looks its data
// key up (and makes it); later acceptances and reads use the cached key.
func TestSealingAddsNoQueryPerEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, plain, _ := sealedStore(t)
	box, err := seal.New(bytes.Repeat([]byte{3}, seal.KeySize))
	require.NoError(t, err)
	keys := &countingKeys{Store: plain}
	st := plain.WithSealer(datakey.New(box, keys, datakey.Config{}))
	team := newTeam(t, st)
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	for i := range 50 {
		e := newEmail(team, "delivered@posthaste.test")
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, 2, keys.queries, "the first email looks the key up and adds it")
		}
		got, err := st.Emails.EmailForSending(ctx, e.ID, true)
		require.NoError(t, err)
		require.Equal(t, "<p>hi</p>", *got.Email.HTML)
	}
	require.Equal(t, 2, keys.queries, "49 more emails, written and read, cost no key query")
}

// BenchmarkAcceptSealing compares accepting one email (HTML, text, one
// small attachment) without and with sealing, for bodies of several
// sizes: the team's data key is cached, so sealing adds local AES-GCM
// work and no round trip.
func BenchmarkAcceptSealing(b *testing.B) {
	ctx := context.Background()
	words := strings.Fields(`the of and to a in is you that it he was for on are as with his they at be this
		have from or one had by word but not what all were we when your can said there use an each which she do how
		their if will up other about out many then them these so some her would make like him into time has look two
		more write go see number no way could people my than first water been call who oil its now find long down
		day did get come made may part order delivery invoice account <p> </p> <a href="https://example.com/x"> </a>`)
	rng := rand.New(rand.NewPCG(1, 2))
	body := func(n int) string { // English-like HTML, as compressible as real mail
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	for _, size := range []int{600, 6000, 30000} {
		for _, mode := range []string{"plain", "sealed"} {
			b.Run(fmt.Sprintf("body=%dB/%s", size, mode), func(b *testing.B) {
				url := storetest.NewDatabase(b)
				st, err := store.Open(ctx, store.Config{URL: url})
				require.NoError(b, err)
				defer st.Close()
				if mode == "sealed" {
					box, err := seal.New(bytes.Repeat([]byte{9}, seal.KeySize))
					require.NoError(b, err)
					st = st.WithSealer(datakey.New(box, st, datakey.Config{}))
				}
				team := uuid.Must(uuid.NewV7())
				require.NoError(b, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
				require.NoError(b, st.Accounts.SetPlan(ctx, team, "2.5m"))
				html := body(size)
				b.ResetTimer()
				for range b.N {
					e := newEmail(team, "delivered@posthaste.test")
					e.HTML, e.Text = &html, &html
					if _, err := storetest.InsertEmail(ctx, st, e); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
