package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/store"
)

// proxied is a browser whose requests come through a trusted proxy on
// behalf of 203.0.113.7, with its own user agent.
type proxied struct{ base http.RoundTripper }

func (p proxied) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	r.Header.Set("User-Agent", "AuditBrowser/1.0")
	return p.base.RoundTrip(r)
}

func teamAudit(t *testing.T, st *store.Store, team uuid.UUID, f audit.Filter) []audit.Entry {
	t.Helper()
	list, _, err := st.Privacy.ListAudit(context.Background(), team, f, store.Page{Limit: 100})
	require.NoError(t, err)
	return list
}

func TestDashboardActionsAreAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *dashboard.Config) { c.TrustedProxies = []string{"127.0.0.1"} })
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	owner := mustUser(t, f, f.a.Email)
	c := f.browser()
	c.Transport = proxied{http.DefaultTransport}

	// A wrong password of a known user, and of nobody.
	res, _ := f.login(c, f.a.Email, "wrong")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, _ = f.login(c, "nobody@example.com", "wrong")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	f.login(c, f.a.Email, f.a.Password)

	_, page := get(t, c, f.srv.URL+"/dashboard/api-keys")
	res, _ = post(t, c, f.srv.URL+"/dashboard/api-keys", url.Values{"csrf": {csrf(t, page)}, "name": {"ci"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	keys, _, err := f.store.Accounts.ListAPIKeys(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	var keyID uuid.UUID
	for _, k := range keys {
		if k.Name == "ci" {
			keyID = k.ID
		}
	}

	created := teamAudit(t, f.store, teamA, audit.Filter{Action: audit.APIKeyCreate})
	require.Len(t, created, 1)
	e := created[0]
	require.Equal(t, keyID.String(), e.TargetID)
	require.Equal(t, audit.ActorUser, e.ActorType)
	require.Equal(t, owner, *e.ActorID)
	require.Equal(t, "203.0.113.7", e.ClientAddr)
	require.Equal(t, "AuditBrowser/1.0", e.UserAgent)
	require.Equal(t, audit.Success, e.Outcome)

	signIns := teamAudit(t, f.store, teamA, audit.Filter{Action: audit.SignIn})
	require.Len(t, signIns, 2, "the owner's failure and success; nobody's failure is in no team")
	require.Equal(t, audit.Success, signIns[0].Outcome)
	require.Equal(t, audit.Failure, signIns[1].Outcome)
	require.Equal(t, audit.ActorUnknown, signIns[1].ActorType)
	require.Nil(t, signIns[1].ActorID)
	require.Equal(t, owner.String(), signIns[1].TargetID)
	n, err := f.store.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "three sign-ins and a key")

	// The Audit page shows the team's entries to its owners, filtered.
	res, page = get(t, c, f.srv.URL+"/dashboard/audit?action=api_key.create")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, keyID.String())
	require.Contains(t, page, "203.0.113.7")
	require.NotContains(t, page, "user.sign_in</code>")
	res, page = get(t, c, f.srv.URL+"/dashboard/audit?from=yesterday")
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "<code>from</code>")

	// Team B's owner sees none of it; a member is refused.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/audit")
	require.NotContains(t, page, keyID.String())
	hash, err := password.Hash("member-password")
	require.NoError(t, err)
	member := store.User{ID: uuid.New(), Email: "member@example.com", PasswordHash: hash}
	require.NoError(t, f.store.Accounts.CreateUser(ctx, member))
	require.NoError(t, f.store.Accounts.AddMember(ctx, teamA, member.ID, "member"))
	mc := f.browser()
	f.login(mc, member.Email, "member-password")
	res, page = get(t, mc, f.srv.URL+"/dashboard/audit")
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.False(t, strings.Contains(page, keyID.String()))

	// Signing out is recorded too.
	_, page = get(t, c, f.srv.URL+"/dashboard/api-keys")
	res, _ = post(t, c, f.srv.URL+"/dashboard/logout", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	out := teamAudit(t, f.store, teamA, audit.Filter{Action: audit.SignOut})
	require.Len(t, out, 1)
	require.Equal(t, owner, *out[0].ActorID)
	_, err = f.store.Privacy.VerifyAudit(ctx)
	require.NoError(t, err)
}
