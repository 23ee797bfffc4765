package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/tracking"
)

// TestDevTracking sends from a verified domain with open and click
// tracking on, its Tracking CNAME published, through `posthaste dev` to a
// loopback MX: the message received carries rewritten links and the open
// pixel under the domain's tracking host and a valid DKIM signature, the
// stored copy is not rewritten, and fetching the pixel and a link with
// the tracking Host header records opened and clicked, redirects to the
// original URL, and sends email.clicked with the link; a tampered token
// is 404, and so is the token on another team's tracking host (issue 33:
// no open redirect under another tenant's domain), while it is served on
// the operator's shared tracking host; a token of the first format (no
// host) is served only on a tracking host of its team.
func TestDevTracking(t *testing.T) {
	ctx := context.Background()
	dns := dnstest.NewServer(t)
	mx := recipientMX(t, dns)
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, mx.Port())
	env["POSTHASTE_TRACKING_HOST"] = "track.posthaste.example"
	dev := startDev(t, env)
	defer dev.stop(t)
	st := devStore(t, dbURL, env["POSTHASTE_DATA_DIR"])
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}

	recv := newHookReceiver(t)
	status, out := c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL,
		"events": []string{"email.opened", "email.clicked"}})
	require.Equal(t, 201, status, out)
	hookID := uuid.MustParse(out["id"].(string))
	recv.mu.Lock()
	recv.secret = out["signing_secret"].(string)
	recv.mu.Unlock()

	status, d := c.do("POST", "/domains", map[string]any{"name": "track.test", "open_tracking": true,
		"click_tracking": true})
	require.Equal(t, 201, status, d)
	domainID := d["id"].(string)
	require.Equal(t, "links", d["tracking_subdomain"])
	var sawTracking bool
	for _, r := range d["records"].([]any) {
		rm := r.(map[string]any)
		host := rm["name"].(string) + ".track.test"
		switch rm["type"] {
		case "TXT":
			dns.AddTXT(host, rm["value"].(string))
		case "MX":
			dns.AddMX(host, rm["value"].(string), 10)
		case "CNAME":
			require.Equal(t, "Tracking", rm["record"])
			require.Equal(t, "track.posthaste.example", rm["value"])
			dns.AddCNAME(host, rm["value"].(string))
			sawTracking = true
		}
	}
	require.True(t, sawTracking, "tracking on: the domain has a Tracking record")
	status, _ = c.do("POST", "/domains/"+domainID+"/verify", nil)
	require.Equal(t, 200, status)
	got := c.waitDomain(domainID, "verified")
	for _, r := range got["records"].([]any) {
		require.Equal(t, "verified", r.(map[string]any)["status"], r)
	}

	const html = `<html><body><p>Our <a href="https://shop.example/sale?x=1&amp;y=2">sale</a> and ` +
		`<a href="mailto:help@track.test">help</a>.</p></body></html>`
	id := c.send(map[string]any{"from": "Shop <hello@track.test>", "to": "ann@rcpt.test", "subject": "Sale",
		"html": html, "text": "Our sale: https://shop.example/sale"})
	c.waitFor(id, map[string]string{"ann@rcpt.test": "delivered"})

	msgs := mx.Messages()
	require.Len(t, msgs, 1)
	requireAuthenticated(t, dns, msgs[0], "track.test")
	body := htmlPart(t, msgs[0].Data)
	require.NotContains(t, body, "https://shop.example/sale", "the link is rewritten")
	require.Contains(t, body, `href="mailto:help@track.test"`, "mailto links are left alone")
	click := regexp.MustCompile(`href="https://links\.track\.test(/c/[A-Za-z0-9_-]+)"`).FindStringSubmatch(body)
	require.NotNil(t, click, body)
	open := regexp.MustCompile(`<img src="https://links\.track\.test(/o/[A-Za-z0-9_-]+)"`).FindStringSubmatch(body)
	require.NotNil(t, open, body)

	status, e := c.do("GET", "/emails/"+id, nil)
	require.Equal(t, 200, status, e)
	require.Equal(t, html, e["html"], "the stored copy is not rewritten")

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	getOn := func(host, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", dev.base+path, nil)
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0")
		res, err := noRedirect.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		return res
	}
	get := func(path string) *http.Response { t.Helper(); return getOn("links.track.test", path) }

	// Another team, with tracking on its own domain: its tracking host
	// (which CNAMEs to the same shared host) does not serve this team's
	// tokens, before anything was recorded.
	rival := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: rival, Name: "rival"}))
	require.NoError(t, st.Domains.CreateDomain(ctx, store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: rival, Name: "rival.test",
		Region: "us-east-1", Status: store.DomainVerified, ReturnPath: "send", TLS: store.TLSOpportunistic,
		DKIMSelector: "posthaste", DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("unused"),
		RecordStatus: map[string]string{}, OpenTracking: true, ClickTracking: true}))
	for _, p := range []string{click[1], open[1]} {
		res := getOn("links.rival.test", p)
		require.Equal(t, 404, res.StatusCode, p)
		require.Empty(t, res.Header.Get("Location"))
	}
	// A token of the first format, as delivered before tokens named their
	// host: not on the other team's tracking host either.
	keys, err := seal.LoadOrCreateKeyFile(filepath.Join(env["POSTHASTE_DATA_DIR"], "master.key"))
	require.NoError(t, err)
	box, err := seal.NewRing(keys[0], keys[1:]...)
	require.NoError(t, err)
	sealer, err := tracking.NewSealer(box.DeriveKey(tracking.KeyPurpose))
	require.NoError(t, err)
	row, err := storetest.EmailForBuild(ctx, st, uuid.MustParse(id))
	require.NoError(t, err)
	legacy, err := sealer.Seal(tracking.Token{Kind: tracking.Click, TeamID: row.TeamID, EmailID: row.ID,
		Link: 0, URL: "https://shop.example/sale?x=1&y=2"})
	require.NoError(t, err)
	require.Equal(t, 404, getOn("links.rival.test", tracking.ClickPath+legacy).StatusCode)

	res := get(open[1])
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "image/gif", res.Header.Get("Content-Type"))
	require.Contains(t, res.Header.Get("Cache-Control"), "no-store")
	res = get(click[1])
	require.Equal(t, 302, res.StatusCode)
	require.Equal(t, "https://shop.example/sale?x=1&y=2", res.Header.Get("Location"))
	tampered := []byte(click[1])
	if i := len(tampered) - 4; tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	require.Equal(t, 404, get(string(tampered)).StatusCode)
	// The API host does not serve the tracking paths.
	res, _ = c.raw("GET", click[1], nil)
	require.Equal(t, 404, res.StatusCode)
	require.Empty(t, res.Header.Get("Location"))

	var opened, clicked []store.Event
	eventually(t, 30*time.Second, func() error {
		evs, err := st.Emails.Events(ctx, uuid.MustParse(id))
		require.NoError(t, err)
		opened, clicked = nil, nil
		for _, ev := range evs {
			switch ev.Type {
			case "opened":
				opened = append(opened, ev)
			case "clicked":
				clicked = append(clicked, ev)
			}
		}
		if len(opened) == 0 || len(clicked) == 0 {
			return fmt.Errorf("events %v: no open or no click", evs)
		}
		return nil
	})
	require.Len(t, opened, 1)
	require.Len(t, clicked, 1)
	require.Equal(t, "ann@rcpt.test", clicked[0].Recipient)
	require.Equal(t, "https://shop.example/sale?x=1&y=2", clicked[0].Detail["link"])
	require.Contains(t, clicked[0].Detail, "machine")
	require.Equal(t, "ann@rcpt.test", opened[0].Recipient)
	row, err = storetest.EmailForBuild(ctx, st, uuid.MustParse(id))
	require.NoError(t, err)
	require.Equal(t, "clicked", row.Recipients[0].Status, "the open then the click moved the recipient on")
	status, e = c.do("GET", "/emails/"+id, nil)
	require.Equal(t, 200, status, e)
	require.Equal(t, "clicked", e["last_event"])

	hooks := recv.waitFor(2)
	var types []string
	for _, h := range hooks {
		types = append(types, h.Type)
		require.Equal(t, id, h.EmailID)
	}
	require.ElementsMatch(t, []string{"email.opened", "email.clicked"}, types)
	wm, _, err := st.Webhooks.ListWebhookMessages(ctx, row.TeamID, hookID, store.Page{Limit: 10})
	require.NoError(t, err)
	var link string
	for _, m := range wm {
		var p struct {
			Type string
			Data struct {
				Click struct{ Link string } `json:"click"`
			}
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		if p.Type == "email.clicked" {
			link = p.Data.Click.Link
		}
	}
	require.Equal(t, "https://shop.example/sale?x=1&y=2", link)

	// The operator's shared tracking host serves the token; the first
	// format is served on the team's own tracking host.
	res = getOn("track.posthaste.example", click[1])
	require.Equal(t, 302, res.StatusCode)
	require.Equal(t, "https://shop.example/sale?x=1&y=2", res.Header.Get("Location"))
	res = get(tracking.ClickPath + legacy)
	require.Equal(t, 302, res.StatusCode)
	require.Equal(t, "https://shop.example/sale?x=1&y=2", res.Header.Get("Location"))
}

