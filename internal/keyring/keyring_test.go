package keyring_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/keyring"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func box(t *testing.T, keys ...byte) *seal.Box {
	t.Helper()
	var raw [][]byte
	for _, k := range keys {
		raw = append(raw, bytes.Repeat([]byte{k}, seal.KeySize))
	}
	b, err := seal.NewRing(raw[0], raw[1:]...)
	require.NoError(t, err)
	return b
}

// sealV1 seals the way installations did before keyrings (version 1).
func sealV1(t *testing.T, key byte, plaintext, ad []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(bytes.Repeat([]byte{key}, seal.KeySize))
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	nonce := make([]byte, aead.NonceSize())
	_, err = rand.Read(nonce)
	require.NoError(t, err)
	return aead.Seal(append([]byte{1}, nonce...), nonce, plaintext, ad)
}

var purposes = []string{"p1", "p2"}

// sealed is one value the test stored, to be read back by column.
type sealed struct {
	col       string
	id        uuid.UUID
	plaintext string
	team      uuid.UUID // for app_user rows
}

// seedUnderA stores sealed values of every kind under key A (0xa): DKIM
// keys (some in the version-1 format of existing installations), webhook
// secrets and previous secrets, a TOTP secret, and pins the token keys.
func seedUnderA(t *testing.T, st *store.Store) []sealed {
	t.Helper()
	ctx := context.Background()
	a := box(t, 0xa)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	var out []sealed
	for i := range 7 {
		id := uuid.Must(uuid.NewV7())
		pt := fmt.Sprintf("dkim %d", i)
		v, err := a.Seal([]byte(pt), id[:])
		require.NoError(t, err)
		if i%3 == 0 {
			v = sealV1(t, 0xa, []byte(pt), id[:])
		}
		require.NoError(t, st.Domains.CreateDomain(ctx, store.Domain{ID: id, TeamID: team, Name: fmt.Sprintf("d%d.test", i),
			Region: "us-east-1", Status: store.DomainNotStarted, ReturnPath: "send", TLS: store.TLSOpportunistic,
			DKIMSelector: "posthaste", DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: v,
			RecordStatus: map[string]string{"dkim": "not_started"}}))
		out = append(out, sealed{col: "domain.dkim_private_key", id: id, plaintext: pt})
	}
	for i := range 3 {
		id := uuid.Must(uuid.NewV7())
		secret, err := a.Seal([]byte(fmt.Sprintf("whsec %d", i)), id[:])
		require.NoError(t, err)
		require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: id, TeamID: team, Endpoint: "https://hook.test/",
			Events: []string{"email.sent"}, Status: "enabled", Secret: secret}))
		out = append(out, sealed{col: "webhook.secret", id: id, plaintext: fmt.Sprintf("whsec %d", i)})
		if i == 0 {
			next, err := a.Seal([]byte("whsec rotated"), id[:])
			require.NoError(t, err)
			require.NoError(t, st.Webhooks.RotateWebhookSecret(ctx, team, id, next, time.Now().Add(time.Hour), audit.Entry{}))
			out[len(out)-1] = sealed{col: "webhook.previous_secret", id: id, plaintext: "whsec 0"}
			out = append(out, sealed{col: "webhook.secret", id: id, plaintext: "whsec rotated"})
		}
	}
	user := store.User{ID: uuid.New(), Email: "u@example.test", PasswordHash: "hash"}
	require.NoError(t, st.Accounts.CreateUser(ctx, user))
	totp, err := a.Seal([]byte("totp"), user.ID[:])
	require.NoError(t, err)
	require.NoError(t, st.Sessions.StartTOTP(ctx, user.ID, totp))
	out = append(out, sealed{col: "app_user.totp_secret", id: user.ID, plaintext: "totp", team: team})
	_, err = keyring.Pin(ctx, st, a, purposes)
	require.NoError(t, err)
	return out
}

// requireOpens checks that every seeded value opens with b alone (read
// back through the store's own queries) and, with under, which key
// sealed it.
func requireOpens(t *testing.T, st *store.Store, vals []sealed, b *seal.Box, under seal.KeyID) {
	t.Helper()
	ctx := context.Background()
	for _, v := range vals {
		var got []byte
		switch v.col {
		case "domain.dkim_private_key":
			d, err := st.Domains.DomainByID(ctx, v.id)
			require.NoError(t, err)
			got = d.DKIMPrivateKey
		case "webhook.secret", "webhook.previous_secret":
			w, err := st.Webhooks.WebhookByID(ctx, v.id)
			require.NoError(t, err)
			got = w.Secret
			if v.col == "webhook.previous_secret" {
				got = w.PreviousSecret
			}
		case "app_user.totp_secret":
			m, err := st.Sessions.UserMFA(ctx, v.id, v.team)
			require.NoError(t, err)
			got = m.SealedSecret
		}
		pt, err := b.Open(got, v.id[:])
		require.NoError(t, err, "%s of %s", v.col, v.id)
		require.Equal(t, v.plaintext, string(pt))
		id, ok := seal.SealedUnder(got)
		require.True(t, ok, "%s of %s is in the keyring format", v.col, v.id)
		require.Equal(t, under, id)
	}
}

