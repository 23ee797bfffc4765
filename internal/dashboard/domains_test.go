package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/store"
)

// addDomain submits the Add a domain form and returns the new domain's id.
func (f *fixture) addDomain(c *http.Client, name string) uuid.UUID {
	f.t.Helper()
	_, page := get(f.t, c, f.srv.URL+"/dashboard/domains")
	res, _ := post(f.t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {csrf(f.t, page)}, "name": {name},
		"region": {domains.Regions[0]}, "custom_return_path": {"send"}})
	require.Equal(f.t, http.StatusSeeOther, res.StatusCode)
	loc := res.Header.Get("Location")
	require.True(f.t, strings.HasPrefix(loc, "/dashboard/domains/"), loc)
	id, err := uuid.Parse(strings.TrimSuffix(strings.TrimPrefix(loc, "/dashboard/domains/"), "?done=added"))
	require.NoError(f.t, err)
	return id
}

func TestAddDomainFromTheDashboard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	// A subscriber to domain events: adding from the dashboard emits them
	// like the API does.
	hook := uuid.Must(uuid.NewV7())
	require.NoError(t, f.store.Webhooks.CreateWebhook(ctx, store.Webhook{ID: hook, TeamID: teamA,
		Endpoint: "https://hooks.shop.test/", Events: []string{"domain.created", "domain.updated", "domain.deleted"},
		Status: store.WebhookEnabled, Secret: []byte("sealed")}))
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	_, page := get(t, c, f.srv.URL+"/dashboard/domains")
	require.Contains(t, page, "No domains yet.", "the empty list says what to do")
	for _, r := range domains.Regions {
		require.Contains(t, page, `<option value="`+r+`"`, "every region is offered")
	}
	for _, id := range []string{"domain-name", "domain-region", "domain-return-path"} {
		require.Contains(t, page, `<label for="`+id+`"`, "every field has a label")
	}
	token := csrf(t, page)

	res, _ := post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"name": {"shop.example.com"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the CSRF token is required")

	// A bad name: the error is on the page and the input is kept.
	res, page = post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {token}, "name": {"not a domain"},
		"region": {"eu-west-1"}, "custom_return_path": {"bounce"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `The <code>name</code> field must be a domain name such as example.com`)
	require.Contains(t, page, `value="not a domain"`)
	require.Contains(t, page, `<option value="eu-west-1" selected>`)
	require.Contains(t, page, `value="bounce"`)
	require.Contains(t, page, `aria-invalid="true"`)

	res, page = post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {token}, "name": {"shop.example.com"},
		"region": {"mars-1"}, "custom_return_path": {"send"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>region</code> field must be one of us-east-1")
	res, page = post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {token}, "name": {"shop.example.com"},
		"region": {"us-east-1"}, "custom_return_path": {"no_underscores"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>custom_return_path</code> field must be one DNS label")
	require.Contains(t, page, `value="shop.example.com"`)

	res, _ = post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {token}, "name": {"Shop.Example.com"},
		"region": {"eu-west-1"}, "custom_return_path": {"Bounce"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	list, _, err := f.store.Domains.ListDomains(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	d := list[0]
	require.Equal(t, "/dashboard/domains/"+d.ID.String()+"?done=added", res.Header.Get("Location"))
	require.Equal(t, "shop.example.com", d.Name)
	require.Equal(t, "eu-west-1", d.Region)
	require.Equal(t, "bounce", d.ReturnPath)
	require.Equal(t, "posthaste", d.DKIMSelector)
	require.NotEmpty(t, d.DKIMPublicKey)
	require.NotEmpty(t, d.DKIMPrivateKey, "a sealed DKIM key")
	msgs, _, err := f.store.Webhooks.ListWebhookMessages(ctx, teamA, hook, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "domain.created", msgs[0].Type, "adding emits the event the API emits")

	res, page = get(t, c, f.srv.URL+res.Header.Get("Location"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Domain added. Publish the records below")
	require.Contains(t, page, "<title>shop.example.com · Posthaste</title>")
	require.Contains(t, page, `<code class="value">posthaste._domainkey</code>`)
	// html/template writes + as &#43; in attributes.
	require.Contains(t, page, `data-copy="v=DKIM1; k=rsa; p=`+strings.ReplaceAll(d.DKIMPublicKey, "+", "&#43;")+`"`)
	require.Contains(t, page, `<code class="value">bounce</code>`, "the return path's records")
	require.Contains(t, page, `<td data-label="Priority">10</td>`, "the MX priority")
	require.Contains(t, page, `<span class="badge neutral">not_started</span>`, "each record's status, as text")
	require.NotContains(t, page, "{dkim", "no Go struct dumps")

	// The same name again: an error, the input kept.
	res, page = post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {token}, "name": {"shop.example.com"},
		"region": {"us-east-1"}, "custom_return_path": {"send"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The domain shop.example.com has already been added.")
	require.Contains(t, page, `value="shop.example.com"`)

	_, page = get(t, c, f.srv.URL+"/dashboard/domains")
	require.Contains(t, page, `<a href="/dashboard/domains/`+d.ID.String()+`">shop.example.com</a>`)
	require.NotContains(t, page, "No domains yet.")
}

func TestDomainSettingsVerifyAndDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	id := f.addDomain(c, "news.example.org")
	page := func() string {
		_, p := get(t, c, f.srv.URL+"/dashboard/domains/"+id.String())
		return p
	}
	p := page()
	require.Contains(t, p, `<option value="opportunistic" selected>`)
	require.Contains(t, p, `action="/dashboard/domains/`+id.String()+`/verify"`)

	res, _ := post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/settings", url.Values{"csrf": {csrf(t, p)},
		"open_tracking": {"on"}, "tls": {"enforced"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	d, err := f.store.Domains.GetDomain(ctx, teamA, id)
	require.NoError(t, err)
	require.True(t, d.OpenTracking)
	require.False(t, d.ClickTracking, "an unchecked box is off")
	require.Equal(t, store.TLSEnforced, d.TLS)
	require.Equal(t, store.ReceivingDisabled, d.Receiving, "an unchecked box is off")
	p = page()
	require.Contains(t, p, `<option value="enforced" selected>`)
	require.Regexp(t, `name="open_tracking" checked`, p)
	require.NotRegexp(t, `name="receiving" checked`, p)

	// Receiving on: the domain shows its Receiving MX record.
	res, _ = post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/settings", url.Values{"csrf": {csrf(t, p)},
		"open_tracking": {"on"}, "tls": {"enforced"}, "receiving": {"on"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	d, err = f.store.Domains.GetDomain(ctx, teamA, id)
	require.NoError(t, err)
	require.Equal(t, store.ReceivingEnabled, d.Receiving)
	p = page()
	require.Regexp(t, `name="receiving" checked`, p)
	require.Contains(t, p, `aria-label="Copy the value of the Receiving MX record"`, "the Receiving MX record is listed")

	res, p = post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/settings", url.Values{"csrf": {csrf(t, p)},
		"tls": {"sometimes"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, p, "The <code>tls</code> field must be opportunistic or enforced.")
	d, err = f.store.Domains.GetDomain(ctx, teamA, id)
	require.NoError(t, err)
	require.True(t, d.OpenTracking, "nothing changed")

	res, _ = post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/verify", url.Values{"csrf": {csrf(t, p)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/domains/"+id.String()+"?done=verify", res.Header.Get("Location"))
	require.Equal(t, []string{id.String()}, f.verifier.ids)

	res, p = get(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/delete")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, p, "Type <strong>news.example.org</strong> to confirm")
	res, p = post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/delete", url.Values{"csrf": {csrf(t, p)},
		"confirm": {"news.example"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, p, "Type the domain name, news.example.org, to confirm.")
	require.Contains(t, p, `value="news.example"`, "what was typed is kept")
	_, err = f.store.Domains.GetDomain(ctx, teamA, id)
	require.NoError(t, err, "not deleted without the confirmation")

	res, _ = post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/delete", url.Values{"csrf": {csrf(t, p)},
		"confirm": {"News.Example.org"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/domains", res.Header.Get("Location"))
	_, err = f.store.Domains.GetDomain(ctx, teamA, id)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, []string{id.String()}, f.verifier.forgotten, "its verification stops")
	res, _ = get(t, c, f.srv.URL+"/dashboard/domains/"+id.String())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// TestDomainPagesAreTeamScoped: another team can neither see nor change a
// domain through any of the dashboard's domain routes.
func TestDomainPagesAreTeamScoped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	ca := f.browser()
	f.login(ca, f.a.Email, f.a.Password)
	id := f.addDomain(ca, "private.example.net")

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	f.requireOutOfReach(cb, "/dashboard/domains", "/dashboard/domains/"+id.String(), []string{"", "/delete"},
		[]string{"/settings", "/verify", "/delete"},
		url.Values{"tls": {"enforced"}, "open_tracking": {"on"}, "confirm": {"private.example.net"}}, "private.example.net")
	d, err := f.store.Domains.GetDomain(ctx, teamA, id)
	require.NoError(t, err, "still there")
	require.Equal(t, store.TLSOpportunistic, d.TLS)
	require.False(t, d.OpenTracking)
	require.Equal(t, store.DomainNotStarted, d.Status)
	require.Empty(t, f.verifier.ids)
	require.Empty(t, f.verifier.forgotten)
	// And team B adding the same name is its own business.
	f.addDomain(cb, "private.example.net")
}

// requireOutOfReach checks that c, signed in to another team, gets 404
// from each GET and POST (a valid form with its CSRF token) under base,
// and finds none of private on the list page or in any answer.
func (f *fixture) requireOutOfReach(c *http.Client, list, base string, gets, posts []string, form url.Values, private ...string) {
	t := f.t
	t.Helper()
	_, page := get(t, c, f.srv.URL+list)
	bodies := []string{page}
	form.Set("csrf", csrf(t, page))
	for _, path := range gets {
		res, body := get(t, c, f.srv.URL+base+path)
		require.Equal(t, http.StatusNotFound, res.StatusCode, "GET "+path)
		bodies = append(bodies, body)
	}
	for _, path := range posts {
		res, body := post(t, c, f.srv.URL+base+path, form)
		require.Equal(t, http.StatusNotFound, res.StatusCode, "POST "+path)
		bodies = append(bodies, body)
	}
	for _, b := range bodies {
		for _, p := range private {
			require.NotContains(t, b, p)
		}
	}
}

// TestAddWithoutMasterKey: a server without a master key says so where the
// forms are, instead of failing with an error page.
func TestAddWithoutMasterKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(cfg *dashboard.Config) { cfg.Keys = nil })
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/domains")
	res, page := post(t, c, f.srv.URL+"/dashboard/domains", url.Values{"csrf": {csrf(t, page)},
		"name": {"example.com"}, "region": {"us-east-1"}, "custom_return_path": {"send"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "This server has no master key (POSTHASTE_MASTER_KEY)")
	require.Contains(t, page, `value="example.com"`)
	res, page = post(t, c, f.srv.URL+"/dashboard/webhooks", url.Values{"csrf": {csrf(t, page)},
		"endpoint": {"https://hooks.example.com/"}, "events": {"email.sent"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "This server has no master key (POSTHASTE_MASTER_KEY)")
}

// The domain page warns, once tracking is on, that a server without a
// tracking host sends the domain's mail untracked; with a tracking host it
// shows the Tracking record instead.
func TestDomainPageWarnsOfNoTrackingHost(t *testing.T) {
	t.Parallel()
	const warning = `id="tracking-warning"`
	for _, host := range []string{"", "track.posthaste.example"} {
		f := newFixture(t, func(c *dashboard.Config) { c.Records.TrackingHost = host })
		c := f.browser()
		f.login(c, f.a.Email, f.a.Password)
		id := f.addDomain(c, "news.example.org")
		_, p := get(t, c, f.srv.URL+"/dashboard/domains/"+id.String())
		require.NotContains(t, p, warning, "tracking off")
		res, _ := post(t, c, f.srv.URL+"/dashboard/domains/"+id.String()+"/settings", url.Values{"csrf": {csrf(t, p)},
			"click_tracking": {"on"}, "tls": {"opportunistic"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		_, p = get(t, c, f.srv.URL+"/dashboard/domains/"+id.String())
		if host == "" {
			require.Contains(t, p, warning)
			require.Contains(t, p, "POSTHASTE_TRACKING_HOST")
			require.NotContains(t, p, "Tracking</span>")
		} else {
			require.NotContains(t, p, warning)
			require.Contains(t, p, "<code class=\"value\">"+host+"</code>", "the Tracking record")
		}
	}
}
