package dashboard_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// Owners make data requests on their page, see them listed and download
// a finished export; members and other teams cannot.
func TestDataRequestsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	res, page := get(t, c, f.srv.URL+"/dashboard/data-requests")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "No data requests yet.")
	token := csrf(t, page)
	res, page = post(t, c, f.srv.URL+"/dashboard/data-requests", url.Values{"csrf": {token},
		"email": {"not an address"}, "type": {"export"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Enter one email address")
	res, _ = post(t, c, f.srv.URL+"/dashboard/data-requests", url.Values{"email": {"sam@example.org"}, "type": {"export"}})
	require.NotEqual(t, http.StatusOK, res.StatusCode, "a form without its CSRF token is refused")

	res, _ = post(t, c, f.srv.URL+"/dashboard/data-requests", url.Values{"csrf": {token},
		"email": {"Sam@Example.org"}, "type": {"export"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = get(t, c, f.srv.URL+res.Header.Get("Location"))
	require.Contains(t, page, "Export requested.")
	list, _, err := f.store.Privacy.ListDataRequests(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	r := list[0]
	require.Contains(t, page, r.ID.String())
	require.NotContains(t, page, "sam@example.org", "the list never shows addresses")
	created := teamAudit(t, f.store, teamA, audit.Filter{Action: audit.DataRequestCreate})
	require.Len(t, created, 1)
	require.Equal(t, r.ID.String(), created[0].TargetID)
	require.Equal(t, audit.ActorUser, created[0].ActorType)

	// The export is built (as its workflow would) and downloaded.
	box, err := seal.New(bytes.Repeat([]byte{7}, 32)) // the fixture's master key
	require.NoError(t, err)
	svc := datareq.New(datareq.Config{Keys: box}, f.store)
	addr, err := svc.Address(r)
	require.NoError(t, err)
	require.Equal(t, "sam@example.org", addr)
	_, err = f.store.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Email: addr,
		FirstName: "Sam", Properties: map[string]any{}}, nil, nil)
	require.NoError(t, err)
	exp, err := svc.BuildExport(ctx, r, addr, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, exp.Found[datareq.FoundContacts])
	_, err = f.store.Privacy.FinishDataRequest(ctx, r.ID, store.DataRequestOutcome{Found: exp.Found,
		ArchiveSize: &exp.Size, ExpiresAt: &exp.ExpiresAt})
	require.NoError(t, err)
	_, page = get(t, c, f.srv.URL+"/dashboard/data-requests")
	link := "/dashboard/data-requests/" + r.ID.String() + "/download"
	require.Contains(t, page, link)
	res, err = c.Get(f.srv.URL + link)
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, zf := range z.File {
		names[zf.Name] = true
	}
	require.True(t, names["manifest.json"] && names["contacts.json"], "%v", names)

	// Team B's owner sees nothing and downloads nothing.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	_, page = get(t, cb, f.srv.URL+"/dashboard/data-requests")
	require.NotContains(t, page, r.ID.String())
	res, _ = get(t, cb, f.srv.URL+link)
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// A member is refused.
	hash, err := password.Hash("member-password")
	require.NoError(t, err)
	member := store.User{ID: uuid.New(), Email: "member@example.com", PasswordHash: hash}
	require.NoError(t, f.store.Accounts.CreateUser(ctx, member))
	require.NoError(t, f.store.Accounts.AddMember(ctx, teamA, member.ID, "member"))
	mc := f.browser()
	f.login(mc, member.Email, "member-password")
	res, _ = get(t, mc, f.srv.URL+"/dashboard/data-requests")
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	res, _ = get(t, mc, f.srv.URL+link)
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}
