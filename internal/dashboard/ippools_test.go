package dashboard_test

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/store"
)

// The IP pools page shows an owner the pools the team's mail can leave
// from (the default pool and its own, not another team's) with their
// addresses, EHLO names and warm-up: day and today's allowance by the
// schedule, today's count from the database, done and retired addresses;
// a member sees none of it.
func TestIPPoolsPageShowsTheWarmup(t *testing.T) {
	t.Parallel()
	now := time.Now() // the dashboard's clock: sessions expire by the database's
	sched := ippool.Schedule{50, 100, 200}
	f := newFixture(t, func(c *dashboard.Config) {
		c.Warmup, c.WarmupOverflow, c.DefaultPool = sched, "wait", "shared"
	})
	ctx := context.Background()
	addr := func(ip, ehlo string) store.IPAddress {
		return store.IPAddress{IP: netip.MustParseAddr(ip), EHLOName: ehlo}
	}
	require.NoError(t, f.store.Domains.SyncIPPools(ctx, []store.IPPool{
		{Name: "shared", Addresses: []store.IPAddress{addr("203.0.113.5", "mta5.example.com"), addr("203.0.113.6", "mta6.example.com")}},
		{Name: "acme", Addresses: []store.IPAddress{addr("203.0.113.9", "mta9.example.com")}},
		{Name: "beta", Addresses: []store.IPAddress{addr("203.0.113.77", "mta77.example.com")}},
	}))
	require.NoError(t, f.store.Domains.SetTeamIPPool(ctx, uuid.MustParse(f.a.TeamID), "acme"))
	require.NoError(t, f.store.Domains.SetTeamIPPool(ctx, uuid.MustParse(f.b.TeamID), "beta"))
	require.NoError(t, f.store.Domains.SyncIPPools(ctx, []store.IPPool{{Name: "shared", Addresses: []store.IPAddress{
		addr("203.0.113.5", "mta5.example.com")}}}), "203.0.113.6 retires")
	day1 := now.Add(-48 * time.Hour) // today is day 3
	require.NoError(t, f.store.Domains.SetWarmup(ctx, netip.MustParseAddr("203.0.113.9"), &day1))
	require.NoError(t, f.store.Domains.SetWarmup(ctx, netip.MustParseAddr("203.0.113.5"), nil))
	got, err := f.store.Domains.TakeWarmup(ctx, netip.MustParseAddr("203.0.113.9"), 42, sched, now)
	require.NoError(t, err)
	require.Equal(t, 42, got)

	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	res, page := get(t, c, f.srv.URL+"/dashboard/ip-pools")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `<a href="/dashboard/ip-pools" aria-current="page">IP pools</a>`)
	require.Contains(t, page, "50, 100, 200 messages on days 1 to 3 (UTC), then no limit")
	row := func(ip string) string {
		t.Helper()
		i := strings.Index(page, "<code>"+ip+"</code>")
		require.GreaterOrEqual(t, i, 0, "%s is listed", ip)
		end := strings.Index(page[i:], "</tr>")
		return strings.Join(strings.Fields(page[i:i+end]), " ")
	}
	require.Contains(t, row("203.0.113.9"), `mta9.example.com</td> <td data-label="Warm-up"><span class="badge wait">warming</span></td> <td data-label="Day">3 of 3</td> <td data-label="Today's allowance">200</td> <td data-label="Sent today">42</td>`)
	require.Contains(t, row("203.0.113.5"), `<span class="badge ok">done</span></td> <td data-label="Day">—</td> <td data-label="Today's allowance">no limit</td> <td data-label="Sent today">0</td>`)
	require.Contains(t, row("203.0.113.6"), `retired`)
	require.Contains(t, page, `shared <span class="badge neutral">default</span>`)
	require.Less(t, strings.Index(page, `id="pool-shared"`), strings.Index(page, `id="pool-acme"`), "pools in the order created")
	require.NotContains(t, page, "203.0.113.77", "another team's pool is not shown")
	require.NotContains(t, page, `id="pool-beta"`)

	// Started a day earlier, the warm-up is over.
	day0 := day1.Add(-24 * time.Hour)
	require.NoError(t, f.store.Domains.SetWarmup(ctx, netip.MustParseAddr("203.0.113.9"), &day0))
	_, page = get(t, c, f.srv.URL+"/dashboard/ip-pools")
	require.Contains(t, row("203.0.113.9"), `<span class="badge ok">done</span>`)

	hash, err := password.Hash("member-password")
	require.NoError(t, err)
	member := store.User{ID: uuid.New(), Email: "member@example.com", PasswordHash: hash}
	require.NoError(t, f.store.Accounts.CreateUser(ctx, member))
	require.NoError(t, f.store.Accounts.AddMember(ctx, uuid.MustParse(f.a.TeamID), member.ID, "member"))
	mc := f.browser()
	f.login(mc, member.Email, "member-password")
	res, page = get(t, mc, f.srv.URL+"/dashboard/ip-pools")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Only the team's owners see the IP pools.")
	require.NotContains(t, page, "203.0.113.9")
}
