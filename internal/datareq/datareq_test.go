package datareq_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestParseAddress(t *testing.T) {
	for in, want := range map[string]string{"Sam@Example.ORG": "sam@example.org", " sam@example.org ": "sam@example.org"} {
		got, err := datareq.ParseAddress(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"", "sam", "Sam <sam@example.org>", "sam@localhost", "a@b@c.org"} {
		_, err := datareq.ParseAddress(in)
		require.ErrorIs(t, err, datareq.ErrInvalidAddress, in)
	}
}

// An archive larger than a chunk is stored in several sealed chunks and
// comes back whole; the address is sealed to its request.
func TestExportArchiveSpansChunks(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	box, err := seal.New(bytes.Repeat([]byte{3}, 32))
	require.NoError(t, err)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	const addr = "lee@dest.test"
	big := make([]byte, 2<<20+12345) // incompressible, over two chunks
	_, err = rand.Read(big)
	require.NoError(t, err)
	text := "hello"
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", To: []string{addr}, Subject: "files", Text: &text, LastEvent: store.EventQueued,
		CreatedAt: time.Now(), Recipients: []store.Recipient{{Address: addr, Kind: "to", Domain: "dest.test",
			Status: store.EventQueued}},
		Attachments: []store.Attachment{{Filename: "../../big.bin", ContentType: "application/octet-stream", Content: big}}}
	_, err = storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	svc := datareq.New(datareq.Config{Keys: box}, st)
	_, err = svc.Create(ctx, team, "delete", addr, audit.Entry{ActorType: audit.ActorAdmin})
	require.ErrorIs(t, err, datareq.ErrInvalidType)
	r, err := svc.Create(ctx, team, store.DataRequestExport, "LEE@dest.test", audit.Entry{ActorType: audit.ActorAdmin})
	require.NoError(t, err)
	require.NotContains(t, string(r.Address), addr, "sealed")
	got, err := svc.Address(r)
	require.NoError(t, err)
	require.Equal(t, addr, got)
	moved := r
	moved.ID = uuid.Must(uuid.NewV7())
	_, err = svc.Address(moved)
	require.Error(t, err, "the sealed address is bound to its request")

	exp, err := svc.BuildExport(ctx, r, addr, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, exp.Found[datareq.FoundEmails])
	n, err := st.Privacy.DataRequestArchiveChunks(ctx, team, r.ID)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	// Building again (a retried step) replaces the archive.
	exp, err = svc.BuildExport(ctx, r, addr, time.Now())
	require.NoError(t, err)

	var buf bytes.Buffer
	require.NoError(t, svc.WriteArchive(ctx, team, r.ID, &buf))
	require.Equal(t, exp.Size, int64(buf.Len()))
	z, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, f := range z.File {
		rc, err := f.Open()
		require.NoError(t, err)
		files[f.Name], err = io.ReadAll(rc)
		require.NoError(t, err)
		rc.Close()
	}
	require.Equal(t, big, files["emails/"+e.ID.String()+"/attachments/0-.._.._big.bin"], "the name cannot leave its folder")
	var m datareq.Manifest
	require.NoError(t, json.Unmarshal(files["manifest.json"], &m))
	require.Equal(t, addr, m.Address)
	require.Equal(t, 1, m.Found[datareq.FoundEmails])

	other := uuid.Must(uuid.NewV7())
	require.ErrorIs(t, svc.WriteArchive(ctx, other, r.ID, io.Discard), store.ErrNotFound, "another team gets nothing")
}

// The adapters read requests and their archives through the service:
// one team's request is not another's.
func TestGetListHasArchive(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	box, err := seal.New(bytes.Repeat([]byte{4}, 32))
	require.NoError(t, err)
	team, other := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, id := range []uuid.UUID{team, other} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: id, Name: id.String()}))
	}
	svc := datareq.New(datareq.Config{Keys: box}, st)
	r, err := svc.Create(ctx, team, store.DataRequestExport, "kim@dest.test", audit.Entry{ActorType: audit.ActorAdmin})
	require.NoError(t, err)

	got, err := svc.Get(ctx, team, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.DataRequestQueued, got.Status)
	_, err = svc.Get(ctx, other, r.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	list, more, err := svc.List(ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, list, 1)
	list, _, err = svc.List(ctx, other, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)

	ok, err := svc.HasArchive(ctx, team, r.ID)
	require.NoError(t, err)
	require.False(t, ok, "not built yet")
	_, err = svc.BuildExport(ctx, r, "kim@dest.test", time.Now())
	require.NoError(t, err)
	ok, err = svc.HasArchive(ctx, team, r.ID)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = svc.HasArchive(ctx, other, r.ID)
	require.NoError(t, err)
	require.False(t, ok, "another team's")
}
