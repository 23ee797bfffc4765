package inroute_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
)

// fakeStore answers routing's queries from maps, counting them.
type fakeStore struct {
	emails    map[uuid.UUID]store.EmailRoute
	receiving map[string][2]uuid.UUID
	err       error
	queries   int
}

func (f *fakeStore) EmailRoute(_ context.Context, id uuid.UUID) (store.EmailRoute, error) {
	f.queries++
	if f.err != nil {
		return store.EmailRoute{}, f.err
	}
	e, ok := f.emails[id]
	if !ok {
		return store.EmailRoute{}, store.ErrNotFound
	}
	return e, nil
}

func (f *fakeStore) ReceivingDomain(_ context.Context, host string) (uuid.UUID, uuid.UUID, error) {
	f.queries++
	if f.err != nil {
		return uuid.Nil, uuid.Nil, f.err
	}
	r, ok := f.receiving[host]
	if !ok {
		return uuid.Nil, uuid.Nil, store.ErrNotFound
	}
	return r[0], r[1], nil
}

func (f *fakeStore) GetEmail(context.Context, uuid.UUID, uuid.UUID) (store.Email, error) {
	return store.Email{}, errors.New("not used")
}

// TestRoute decides routes from what the store answers, without a
// database: signatures, hosts, recipient indexes and the per-email forms
// of emails from before per-recipient return paths.
func TestRoute(t *testing.T) {
	ctx := context.Background()
	verpKey, unsubKey := []byte("verp-key-0123456789abcdef"), []byte("unsub-key-0123456789abcdef")
	team, domain, recvDomain := uuid.New(), uuid.New(), uuid.New()
	recent, old, gone := uuid.New(), uuid.New(), uuid.New()
	f := &fakeStore{
		emails: map[uuid.UUID]store.EmailRoute{
			recent: {TeamID: team, DomainID: domain, Host: "send.shop.test", Recipients: 2},
			old: {TeamID: team, DomainID: domain, Host: "send.shop.test", Recipients: 1,
				BeforeSigning: true, BeforePerRecipient: true},
		},
		receiving: map[string][2]uuid.UUID{"shop.test": {team, recvDomain}},
	}
	r := inroute.New(f, f, verpKey, unsubKey)
	rcpt := func(key []byte, id uuid.UUID, i int, host string) string {
		a, err := reports.RecipientReturnPath(key, id, i, host)
		require.NoError(t, err)
		return a
	}
	unsub := func(key []byte, id uuid.UUID, i int, host string) string {
		a, err := mailto.Make(key, id, i, host)
		require.NoError(t, err)
		return a
	}
	returnPath := func(id uuid.UUID) inmail.Route {
		return inmail.Route{Kind: inmail.RouteReturnPath, TeamID: team, DomainID: domain, EmailID: id}
	}
	for name, tc := range map[string]struct {
		rcpt string
		want inmail.Route // zero: inmail.ErrNotOurs
	}{
		"per-recipient return path":         {rcpt(verpKey, recent, 1, "send.shop.test"), returnPath(recent)},
		"return path host in another case":  {rcpt(verpKey, recent, 0, "SEND.shop.test"), returnPath(recent)},
		"a recipient the email lacks":       {rcpt(verpKey, recent, 2, "send.shop.test"), inmail.Route{}},
		"another domain's host":             {rcpt(verpKey, recent, 0, "send.other.test"), inmail.Route{}},
		"signed per email, before per-rcpt": {reports.SignedReturnPath(verpKey, old, "send.shop.test"), returnPath(old)},
		"signed per email, after per-rcpt":  {reports.SignedReturnPath(verpKey, recent, "send.shop.test"), inmail.Route{}},
		"unsigned, before signing":          {"bounces+" + old.String() + "@send.shop.test", returnPath(old)},
		"unsigned, after signing":           {"bounces+" + recent.String() + "@send.shop.test", inmail.Route{}},
		"verified, email no longer kept":    {rcpt(verpKey, gone, 0, "send.shop.test"), inmail.Route{Kind: inmail.RouteDiscard}},
		"unverified, email no longer kept":  {"bounces+" + gone.String() + "@send.shop.test", inmail.Route{}},
		"unsubscribe address":               {unsub(unsubKey, recent, 1, "send.shop.test"), inmail.Route{Kind: inmail.RouteUnsubscribe, TeamID: team, DomainID: domain, EmailID: recent}},
		"unsubscribe, another key":          {unsub(verpKey, recent, 1, "send.shop.test"), inmail.Route{}},
		"unsubscribe, a recipient it lacks": {unsub(unsubKey, recent, 2, "send.shop.test"), inmail.Route{}},
		"receiving address":                 {"Support@Shop.test.", inmail.Route{Kind: inmail.RouteReceiving, TeamID: team, DomainID: recvDomain}},
		"another receiving domain":          {"support@other.test", inmail.Route{}},
		"no domain":                         {"support@", inmail.Route{}},
	} {
		got, err := r.Route(ctx, tc.rcpt)
		if tc.want == (inmail.Route{}) {
			require.ErrorIs(t, err, inmail.ErrNotOurs, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}

	// A forged per-recipient code costs no query.
	f.queries = 0
	_, err := r.ReturnPath(ctx, mustVERP(t, rcpt([]byte("forger's key"), recent, 0, "send.shop.test")))
	require.ErrorIs(t, err, inmail.ErrNotOurs)
	require.Zero(t, f.queries)

	// A database failure is a temporary error, not "not ours".
	f.err = errors.New("database down")
	_, err = r.Route(ctx, rcpt(verpKey, recent, 0, "send.shop.test"))
	require.Error(t, err)
	require.NotErrorIs(t, err, inmail.ErrNotOurs)
	_, err = r.Route(ctx, "support@shop.test")
	require.Error(t, err)
	require.NotErrorIs(t, err, inmail.ErrNotOurs)
}

func mustVERP(t *testing.T, addr string) reports.VERP {
	t.Helper()
	v, ok := reports.ParseVERP(addr)
	require.True(t, ok, addr)
	return v
}
