package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
)

var mailtoKey = []byte("mailto key, 32 bytes long.......")

// TestInboundRouteUnsubscribe: the mailto unsubscribe address of a
// recipient of one of our emails routes to the email's team, in any
// letter case; a forged code, another host, an unknown email or a
// recipient index out of range is not ours.
func TestInboundRouteUnsubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	other := newTeam(t, st)
	rt := inroute.New(st.Received, st.Emails, verpKey, mailtoKey)
	e, d := domainEmail(t, st, team, "shop.test", time.Now(), "a@dest.test", "b@dest.test")
	theirs, _ := domainEmail(t, st, other, "theirs.test", time.Now(), "a@dest.test")

	mk := func(key []byte, id uuid.UUID, i int, host string) string {
		t.Helper()
		a, err := mailto.Make(key, id, i, host)
		require.NoError(t, err)
		return a
	}
	valid := mk(mailtoKey, e.ID, 1, "send.shop.test")
	for _, rcpt := range []string{valid, strings.ToUpper(valid)} {
		r, err := rt.Route(ctx, rcpt)
		require.NoError(t, err)
		require.Equal(t, inmail.Route{Kind: inmail.RouteUnsubscribe, TeamID: team, DomainID: d.ID, EmailID: e.ID}, r)
	}
	r, err := rt.Route(ctx, mk(mailtoKey, theirs.ID, 0, "send.theirs.test"))
	require.NoError(t, err)
	require.Equal(t, other, r.TeamID, "each email routes to its own team")

	code, err := mailto.Code(mailtoKey, e.ID, 1)
	require.NoError(t, err)
	flipped := "a"
	if code[40] == 'a' {
		flipped = "c"
	}
	for name, rcpt := range map[string]string{
		"another key":               mk([]byte("another key, 32 bytes long......"), e.ID, 1, "send.shop.test"),
		"altered code":              mailto.Prefix + code[:40] + flipped + code[41:] + "@send.shop.test",
		"another domain's host":     mk(mailtoKey, e.ID, 1, "send.theirs.test"),
		"the domain, not its label": mk(mailtoKey, e.ID, 1, "shop.test"),
		"unknown email":             mk(mailtoKey, uuid.Must(uuid.NewV7()), 0, "send.shop.test"),
		"no such recipient":         mk(mailtoKey, e.ID, 2, "send.shop.test"),
		"not a code":                "unsubscribe+hello@send.shop.test",
	} {
		_, err := rt.Route(ctx, rcpt)
		require.ErrorIs(t, err, inmail.ErrNotOurs, name)
	}

	// Without the key none routes.
	nokeyRt := inroute.New(st.Received, st.Emails, verpKey, nil)
	_, err = nokeyRt.Route(ctx, valid)
	require.ErrorIs(t, err, inmail.ErrNotOurs)
}