// TestDevTrackingOnLocalhost runs `posthaste dev` with its defaults (no
// tracking host, no public URL): a domain with open and click tracking on
// gets no Tracking record and no warning, and its mail carries the pixel
// and links under dev's own address, http://localhost:<port>, which a
// browser on the same machine opens: the open and the click are recorded
// and the click redirects to the original URL.
func TestDevTrackingOnLocalhost(t *testing.T) {
	ctx := context.Background()
	dns := dnstest.NewServer(t)
	mx := recipientMX(t, dns)
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, mx.Port())
	dev := startDev(t, env)
	defer dev.stop(t)
	st := devStore(t, dbURL, env["POSTHASTE_DATA_DIR"])
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}
	_, port, err := net.SplitHostPort(env["POSTHASTE_HTTP_ADDR"])
	require.NoError(t, err)
	local := "http://localhost:" + port

	status, d := c.do("POST", "/domains", map[string]any{"name": "track.test", "open_tracking": true,
		"click_tracking": true})
	require.Equal(t, 201, status, d)
	require.NotContains(t, d, "tracking_warning", "dev tracks under its own address")
	domainID := d["id"].(string)
	for _, r := range d["records"].([]any) {
		rm := r.(map[string]any)
		require.NotEqual(t, "Tracking", rm["record"], "no DNS record is needed in dev")
		host := rm["name"].(string) + ".track.test"
		switch rm["type"] {
		case "TXT":
			dns.AddTXT(host, rm["value"].(string))
		case "MX":
			dns.AddMX(host, rm["value"].(string), 10)
		}
	}
	status, _ = c.do("POST", "/domains/"+domainID+"/verify", nil)
	require.Equal(t, 200, status)
	c.waitDomain(domainID, "verified")

	const html = `<p>Our <a href="https://shop.example/sale?x=1">sale</a>.</p>`
	id := c.send(map[string]any{"from": "Shop <hello@track.test>", "to": "ann@rcpt.test", "subject": "Sale",
		"html": html})
	c.waitFor(id, map[string]string{"ann@rcpt.test": "delivered"})
	msgs := mx.Messages()
	require.Len(t, msgs, 1)
	body := htmlPart(t, msgs[0].Data)
	click := regexp.MustCompile(`href="(` + regexp.QuoteMeta(local) + `/c/[A-Za-z0-9_-]+)"`).FindStringSubmatch(body)
	require.NotNil(t, click, body)
	open := regexp.MustCompile(`<img src="(` + regexp.QuoteMeta(local) + `/o/[A-Za-z0-9_-]+)"`).FindStringSubmatch(body)
	require.NotNil(t, open, body)

	// As a browser on this machine opens them.
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(u string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", u, nil)
		require.NoError(t, err)
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0")
		res, err := browser.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		return res
	}
	res := fetch(open[1])
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "image/gif", res.Header.Get("Content-Type"))
	res = fetch(click[1])
	require.Equal(t, 302, res.StatusCode)
	require.Equal(t, "https://shop.example/sale?x=1", res.Header.Get("Location"))

	eventually(t, 30*time.Second, func() error {
		evs, err := st.Emails.Events(ctx, uuid.MustParse(id))
		require.NoError(t, err)
		seen := map[string]bool{}
		for _, ev := range evs {
			seen[ev.Type] = true
		}
		if !seen["opened"] || !seen["clicked"] {
			return fmt.Errorf("events %v: no open or no click", evs)
		}
		return nil
	})
	status, e := c.do("GET", "/emails/"+id, nil)
	require.Equal(t, 200, status, e)
	require.Equal(t, "clicked", e["last_event"])
}

// htmlPart returns the decoded text/html part of a message.
func htmlPart(t *testing.T, data []byte) string {
	t.Helper()
	mr, err := mail.CreateReader(bytes.NewReader(data))
	require.NoError(t, err)
	for {
		p, err := mr.NextPart()
		require.NoError(t, err, "no text/html part")
		if h, ok := p.Header.(*mail.InlineHeader); ok {
			if ct, _, _ := h.ContentType(); strings.EqualFold(ct, "text/html") {
				b, err := io.ReadAll(p.Body)
				require.NoError(t, err)
				return string(b)
			}
		}
	}
}
