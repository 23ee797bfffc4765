package submit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// Short leases keep these tests fast; they wait on conditions (renewals,
// the database's clock), never for fixed times.
const (
	testLease = time.Second
	testBeat  = testLease / 10
	// waitLimit bounds every wait: far more than a lease, far less than
	// the two minutes a dead claim used to block its key.
	waitLimit = 15 * time.Second
)

func TestIdempotencyLeaseConfig(t *testing.T) {
	tests := []struct {
		name        string
		lease, beat time.Duration
		wantLease   time.Duration
		wantBeat    time.Duration
	}{
		{"defaults", 0, 0, DefaultIdempotencyLease, DefaultIdempotencyHeartbeat},
		{"lease only", 2 * time.Second, 0, 2 * time.Second, 500 * time.Millisecond},
		{"both", 2 * time.Second, 300 * time.Millisecond, 2 * time.Second, 300 * time.Millisecond},
		{"heartbeat as long as the lease", time.Second, time.Second, time.Second, 250 * time.Millisecond},
		{"heartbeat only", 0, 200 * time.Millisecond, DefaultIdempotencyLease, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Config{IdempotencyLease: tt.lease, IdempotencyHeartbeat: tt.beat})
			require.Equal(t, tt.wantLease, s.lease)
			require.Equal(t, tt.wantBeat, s.beat)
		})
	}
	// A dead process's claims free within 5 seconds.
	require.LessOrEqual(t, DefaultIdempotencyLease, 5*time.Second)
	require.Less(t, DefaultIdempotencyHeartbeat, DefaultIdempotencyLease)
}

// idemDB is a migrated database shared by the "processes" of a test, each
// with its own store (its own connection pool), and a probe connection
// pool for reading rows and the database's clock.
type idemDB struct {
	url   string
	probe *pgxpool.Pool
	team  uuid.UUID
}

func newIdemDB(t *testing.T) *idemDB {
	t.Helper()
	d := &idemDB{url: storetest.NewDatabase(t)}
	st := d.open(t)
	d.team = uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(context.Background(), store.Team{ID: d.team, Name: "t"}))
	var err error
	d.probe, err = pgxpool.New(context.Background(), d.url)
	require.NoError(t, err)
	t.Cleanup(d.probe.Close)
	return d
}

// open returns a new store on the database, closed at cleanup unless the
// test closed it first.
func (d *idemDB) open(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: d.url})
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(st.Close) })
	return st
}

// lease returns how long, on the database's clock, the key stays blocked
// by its in-flight claim from now on.
func (d *idemDB) lease(t *testing.T, key string) time.Duration {
	t.Helper()
	var left time.Duration
	require.NoError(t, d.probe.QueryRow(context.Background(), `SELECT locked_until - now() FROM idempotency_key
		WHERE team_id = $1 AND key = $2 AND state = 'in_flight'`, d.team, key).Scan(&left))
	return left
}

// lockedUntil is the end of the key's current lease.
func (d *idemDB) lockedUntil(t *testing.T, key string) time.Time {
	t.Helper()
	var at time.Time
	require.NoError(t, d.probe.QueryRow(context.Background(),
		`SELECT locked_until FROM idempotency_key WHERE team_id = $1 AND key = $2`, d.team, key).Scan(&at))
	return at
}

// passed reports whether the database's clock is past at.
func (d *idemDB) passed(t *testing.T, at time.Time) bool {
	t.Helper()
	var ok bool
	require.NoError(t, d.probe.QueryRow(context.Background(), `SELECT now() > $1`, at).Scan(&ok))
	return ok
}

func (d *idemDB) emails(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, d.probe.QueryRow(context.Background(),
		`SELECT count(*) FROM email WHERE team_id = $1`, d.team).Scan(&n))
	return n
}

// heldFetcher holds every attachment fetch until released, like a slow
// attachment host; entered receives one value per fetch started.
type heldFetcher struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHeldFetcher(t *testing.T) *heldFetcher {
	f := &heldFetcher{entered: make(chan struct{}, 10), release: make(chan struct{})}
	t.Cleanup(f.open)
	return f
}

func (f *heldFetcher) open() { f.once.Do(func() { close(f.release) }) }

