package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// A completed export keeps its sealed address while its archive can be
// downloaded; the retention sweep makes it forget the address once the
// archive expired, and keeps its counts.
func TestPurgeExpiredForgetsExportAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	team := newTeam(t, st)
	r := store.DataRequest{ID: uuid.Must(uuid.NewV7()), TeamID: team, Type: store.DataRequestExport,
		Address: []byte("sealed address")}
	require.NoError(t, st.Privacy.CreateDataRequest(ctx, r, audit.Entry{ActorType: audit.ActorAdmin, Action: audit.DataRequestCreate,
		Outcome: audit.Success}))
	_, err := st.Privacy.StartDataRequest(ctx, r.ID)
	require.NoError(t, err)
	expires, size := time.Now().Add(time.Hour), int64(10)
	_, err = st.Privacy.FinishDataRequest(ctx, r.ID, store.DataRequestOutcome{Found: map[string]int{"emails": 2},
		ArchiveSize: &size, ExpiresAt: &expires})
	require.NoError(t, err)

	_, err = st.Privacy.PurgeExpired(ctx, time.Now(), 100)
	require.NoError(t, err)
	got, err := st.Privacy.DataRequest(ctx, team, r.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Address, "the archive can still be downloaded")

	_, err = st.Privacy.PurgeExpired(ctx, expires.Add(time.Minute), 100)
	require.NoError(t, err)
	got, err = st.Privacy.DataRequest(ctx, team, r.ID)
	require.NoError(t, err)
	require.Nil(t, got.Address, "the expired export forgot the address")
	require.Equal(t, 2, got.Found["emails"])
	require.Equal(t, store.DataRequestCompleted, got.Status)
}
