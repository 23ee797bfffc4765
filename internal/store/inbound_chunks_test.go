package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
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

// keyedStore is sealedStore with a keyring of the same master key, to
// write rows as older code did.
func keyedStore(t *testing.T) (*store.Store, *datakey.Keyring, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	plain, url := storetest.NewWithURL(t)
	key, err := seal.NewKey()
	require.NoError(t, err)
	raw, err := seal.ParseKey(key)
	require.NoError(t, err)
	box, err := seal.New(raw)
	require.NoError(t, err)
	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	return storetest.Open(t, store.Config{URL: url, MasterKey: box}), datakey.New(box, plain, datakey.Config{}), db
}

// receivingRoute makes a verified receiving domain of a new team and
// returns the route of an address at it.
func receivingRoute(t *testing.T, st *store.Store, db *pgx.Conn, name string) (uuid.UUID, inmail.Recipient) {
	t.Helper()
	ctx := context.Background()
	team := newTeam(t, st)
	d := newDomain(team, name)
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	_, err := db.Exec(ctx, `UPDATE domain SET status = 'verified', receiving = 'enabled' WHERE id = $1`, d.ID)
	require.NoError(t, err)
	addr := "support@" + name
	r, err := inroute.New(st.Received, st.Emails, verpKey, nil).Route(ctx, addr)
	require.NoError(t, err)
	return team, inmail.Recipient{Address: addr, Route: r}
}

// bigMessage is a message of about size bytes with a marker on every line.
func bigMessage(size int) []byte {
	msg := []byte("From: ann@example.org\r\nSubject: big\r\n\r\n")
	for i := 0; len(msg) < size; i++ {
		msg = fmt.Appendf(msg, "line %08d chunk-marker-77 0123456789abcdefghijklmnopqrstuvwxyz\r\n", i)
	}
	return msg
}

// TestInboundStoredInChunks: a message is stored in sealed chunks, from
// memory or from a spool file (one of a chunk's size or less, held in
// memory, as one sealed value), and reads back whole for each team; no
// chunk holds plaintext.
func TestInboundStoredInChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, db := keyedStore(t)
	teamA, ra := receivingRoute(t, st, db, "a.recv.test")
	teamB, rb := receivingRoute(t, st, db, "b.recv.test")
	in := store.NewInbound(st, nil)

	for _, tc := range []struct {
		name string
		size int
	}{{"empty", 0}, {"small", 100}, {"several chunks", 3<<20 + 12345}} { // the last one is used below
		size := tc.size
		t.Run(tc.name, func(t *testing.T) {
			msg := bigMessage(size)
			if size == 0 {
				msg = nil
			}
			f, err := os.CreateTemp(t.TempDir(), "spool")
			require.NoError(t, err)
			_, err = f.Write(msg)
			require.NoError(t, err)
			defer f.Close()
			for how, m := range map[string]inmail.Message{
				"in memory": {Data: msg},
				"spooled":   {Spool: f, Size: int64(len(msg))},
			} {
				m.ID, m.ReceivedAt = uuid.Must(uuid.NewV7()), time.Now()
				m.Recipients = []inmail.Recipient{ra, rb}
				require.NoError(t, in.Accept(ctx, m), how)
				for _, team := range []uuid.UUID{teamA, teamB} {
					ms, err := storetest.InboundMessages(ctx, st, team, 1)
					require.NoError(t, err)
					require.Equal(t, m.ID, ms[0].MessageID)
					require.True(t, bytes.Equal(msg, ms[0].Raw), "%s: %d bytes read back of %d", how, len(ms[0].Raw), len(msg))
					byID, err := st.Received.InboundByID(ctx, ms[0].ID)
					require.NoError(t, err)
					require.True(t, bytes.Equal(msg, byID.Raw), how)
					if size == 0 {
						continue
					}
					if how == "in memory" && size <= 256<<10 {
						// One chunk's worth, held in memory: one sealed value.
						requireNoPlaintext(t, rawBytes(t, db, `SELECT raw FROM inbound_message WHERE id = $1
							AND raw_chunks IS NULL`, ms[0].ID), "chunk-marker-77")
						continue
					}
					requireNoPlaintext(t, rawBytes(t, db, `SELECT data FROM inbound_message_chunk WHERE inbound_id = $1`,
						ms[0].ID), "chunk-marker-77")
				}
			}
		})
	}

	// A chunk cannot go missing or be moved to another position: each is
	// sealed for its own.
	ms, err := storetest.InboundMessages(ctx, st, teamA, 1)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE inbound_message_chunk SET seq = 99 WHERE inbound_id = $1 AND seq = 0`, ms[0].ID)
	require.NoError(t, err)
	_, err = st.Received.InboundByID(ctx, ms[0].ID)
	require.Error(t, err, "a missing chunk")
	_, err = db.Exec(ctx, `UPDATE inbound_message_chunk SET seq = 0 WHERE inbound_id = $1 AND seq = 1`, ms[0].ID)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE inbound_message_chunk SET seq = 1 WHERE inbound_id = $1 AND seq = 99`, ms[0].ID)
	require.NoError(t, err)
	_, err = st.Received.InboundByID(ctx, ms[0].ID)
	require.Error(t, err, "chunks swapped")
}