func TestRotateIsResumableAndIdempotent(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	vals := seedUnderA(t, st)
	a := box(t, 0xa)
	keysBefore, err := keyring.Pin(ctx, st, a, purposes)
	require.NoError(t, err)
	cols := store.SealedColumns()

	ring := box(t, 0xb, 0xa)
	rep, err := keyring.Check(ctx, st, ring, cols)
	require.NoError(t, err)
	require.Equal(t, int64(len(vals)+len(purposes)), rep.Remaining, "%+v", rep)

	// Cut short after three batches of two, as a killed run would be.
	rep, err = keyring.Rotate(ctx, st, ring, cols, keyring.Options{BatchSize: 2, MaxBatches: 3})
	require.NoError(t, err)
	require.False(t, rep.Complete)
	require.Equal(t, 6, rep.Resealed)
	check, err := keyring.Check(ctx, st, ring, cols)
	require.NoError(t, err)
	require.Equal(t, int64(len(vals)+len(purposes)-6), check.Remaining)

	// The services keep working meanwhile: a value sealed now is under B.
	rep, err = keyring.Rotate(ctx, st, ring, cols, keyring.Options{BatchSize: 2})
	require.NoError(t, err)
	require.True(t, rep.Complete)
	require.Equal(t, len(vals)+len(purposes)-6, rep.Resealed, "the rerun finishes the rest")
	require.Zero(t, rep.Remaining)
	for _, c := range rep.Columns {
		require.Zero(t, c.Remaining, c.Column)
	}

	onlyB := box(t, 0xb)
	requireOpens(t, st, vals, onlyB, onlyB.CurrentID())
	keysAfter, err := keyring.Pin(ctx, st, onlyB, purposes)
	require.NoError(t, err, "the stored token keys open with the new key alone")
	for _, p := range purposes {
		require.Equal(t, keysBefore.DeriveKey(p), keysAfter.DeriveKey(p), "the %s key outlives the rotation", p)
		require.NotEqual(t, onlyB.DeriveKey(p), keysAfter.DeriveKey(p))
	}

	rep, err = keyring.Rotate(ctx, st, onlyB, cols, keyring.Options{})
	require.NoError(t, err)
	require.Zero(t, rep.Resealed, "a second run changes nothing")
	require.Zero(t, rep.Remaining)
	check, err = keyring.Check(ctx, st, onlyB, cols)
	require.NoError(t, err)
	require.Zero(t, check.Remaining)
	require.Equal(t, int64(len(vals)+len(purposes)), func() (n int64) {
		for _, c := range check.Columns {
			n += c.Total
		}
		return n
	}())
}

func TestRotateReportsValuesNoKeyOpens(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	vals := seedUnderA(t, st)
	// B is current, but A is missing from the ring.
	rep, err := keyring.Rotate(ctx, st, box(t, 0xb, 0xc), store.SealedColumns(), keyring.Options{BatchSize: 3})
	require.ErrorIs(t, err, keyring.ErrUnopenable)
	require.Equal(t, len(vals)+len(purposes), rep.Unopenable)
	require.Zero(t, rep.Resealed)
	require.Equal(t, int64(len(vals)+len(purposes)), rep.Remaining, "nothing was changed")
	requireOpens(t, st, vals[1:3], box(t, 0xa), box(t, 0xa).CurrentID())
	_, err = keyring.Pin(ctx, st, box(t, 0xb), purposes)
	require.ErrorContains(t, err, "cannot be opened with the master key")
}

// TestPinAgreesAcrossProcesses: processes starting together on a new
// installation all end up with the same stored token keys.
func TestPinAgreesAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	a := box(t, 0xa)
	got := make([][]byte, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := keyring.Pin(ctx, st, a, purposes)
			errs[i] = err
			if err == nil {
				got[i] = b.DeriveKey("p1")
			}
		}()
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, a.DeriveKey("p1"), got[i], "the key of tokens already sent: derived from the master key")
	}

	// An installation upgraded and rotated at once ([B, A] on its first
	// start): the token keys are those of A, which made its tokens.
	st2 := storetest.New(t)
	b, err := keyring.Pin(ctx, st2, box(t, 0xb, 0xa), purposes)
	require.NoError(t, err)
	require.Equal(t, a.DeriveKey("p2"), b.DeriveKey("p2"))
}
