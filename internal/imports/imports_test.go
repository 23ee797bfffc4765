package imports_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type fixture struct {
	st     *store.Store
	svc    *imports.Service
	teamA  uuid.UUID
	teamB  uuid.UUID
	seg    uuid.UUID
	topic  uuid.UUID
	notify *counter
}

type counter struct{ n int }

func (c *counter) Notify() { c.n++ }

func newFixture(t *testing.T, chunkRows int) fixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	f := fixture{st: st, teamA: uuid.Must(uuid.NewV7()), teamB: uuid.Must(uuid.NewV7()), notify: &counter{}}
	for _, team := range []uuid.UUID{f.teamA, f.teamB} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	}
	seg, err := st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA, Name: "Imported"})
	require.NoError(t, err)
	f.seg = seg.ID
	topic, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA, Name: "News",
		DefaultSubscription: store.TopicOptOut, Visibility: "public"})
	require.NoError(t, err)
	f.topic = topic.ID
	_, err = st.Audience.CreateContactProperty(ctx, store.ContactProperty{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA,
		Key: "plan", Type: store.PropertyString})
	require.NoError(t, err)
	_, err = st.Audience.CreateContactProperty(ctx, store.ContactProperty{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA,
		Key: "seats", Type: store.PropertyNumber})
	require.NoError(t, err)
	f.svc = imports.New(imports.Config{ChunkRows: chunkRows, MaxRows: 1000, MaxBytes: 1 << 20, Outbox: f.notify}, st)
	return f
}

// applyAll applies every chunk as the workflow does, then ends the import.
func (f fixture) applyAll(t *testing.T, imp store.ContactImport) store.ContactImport {
	t.Helper()
	ctx := context.Background()
	for seq := range imp.Chunks {
		_, err := f.st.Audience.ApplyImportChunk(ctx, imp.ID, seq)
		require.NoError(t, err)
	}
	got, err := f.st.Audience.FinishContactImport(ctx, imp.ID, "")
	require.NoError(t, err)
	return got
}

const mixedCSV = "Email,First_Name,last_name,unsubscribed,Plan,seats,notes\n" +
	"ann@example.com,Ann,Lee,false,pro,3,ignored\n" + // row 2
	"not-an-address,Bob,,,,,\n" + // row 3: invalid address
	"Cid@Example.COM,Cid,,yes,,,\n" + // row 4
	"dee@example.com,Dee,,maybe,,,\n" + // row 5: bad boolean
	"eve@example.com,Eve,,,,many,\n" + // row 6: bad number
	",,,,,,\n" + // row 7: no address
	"fay@example.com,Fay,,,free,,\n" // row 8

func TestCreateChunksValidatesAndApplies(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 3)
	imp, err := f.svc.Create(ctx, f.teamA, strings.NewReader(mixedCSV), imports.Options{
		Segments: []uuid.UUID{f.seg},
		Topics:   []store.TopicChoice{{TopicID: f.topic, Subscription: store.TopicOptIn}},
	})
	require.NoError(t, err)
	require.Equal(t, 1, f.notify.n, "the outbox is told")
	require.Equal(t, store.ImportQueued, imp.Status)
	require.Equal(t, store.ImportSkip, imp.OnConflict, "skip is the default")
	require.Equal(t, 3, imp.Chunks, "7 rows in chunks of 3")
	require.Equal(t, 7, imp.Counts.Total)

	// Progress is visible chunk by chunk.
	_, err = f.st.Audience.ApplyImportChunk(ctx, imp.ID, 0)
	require.NoError(t, err)
	mid, err := f.svc.Get(ctx, f.teamA, imp.ID)
	require.NoError(t, err)
	require.Equal(t, store.ImportInProgress, mid.Status)
	require.Equal(t, 3, mid.Counts.Processed)

	done := f.applyAll(t, imp)
	require.Equal(t, store.ImportCompleted, done.Status)
	require.NotNil(t, done.CompletedAt)
	require.Equal(t, store.ImportCounts{Total: 7, Processed: 7, Created: 3, Failed: 4}, done.Counts)

	errs, err := f.svc.Errors(ctx, f.teamA, imp.ID, 100)
	require.NoError(t, err)
	require.Len(t, errs, 4)
	require.Equal(t, 3, errs[0].Row)
	require.Equal(t, "not-an-address", errs[0].Email)
	require.Contains(t, errs[0].Reason, "not an email address")
	require.Equal(t, 5, errs[1].Row)
	require.Contains(t, errs[1].Reason, "unsubscribed")
	require.Equal(t, 6, errs[2].Row)
	require.Contains(t, errs[2].Reason, "seats")
	require.Equal(t, 7, errs[3].Row)

	ann, err := f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "ann@example.com"})
	require.NoError(t, err)
	require.Equal(t, "Ann", ann.FirstName)
	require.Equal(t, "Lee", ann.LastName)
	require.Equal(t, map[string]any{"plan": "pro", "seats": 3.0}, ann.Properties, "unknown columns are ignored")
	require.Equal(t, []uuid.UUID{f.seg}, ann.SegmentIDs)
	topics, _, err := f.st.Audience.ContactTopics(ctx, f.teamA, ann.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.TopicOptIn, topics[0].Subscription)
	cid, err := f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "cid@example.com"})
	require.NoError(t, err, "addresses are normalised like contacts'")
	require.True(t, cid.Unsubscribed)
	require.Equal(t, uuid.Version(7), ann.ID.Version(), "ids are UUIDv7")
}

func TestApplyChunkTwiceChangesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	imp, err := f.svc.Create(ctx, f.teamA, strings.NewReader("email\na@example.com\nb@example.com\nc@example.com\n"),
		imports.Options{})
	require.NoError(t, err)
	first, err := f.st.Audience.ApplyImportChunk(ctx, imp.ID, 0)
	require.NoError(t, err)
	require.Equal(t, store.ChunkCounts{Rows: 2, Created: 2}, first)
	// A retry after a crash between the commit and the activity's answer.
	again, err := f.st.Audience.ApplyImportChunk(ctx, imp.ID, 0)
	require.NoError(t, err)
	require.Equal(t, first, again, "the stored counts, not skipped rows")
	got, err := f.svc.Get(ctx, f.teamA, imp.ID)
	require.NoError(t, err)
	require.Equal(t, store.ImportCounts{Total: 3, Processed: 2, Created: 2}, got.Counts, "counted once")
	_, err = f.st.Audience.ApplyImportChunk(ctx, imp.ID, 7)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestSkipAndUpsert(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 100)
	_, err := f.st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamA,
		Email: "old@example.com", FirstName: "Old", LastName: "Name",
		Properties: map[string]any{"plan": "free"}}, nil, nil)
	require.NoError(t, err)
	csv := "email,first_name,last_name,plan\nold@example.com,New,,pro\nnew@example.com,Neu,,\n" +
		"dup@example.com,First,,\ndup@example.com,Second,,\n"

	skip, err := f.svc.Create(ctx, f.teamA, strings.NewReader(csv), imports.Options{Segments: []uuid.UUID{f.seg}})
	require.NoError(t, err)
	skip = f.applyAll(t, skip)
	require.Equal(t, store.ImportCounts{Total: 4, Processed: 4, Created: 2, Skipped: 2}, skip.Counts)
	old, err := f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "old@example.com"})
	require.NoError(t, err)
	require.Equal(t, "Old", old.FirstName, "skip leaves existing contacts")
	require.Empty(t, old.SegmentIDs, "skipped contacts join no segment")
	dup, err := f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "dup@example.com"})
	require.NoError(t, err)
	require.Equal(t, "First", dup.FirstName, "under skip the first of repeated rows wins")

	up, err := f.svc.Create(ctx, f.teamA, strings.NewReader(csv), imports.Options{OnConflict: store.ImportUpsert})
	require.NoError(t, err)
	up = f.applyAll(t, up)
	require.Equal(t, store.ImportCounts{Total: 4, Processed: 4, Updated: 3, Skipped: 1}, up.Counts)
	old, err = f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "old@example.com"})
	require.NoError(t, err)
	require.Equal(t, "New", old.FirstName)
	require.Equal(t, "Name", old.LastName, "an empty cell keeps the value")
	require.Equal(t, map[string]any{"plan": "pro"}, old.Properties)
	dup, err = f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "dup@example.com"})
	require.NoError(t, err)
	require.Equal(t, "Second", dup.FirstName, "under upsert the last of repeated rows wins")
}

func TestColumnMap(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 100)
	m, err := imports.ParseColumnMap(`{"email":"E-mail","firstName":"Given","properties":{"seats":{"column":"Seats","type":"number"},"plan":"Tier"}}`)
	require.NoError(t, err)
	imp, err := f.svc.Create(ctx, f.teamA, strings.NewReader("\ufeffGiven,E-mail,Seats,Tier,first_name\nAnn,ann@example.com,2,gold,NOT\n"),
		imports.Options{ColumnMap: m})
	require.NoError(t, err)
	f.applyAll(t, imp)
	ann, err := f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "ann@example.com"})
	require.NoError(t, err)
	require.Equal(t, "Ann", ann.FirstName, "column_map columns, not the default ones")
	require.Equal(t, map[string]any{"plan": "gold", "seats": 2.0}, ann.Properties)
}

func TestBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	other, err := f.st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: f.teamB, Name: "B"})
	require.NoError(t, err)
	mapOf := func(raw string) imports.ColumnMap {
		m, err := imports.ParseColumnMap(raw)
		require.NoError(t, err)
		return m
	}
	tests := []struct {
		name  string
		csv   string
		opts  imports.Options
		field string
		msg   string
	}{
		{"no email column", "mail,first_name\na@example.com,A\n", imports.Options{}, "file", "`email`"},
		{"empty file", "", imports.Options{}, "file", "header"},
		{"mapped column missing", "email\na@example.com\n", imports.Options{ColumnMap: mapOf(`{"first_name":"Given"}`)},
			"column_map", "`Given`"},
		{"unknown property", "email,x\na@example.com,1\n", imports.Options{ColumnMap: mapOf(`{"properties":{"x":"x"}}`)},
			"column_map", "`x`"},
		{"duplicate email column", "email,EMAIL\na@example.com,b@example.com\n", imports.Options{}, "file", "more than one"},
		{"another team's segment", "email\na@example.com\n", imports.Options{Segments: []uuid.UUID{other.ID}},
			"segments", other.ID.String()},
		{"unknown topic", "email\na@example.com\n", imports.Options{Topics: []store.TopicChoice{
			{TopicID: uuid.Must(uuid.NewV7()), Subscription: store.TopicOptIn}}}, "topics", "not found"},
		{"bad on_conflict", "email\na@example.com\n", imports.Options{OnConflict: "merge"}, "on_conflict", "`skip`"},
		{"bare quote after chunks", "email\na@example.com\nb@example.com\nc@example.com\nd@e\"x.com\n",
			imports.Options{}, "file", "line 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Create(ctx, f.teamA, strings.NewReader(tt.csv), tt.opts)
			var ie *invalid.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tt.field, ie.Field)
			require.Contains(t, ie.Message, tt.msg)
		})
	}

	// Limits, and a reader that breaks after two chunks were written.
	var rows strings.Builder
	rows.WriteString("email\n")
	for i := range 1001 {
		fmt.Fprintf(&rows, "u%d@example.com\n", i)
	}
	_, err = f.svc.Create(ctx, f.teamA, strings.NewReader(rows.String()), imports.Options{})
	require.ErrorIs(t, err, imports.ErrTooManyRows)
	big := "email,notes\nsomeone@example.com," + strings.Repeat("x", 1<<20) + "\n"
	_, err = f.svc.Create(ctx, f.teamA, strings.NewReader(big), imports.Options{})
	require.ErrorIs(t, err, imports.ErrFileTooLarge)
	broken := io.MultiReader(strings.NewReader("email\na@example.com\nb@example.com\nc@example.com\nd@example.com\nx"),
		iotestErrReader{})
	_, err = f.svc.Create(ctx, f.teamA, broken, imports.Options{})
	require.ErrorIs(t, err, errBroken)

	list, err := f.svc.List(ctx, f.teamA, 100)
	require.NoError(t, err)
	require.Empty(t, list, "no failed upload left an import")
	n, err := storetest.OutboxLen(ctx, f.st)
	require.NoError(t, err)
	require.Zero(t, n, "nor an outbox entry")
	_, err = f.st.Audience.Contact(ctx, f.teamA, store.ContactRef{Email: "a@example.com"})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Zero(t, f.notify.n)
}

var errBroken = errors.New("connection reset by peer")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errBroken }

func TestTeamsAreIsolated(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 100)
	imp, err := f.svc.Create(ctx, f.teamA, strings.NewReader("email\nbad\n"), imports.Options{})
	require.NoError(t, err)
	f.applyAll(t, imp)
	_, err = f.svc.Get(ctx, f.teamB, imp.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	errs, err := f.svc.Errors(ctx, f.teamB, imp.ID, 100)
	require.NoError(t, err)
	require.Empty(t, errs)
	list, err := f.svc.List(ctx, f.teamB, 10)
	require.NoError(t, err)
	require.Empty(t, list)
	list, err = f.svc.List(ctx, f.teamA, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// An outbox entry whose workflow can never start fails its import.
func TestFailOutboxWorkFailsTheImport(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 100)
	imp, err := f.svc.Create(ctx, f.teamA, strings.NewReader("email\na@example.com\n"), imports.Options{})
	require.NoError(t, err)
	_, err = f.st.Webhooks.FailOutboxWork(ctx, store.OutboxItem{Kind: store.OutboxContactImport, TeamID: f.teamA, Ref: imp.ID}, "x")
	require.NoError(t, err)
	got, err := f.svc.Get(ctx, f.teamA, imp.ID)
	require.NoError(t, err)
	require.Equal(t, store.ImportFailed, got.Status)
	require.NotEmpty(t, got.Error)
	again, err := f.st.Audience.FinishContactImport(ctx, imp.ID, "")
	require.NoError(t, err)
	require.Equal(t, store.ImportFailed, again.Status, "an ended import stays as it ended")
}