func (f *heldFetcher) Fetch(ctx context.Context, _ string, _ int64) ([]byte, string, error) {
	f.entered <- struct{}{}
	select {
	case <-f.release:
		return []byte("%PDF-1.7"), "application/pdf", nil
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// quickFetcher answers every fetch at once.
type quickFetcher struct{}

func (quickFetcher) Fetch(context.Context, string, int64) ([]byte, string, error) {
	return []byte("%PDF-1.7"), "application/pdf", nil
}

// watchedStore reports the outcome of every claim renewal on renewed
// (dropped when nobody listens) and, while cutOff is set, fails them as
// an unreachable database would.
type watchedStore struct {
	Store
	renewed chan error
	cutOff  atomic.Bool
}

func (w *watchedStore) RenewIdempotencyClaim(ctx context.Context, c store.IdempotencyClaim, lease time.Duration) error {
	err := errors.New("dial tcp 10.0.0.5:5432: connect: network is unreachable")
	if !w.cutOff.Load() {
		err = w.Store.RenewIdempotencyClaim(ctx, c, lease)
	}
	select {
	case w.renewed <- err:
	default:
	}
	return err
}

type sendResult struct {
	res SendResult
	err error
}

// sendAsync runs one send in a goroutine; its result arrives on the
// returned channel.
func sendAsync(s *Service, from Sender, req SendRequest, key string) <-chan sendResult {
	done := make(chan sendResult, 1)
	go func() {
		res, err := s.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: &key})
		done <- sendResult{res, err}
	}()
	return done
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// retryUntilAccepted sends req with key until it is accepted, as a client
// retrying after 409s would, and returns the accepted result. Every
// refusal on the way must be 409 concurrent_idempotent_requests.
func retryUntilAccepted(t *testing.T, s *Service, from Sender, req SendRequest, key string) (SendResult, int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitLimit)
	for refused := 0; ; refused++ {
		res, err := s.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: &key})
		if err == nil {
			return res, refused
		}
		requireKind(t, err, KindIdempotencyInFlight)
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the key was still blocked after %d retries", refused+1)
		}
	}
}

func requireKind(t *testing.T, err error, kind Kind) {
	t.Helper()
	var se *Error
	require.True(t, errors.As(err, &se), "want an *Error of kind %v, got %v", kind, err)
	require.Equal(t, kind, se.Kind, se.Message)
}

func reportRequest(subject string) SendRequest {
	text := "The report is attached."
	return SendRequest{From: "onboarding@posthaste.test", To: AddressList{"delivered@posthaste.test"},
		Subject: &subject, Text: &text,
		Attachments: []AttachmentRequest{{Path: "https://files.example/report.pdf", Filename: "report.pdf"}}}
}

// TestIdempotencyDeadHolderFreesItsKey: the process holding a key dies
// mid-request (its connections close, nothing releases the claim); a
// client retrying on another process is served within one lease instead
// of being refused until a long lease runs out, and the dead request
// never writes.
func TestIdempotencyDeadHolderFreesItsKey(t *testing.T) {
	d := newIdemDB(t)
	from := Sender{TeamID: d.team}
	const key = "report/dead"
	req := reportRequest("Monthly report")

	stA := d.open(t)
	held := newHeldFetcher(t)
	a := New(Config{Store: StoreOf(stA), Fetcher: held, IdempotencyLease: testLease, IdempotencyHeartbeat: testBeat})
	b := New(Config{Store: StoreOf(d.open(t)), Fetcher: quickFetcher{}, IdempotencyLease: testLease, IdempotencyHeartbeat: testBeat})

	doneA := sendAsync(a, from, req, key)
	receive(t, held.entered, "process A to claim the key and fetch the attachment")
	_, err := b.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: ptr(key)})
	requireKind(t, err, KindIdempotencyInFlight)

	// Process A dies: its pool closes, so its heartbeat stops renewing
	// and its release cannot run.
	stA.Close()
	require.LessOrEqual(t, d.lease(t, key), testLease, "a dead holder blocks its key for at most one lease")

	res, refused := retryUntilAccepted(t, b, from, req, key)
	t.Logf("accepted on process B after %d refusals", refused)
	require.False(t, res.Replayed)
	require.Equal(t, 1, d.emails(t))

	held.open() // what was left of process A
	lateA := receive(t, doneA, "process A's request to end")
	require.Error(t, lateA.err, "the dead process accepts nothing")
	require.Equal(t, 1, d.emails(t))

	again, err := b.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: ptr(key)})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.ID, again.ID)
}

