package domains_test

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func ptr[T any](v T) *T { return &v }

// Bad input is refused before anything is stored, each naming its field.
func TestAddRefusesBadInput(t *testing.T) {
	box, err := seal.New(bytes.Repeat([]byte{5}, 32))
	require.NoError(t, err)
	svc := domains.New(domains.Config{Keys: box}, nil) // no store: nothing may reach it
	for _, tc := range []struct {
		req   domains.Request
		field string
	}{
		{domains.Request{Name: ""}, "name"},
		{domains.Request{Name: "not a domain"}, "name"},
		{domains.Request{Name: "example.com", Region: ptr("mars-1")}, "region"},
		{domains.Request{Name: "example.com", ReturnPath: ptr("a.b")}, "custom_return_path"},
		{domains.Request{Name: "example.com", TrackingSubdomain: ptr("-x")}, "tracking_subdomain"},
		{domains.Request{Name: "example.com", TLS: ptr("always")}, "tls"},
		{domains.Request{Name: "example.com", Receiving: ptr("maybe")}, "capabilities.receiving"},
	} {
		_, err := svc.Add(context.Background(), uuid.New(), tc.req, audit.Entry{ActorType: audit.ActorAdmin})
		var ie *invalid.Error
		require.ErrorAs(t, err, &ie, "%+v", tc.req)
		require.Equal(t, tc.field, ie.Field)
	}
	_, err = domains.New(domains.Config{}, nil).Add(context.Background(), uuid.New(),
		domains.Request{Name: "example.com"}, audit.Entry{})
	require.ErrorIs(t, err, domains.ErrNoMasterKey)
}

type okVerifier struct{ verified, forgotten int }

func (v *okVerifier) Verify(context.Context, string) error { v.verified++; return nil }
func (v *okVerifier) Forget(context.Context, string) error { v.forgotten++; return nil }

// Each change records its audit entry for the actor it is given, and the
// reads answer only for the team's own domains.
func TestServiceRecordsEachChange(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	box, err := seal.New(bytes.Repeat([]byte{5}, 32))
	require.NoError(t, err)
	creds, err := account.NewTeam(ctx, st, "Team", "owner@example.com")
	require.NoError(t, err)
	team := uuid.MustParse(creds.TeamID)
	owner, err := st.Accounts.UserByEmail(ctx, "owner@example.com")
	require.NoError(t, err)
	other, err := account.NewTeam(ctx, st, "Other", "other@example.com")
	require.NoError(t, err)

	v := &okVerifier{}
	svc := domains.New(domains.Config{Keys: box, DKIMSelector: "ph", Verifier: v}, st)
	require.True(t, svc.CanVerify())
	actor := audit.Entry{ActorType: audit.ActorUser, ActorID: &owner.ID, ClientAddr: "192.0.2.1", UserAgent: "test"}

	d, err := svc.Add(ctx, team, domains.Request{Name: "Example.COM"}, actor)
	require.NoError(t, err)
	require.Equal(t, "example.com", d.Name)
	_, err = svc.Add(ctx, team, domains.Request{Name: "example.com"}, actor)
	var ie *invalid.Error
	require.ErrorAs(t, err, &ie, "a name the team has")

	got, err := svc.Get(ctx, team, d.ID)
	require.NoError(t, err)
	require.Equal(t, d.ID, got.ID)
	_, err = svc.Get(ctx, uuid.MustParse(other.TeamID), d.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's domain")
	list, more, err := svc.List(ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, list, 1)

	on := true
	d, err = svc.Update(ctx, team, d.ID, domains.Settings{OpenTracking: &on}, actor)
	require.NoError(t, err)
	require.True(t, d.OpenTracking)
	_, err = svc.Verify(ctx, team, d.ID, actor)
	require.NoError(t, err)
	require.Equal(t, 1, v.verified)
	_, err = svc.Delete(ctx, team, nil, d.ID, actor)
	require.ErrorIs(t, err, store.ErrOwnersOnly, "nobody known")
	_, err = svc.Delete(ctx, team, &owner.ID, d.ID, actor)
	require.NoError(t, err)
	require.Equal(t, 1, v.forgotten)

	entries, _, err := auditlog.New(st).List(ctx, team, audit.Filter{TargetID: d.ID.String()}, store.Page{Limit: 10})
	require.NoError(t, err)
	var actions []audit.Action
	for _, e := range entries {
		actions = append(actions, e.Action)
		require.Equal(t, audit.ActorUser, e.ActorType)
		require.Equal(t, owner.ID, *e.ActorID)
		require.Equal(t, "192.0.2.1", e.ClientAddr)
		require.Equal(t, "domain", e.TargetType)
		require.Equal(t, audit.Success, e.Outcome)
	}
	require.Equal(t, []audit.Action{audit.DomainDelete, audit.DomainVerify, audit.DomainUpdate, audit.DomainCreate},
		actions, "newest first; refused changes are not recorded")
	require.JSONEq(t, `{"name":"example.com"}`, entries[3].Detail)
}

// A team sees the default pool and its own, never another team's.
func TestPoolAddresses(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	mine, theirs := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, id := range []uuid.UUID{mine, theirs} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: id, Name: id.String()}))
	}
	for i, name := range []string{"default", "mine", "theirs"} {
		ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)})
		_, err := st.Domains.AddIPPool(ctx, store.IPPool{Name: name,
			Addresses: []store.IPAddress{{IP: ip, EHLOName: name + ".example.com"}}})
		require.NoError(t, err)
	}
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, mine, "mine"))
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, theirs, "theirs"))

	addrs, err := domains.New(domains.Config{}, st).PoolAddresses(ctx, mine, "default", time.Now())
	require.NoError(t, err)
	var pools []string
	for _, a := range addrs {
		pools = append(pools, a.Pool)
	}
	require.Equal(t, []string{"default", "mine"}, pools)
}
