package store_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func ipAddr(ip, ehlo string) store.IPAddress {
	return store.IPAddress{IP: netip.MustParseAddr(ip), EHLOName: ehlo}
}

// poolView is a pool as names and "ip@ehlo" strings, for comparisons.
func poolView(pools []store.IPPool) map[string][]string {
	out := map[string][]string{}
	for _, p := range pools {
		out[p.Name] = []string{}
		for _, a := range p.Addresses {
			out[p.Name] = append(out[p.Name], a.IP.String()+"@"+a.EHLOName)
		}
	}
	return out
}

func TestSyncIPPoolsUpsertsAndRetires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	cfg := []store.IPPool{
		{Name: "shared", Addresses: []store.IPAddress{ipAddr("203.0.113.5", "mta1.example.com")}},
		{Name: "acme", Addresses: []store.IPAddress{ipAddr("203.0.113.9", "mta9.example.com"),
			ipAddr("2001:db8::10", "mta10.example.com")}},
	}
	require.NoError(t, st.Domains.SyncIPPools(ctx, cfg))
	require.NoError(t, st.Domains.SyncIPPools(ctx, cfg), "syncing again changes nothing")
	pools, err := st.Domains.IPPools(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"shared", "acme"}, []string{pools[0].Name, pools[1].Name}, "in the order created")
	require.Equal(t, map[string][]string{"shared": {"203.0.113.5@mta1.example.com"},
		"acme": {"203.0.113.9@mta9.example.com", "2001:db8::10@mta10.example.com"}}, poolView(pools))
	acme := pools[1]
	kept := acme.Addresses[0].ID

	// A pool created by the operator is not touched by the sync.
	_, err = st.Domains.AddIPPool(ctx, store.IPPool{Name: "bulk", Addresses: []store.IPAddress{ipAddr("198.51.100.7", "b7.example.com")}})
	require.NoError(t, err)

	// The configuration drops an address, renames another's EHLO name and
	// moves one between pools: the dropped one is retired, not deleted,
	// and comes back with its id.
	require.NoError(t, st.Domains.SyncIPPools(ctx, []store.IPPool{
		{Name: "shared", Addresses: []store.IPAddress{ipAddr("203.0.113.5", "out1.example.com"), ipAddr("2001:db8::10", "mta10.example.com")}},
		{Name: "acme", Addresses: []store.IPAddress{ipAddr("203.0.113.9", "mta9.example.com")}},
	}))
	pools, err = st.Domains.IPPools(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"shared": {"203.0.113.5@out1.example.com", "2001:db8::10@mta10.example.com"},
		"acme": {"203.0.113.9@mta9.example.com"}, "bulk": {"198.51.100.7@b7.example.com"}}, poolView(pools))

	require.NoError(t, st.Domains.SyncIPPools(ctx, []store.IPPool{{Name: "acme", Addresses: []store.IPAddress{
		ipAddr("203.0.113.11", "mta11.example.com")}}}))
	p, err := st.Domains.IPPool(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, []string{"203.0.113.11@mta11.example.com"}, poolView([]store.IPPool{p})["acme"])
	require.NoError(t, st.Domains.SyncIPPools(ctx, cfg[1:]))
	p, err = st.Domains.IPPool(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, kept, p.Addresses[0].ID, "a retired address keeps its row and id")
}

func TestAddIPPoolRefusesAnotherPoolsAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	p, err := st.Domains.AddIPPool(ctx, store.IPPool{Name: "acme", Addresses: []store.IPAddress{ipAddr("203.0.113.9", "mta9.example.com")}})
	require.NoError(t, err)
	require.Equal(t, "acme", p.Name)
	require.Len(t, p.Addresses, 1)
	p, err = st.Domains.AddIPPool(ctx, store.IPPool{Name: "acme", Addresses: []store.IPAddress{ipAddr("203.0.113.10", "mta10.example.com")}})
	require.NoError(t, err)
	require.Len(t, p.Addresses, 2, "adding to an existing pool")
	_, err = st.Domains.AddIPPool(ctx, store.IPPool{Name: "other", Addresses: []store.IPAddress{ipAddr("203.0.113.9", "x.example.com")}})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = st.Domains.IPPool(ctx, "other")
	require.ErrorIs(t, err, store.ErrUnknownPool, "the failed add left nothing behind")
	_, err = st.Domains.AddIPPool(ctx, store.IPPool{Name: "Bad Name"})
	require.Error(t, err, "the database checks pool names too")
}

func TestSendingIPPoolDomainThenTeamThenDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, name := range []string{"acme", "eu"} {
		_, err := st.Domains.AddIPPool(ctx, store.IPPool{Name: name})
		require.NoError(t, err)
	}
	team, other := newTeam(t, st), newTeam(t, st)
	d := newDomain(team, "acme.test")
	require.NoError(t, st.Domains.CreateDomain(ctx, d))

	// pool is the IP pool EmailForSending finds for an email of team from
	// domain (nil: the sandbox sender), with the email and its domain.
	pool := func(team uuid.UUID, domain *uuid.UUID) string {
		t.Helper()
		e := newEmail(team, "delivered@posthaste.test")
		e.DomainID = domain
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		got, err := st.Emails.EmailForSending(ctx, e.ID, true)
		require.NoError(t, err)
		require.Equal(t, e.ID, got.Email.ID)
		require.Len(t, got.Email.Attachments, 1)
		if domain == nil {
			require.Nil(t, got.Domain)
		} else {
			require.NotNil(t, got.Domain)
			require.Equal(t, *domain, got.Domain.ID)
		}
		return got.IPPool
	}
	require.Equal(t, "", pool(team, &d.ID), "nothing assigned: the default pool")
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, team, "acme"))
	require.Equal(t, "acme", pool(team, &d.ID))
	require.Equal(t, "acme", pool(team, nil), "sandbox mail of the team")
	require.Equal(t, "", pool(other, nil), "another team keeps the default")
	require.NoError(t, st.Domains.SetDomainIPPool(ctx, d.ID, "eu"))
	require.Equal(t, "eu", pool(team, &d.ID), "the domain's pool wins")
	require.NoError(t, st.Domains.SetDomainIPPool(ctx, d.ID, ""))
	require.Equal(t, "acme", pool(team, &d.ID), "a domain without a pool follows its team")

	require.ErrorIs(t, st.Domains.SetTeamIPPool(ctx, team, "nope"), store.ErrUnknownPool)
	require.ErrorIs(t, st.Domains.SetTeamIPPool(ctx, uuid.Must(uuid.NewV7()), "acme"), store.ErrNotFound)
	require.ErrorIs(t, st.Domains.SetDomainIPPool(ctx, uuid.Must(uuid.NewV7()), "acme"), store.ErrNotFound)

	teams, err := st.Domains.ListTeams(ctx)
	require.NoError(t, err)
	pools := map[uuid.UUID]string{}
	for _, tm := range teams {
		pools[tm.ID] = tm.IPPool
	}
	require.Equal(t, "acme", pools[team])
	require.Contains(t, pools, other)
	require.Equal(t, "", pools[other])
}
