package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

var tokenRE = regexp.MustCompile(`ph_[A-Za-z0-9_-]{40}`)

// apiStatus calls the API mounted beside the dashboard with a key and
// returns the status and error name.
func (f *fixture) apiStatus(method, path, key string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := f.srv.Client().Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	var body struct{ Name string }
	_ = json.Unmarshal(raw, &body)
	return res.StatusCode, body.Name
}

// TestMembersKeysAndDomainsStayWithinTheirRole: a member cannot create a
// full_access key or delete a domain; the sending key they create dies
// with their membership, at once in this process, with an audit entry.
func TestMembersKeysAndDomainsStayWithinTheirRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	member := f.addMember(f.a.TeamID, "member@example.com", "member-password", "member")
	mc := f.browser()
	f.login(mc, "member@example.com", "member-password")
	oc := f.browser()
	f.login(oc, f.a.Email, f.a.Password)

	// Keys: the page offers members sending access only, and refuses a
	// full_access key made by hand.
	_, page := get(t, mc, f.srv.URL+"/dashboard/api-keys")
	require.NotContains(t, page, `value="full_access"`)
	_, ownerPage := get(t, oc, f.srv.URL+"/dashboard/api-keys")
	require.Contains(t, ownerPage, `value="full_access"`)
	for _, perm := range []string{"full_access", ""} { // the form's default is full access
		res, body := post(t, mc, f.srv.URL+"/dashboard/api-keys", url.Values{"csrf": {csrf(t, page)}, "name": {"mine"},
			"permission": {perm}})
		require.Equal(t, http.StatusForbidden, res.StatusCode, "permission %q", perm)
		require.Contains(t, body, "Only team owners can create full access keys")
	}
	keys, _, err := f.store.Accounts.ListAPIKeys(ctx, teamA, store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, keys, 1, "only the owner's Default key")

	res, body := post(t, mc, f.srv.URL+"/dashboard/api-keys", url.Values{"csrf": {csrf(t, page)}, "name": {"mine"},
		"permission": {"sending_access"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	token := tokenRE.FindString(body)
	require.NotEmpty(t, token)
	status, name := f.apiStatus("GET", "/emails", token)
	require.Equal(t, http.StatusUnauthorized, status, "a live sending key, now cached")
	require.Equal(t, "restricted_api_key", name)

	// Domains: only owners delete them.
	domain := f.addDomain(oc, "owned.example")
	_, page = get(t, mc, f.srv.URL+"/dashboard/domains/"+domain.String()+"/delete")
	res, body = post(t, mc, f.srv.URL+"/dashboard/domains/"+domain.String()+"/delete",
		url.Values{"csrf": {csrf(t, page)}, "confirm": {"owned.example"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Contains(t, body, "Only team owners can delete domains.")
	_, err = f.store.Domains.GetDomain(ctx, teamA, domain)
	require.NoError(t, err, "the domain is still there")

	// Removing the member revokes their key, in this process at once.
	_, page = get(t, oc, f.srv.URL+"/dashboard/team")
	res, _ = post(t, oc, f.srv.URL+"/dashboard/team/members/"+member.String()+"/remove", url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	status, name = f.apiStatus("GET", "/emails", token)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "invalid_api_key", name)
	keys, _, err = f.store.Accounts.ListAPIKeys(ctx, teamA, store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, keys, 1, "the owner's key stays")
	revoked := teamAudit(t, f.store, teamA, audit.Filter{Action: audit.APIKeyRevoke})
	require.Len(t, revoked, 1)
	created := teamAudit(t, f.store, teamA, audit.Filter{Action: audit.APIKeyCreate})
	require.Len(t, created, 1)
	require.Equal(t, created[0].TargetID, revoked[0].TargetID)
	require.JSONEq(t, `{"reason":"member_removed","member":"`+member.String()+`"}`, revoked[0].Detail)
}