// TestIdempotencyLiveHolderKeepsItsKey: a request that takes longer than
// the lease (a slow attachment host) keeps its key by renewing it: others
// get 409 concurrent_idempotent_requests, or a mismatch for another body,
// and once it completes, its response.
func TestIdempotencyLiveHolderKeepsItsKey(t *testing.T) {
	d := newIdemDB(t)
	from := Sender{TeamID: d.team}
	const key = "report/slow"
	req := reportRequest("Monthly report")

	held := newHeldFetcher(t)
	watched := &watchedStore{Store: StoreOf(d.open(t)), renewed: make(chan error, 100)}
	a := New(Config{Store: watched, Fetcher: held, IdempotencyLease: testLease, IdempotencyHeartbeat: testBeat})
	// B would accept the request if it ever got the key.
	b := New(Config{Store: StoreOf(d.open(t)), Fetcher: quickFetcher{}, IdempotencyLease: testLease, IdempotencyHeartbeat: testBeat})

	doneA := sendAsync(a, from, req, key)
	receive(t, held.entered, "process A to claim the key and fetch the attachment")
	firstLease := d.lockedUntil(t, key)
	for beyond := 0; beyond < 3; {
		require.NoError(t, receive(t, watched.renewed, "a renewal"))
		if d.passed(t, firstLease) {
			beyond++ // the lease A claimed with has run out
		}
		_, err := b.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: ptr(key)})
		requireKind(t, err, KindIdempotencyInFlight)
		_, err = b.SendWithOptions(context.Background(), from, reportRequest("Other report"),
			SendOptions{IdempotencyKey: ptr(key)})
		requireKind(t, err, KindIdempotencyMismatch)
	}
	require.Equal(t, 0, d.emails(t))

	held.open()
	first := receive(t, doneA, "process A's request to end")
	require.NoError(t, first.err)
	require.False(t, first.res.Replayed)

	again, err := b.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: ptr(key)})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.res.ID, again.ID)
	_, err = b.SendWithOptions(context.Background(), from, reportRequest("Other report"), SendOptions{IdempotencyKey: ptr(key)})
	requireKind(t, err, KindIdempotencyMismatch)
	require.Equal(t, 1, d.emails(t))
}

// TestIdempotencyLostClaimDoesNotWrite: a holder that cannot renew for a
// whole lease (its database unreachable, the process paused) loses its key
// to a retry; when it resumes, the accepting transaction finds the claim
// lost and writes nothing, so the key's request is accepted once.
func TestIdempotencyLostClaimDoesNotWrite(t *testing.T) {
	d := newIdemDB(t)
	from := Sender{TeamID: d.team}
	const key = "report/cut-off"
	req := reportRequest("Monthly report")

	held := newHeldFetcher(t)
	watched := &watchedStore{Store: StoreOf(d.open(t)), renewed: make(chan error, 100)}
	watched.cutOff.Store(true)
	a := New(Config{Store: watched, Fetcher: held, IdempotencyLease: testLease, IdempotencyHeartbeat: testBeat})
	b := New(Config{Store: StoreOf(d.open(t)), Fetcher: quickFetcher{}, IdempotencyLease: testLease, IdempotencyHeartbeat: testBeat})

	doneA := sendAsync(a, from, req, key)
	receive(t, held.entered, "process A to claim the key and fetch the attachment")
	require.Error(t, receive(t, watched.renewed, "a failed renewal"))

	res, _ := retryUntilAccepted(t, b, from, req, key)
	require.False(t, res.Replayed)

	watched.cutOff.Store(false)
	held.open()
	late := receive(t, doneA, "process A's request to end")
	requireKind(t, late.err, KindIdempotencyInFlight)
	require.Equal(t, 1, d.emails(t), "the late holder wrote nothing")

	again, err := a.SendWithOptions(context.Background(), from, req, SendOptions{IdempotencyKey: ptr(key)})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.ID, again.ID)
}