// TestInboundOldFormatRows: rows written before chunks (the message in
// raw, sealed whole or not sealed) still read.
func TestInboundOldFormatRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, kr, db := keyedStore(t)
	team, _ := receivingRoute(t, st, db, "old.recv.test")
	msg := []byte("From: ann@example.org\r\nSubject: old\r\n\r\nwritten before chunks\r\n")
	for _, sealed := range []bool{true, false} {
		id := uuid.Must(uuid.NewV7())
		raw := msg
		if sealed {
			var err error
			raw, err = kr.Seal(ctx, team, msg, datakey.AD("inbound_message", "raw", id))
			require.NoError(t, err)
		}
		_, err := db.Exec(ctx, `INSERT INTO inbound_message (id, team_id, message_id, kinds, mail_from, recipients,
				helo, tls, auth, auth_header, raw, size, received_at, sealed)
			VALUES ($1, $2, $3, '{receiving}', 'ann@example.org', '[]', 'x', false, '{}', '', $4, $5, now(), $6)`,
			id, team, uuid.Must(uuid.NewV7()), raw, len(msg), sealed)
		require.NoError(t, err)
		m, err := st.Received.InboundByID(ctx, id)
		require.NoError(t, err, "sealed: %v", sealed)
		require.Equal(t, msg, m.Raw, "sealed: %v", sealed)
	}
	ms, err := storetest.InboundMessages(ctx, st, team, 10)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		require.Equal(t, msg, m.Raw)
	}
}

// TestInboundAcceptMemory: accepting a 10 MB message for two teams holds
// no further copy of it in memory (issue 33 point 1): its chunks are
// sealed and sent one at a time. Before, each team's sealed copy and the
// batch that carried them all were in memory at once.
func TestInboundAcceptMemory(t *testing.T) {
	ctx := context.Background()
	st, _, db := keyedStore(t)
	_, ra := receivingRoute(t, st, db, "a.mem.test")
	_, rb := receivingRoute(t, st, db, "b.mem.test")
	in := store.NewInbound(st, nil)
	const size = 10 << 20
	msg := bigMessage(size)
	// Warm up: the teams' data keys, the pool's connections.
	require.NoError(t, in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), ReceivedAt: time.Now(),
		Recipients: []inmail.Recipient{ra, rb}, Data: []byte("Subject: warm\r\n\r\nx\r\n")}))

	// A low GC target keeps garbage from passing for a copy; the sampler
	// records the largest heap seen while Accept runs.
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	done, peakc := make(chan struct{}), make(chan uint64)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var peak uint64
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				peakc <- peak
				return
			case <-tick.C:
			}
		}
	}()
	err := in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), ReceivedAt: time.Now(),
		Recipients: []inmail.Recipient{ra, rb}, Data: msg})
	close(done)
	peak := <-peakc
	require.NoError(t, err)
	runtime.KeepAlive(msg)
	growth := int64(peak) - int64(before.HeapAlloc)
	t.Logf("accepting a %d MiB message for 2 teams: heap %.1f MiB before, peak growth %.1f MiB (%.2f× the message)",
		size>>20, float64(before.HeapAlloc)/(1<<20), float64(growth)/(1<<20), float64(growth)/size)
	// Not one more copy (before: 7.4× the message, one sealed copy per
	// team plus the batch carrying them).
	require.Less(t, growth, int64(size), "peak heap growth %d bytes for a %d-byte message", growth, size)
}

// stallingSpool is a spooled message of x's whose first read signals
// started and waits for release.
type stallingSpool struct {
	once    sync.Once
	started chan<- struct{}
	release <-chan struct{}
}

func (s *stallingSpool) ReadAt(p []byte, _ int64) (int, error) {
	s.once.Do(func() {
		s.started <- struct{}{}
		<-s.release
	})
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestInboundAcceptsBounded: at most DefaultInboundAccepts messages are
// written at once, each holding a pool connection while it streams in; the
// next waits (and gives up with its context), and the pool still serves
// everyone else.
func TestInboundAcceptsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.NewWithURL(t)
	// A pool larger than the bound, as the processes' (32).
	st := storetest.Open(t, store.Config{URL: url, MaxConns: 2 * store.DefaultInboundAccepts})
	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	team, r := receivingRoute(t, st, db, "bounded.recv.test")
	in := store.NewInbound(st, nil)
	started, release := make(chan struct{}), make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll() // also when an assertion fails first
	errs := make(chan error, store.DefaultInboundAccepts)
	for range store.DefaultInboundAccepts {
		go func() {
			errs <- in.Accept(ctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), ReceivedAt: time.Now(),
				Recipients: []inmail.Recipient{r}, Spool: &stallingSpool{started: started, release: release}, Size: 1 << 20})
		}()
	}
	for range store.DefaultInboundAccepts {
		<-started
	}
	body := []byte("Subject: waits\r\n\r\n" + strings.Repeat("x", 2<<20) + "\r\n")
	large := inmail.Message{ID: uuid.Must(uuid.NewV7()), ReceivedAt: time.Now(), Recipients: []inmail.Recipient{r},
		Spool: bytes.NewReader(body), Size: int64(len(body))}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = in.Accept(wctx, large)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a large message over the bound waits for a slot")
	// A small message (a bounce, most mail) does not wait behind them.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = in.Accept(sctx, inmail.Message{ID: uuid.Must(uuid.NewV7()), ReceivedAt: time.Now(),
		Recipients: []inmail.Recipient{r}, Data: []byte("Subject: small\r\n\r\nx\r\n")})
	cancel()
	require.NoError(t, err, "a small message is accepted while the large ones hold their slots")
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = storetest.InboundMessages(qctx, st, team, 1)
	cancel()
	require.NoError(t, err, "the pool serves others meanwhile")
	releaseAll()
	for range store.DefaultInboundAccepts {
		require.NoError(t, <-errs)
	}
	require.NoError(t, in.Accept(ctx, large), "accepted once a slot is free")
	ms, err := storetest.InboundMessages(ctx, st, team, 10)
	require.NoError(t, err)
	require.Len(t, ms, store.DefaultInboundAccepts+2)
}
