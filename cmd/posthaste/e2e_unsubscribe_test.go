package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/smtp"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
)

// TestDevUnsubscribe goes through one-click unsubscribe (RFC 8058) with
// the real binary's wiring: a verified domain sends a template with the
// unsubscribe link to two contacts with a topic; each copy arrives at the
// MX with its own List-Unsubscribe link in the header and the body, DKIM
// signed over both List-Unsubscribe fields; a POST of
// List-Unsubscribe=One-Click to one link unsubscribes that contact from
// the topic (the API shows opt_out, a contact.topics.updated webhook
// arrives), the link's page lists the topic, a tampered link is 404, and
// the next send with the topic skips that contact as `failed`. Each
// copy's List-Unsubscribe also names a mailto address at the domain's
// return-path host (RFC 2369): a message to the other contact's, sent to
// the dev inbound MX, opts that contact out of the topic too, with its
// webhook; a forged mailto address is refused at RCPT.
func TestDevUnsubscribe(t *testing.T) {
	ctx := context.Background()
	dev := shared(t, "domain")
	env, dns := dev.env, dev.dns
	dbURL := dev.databaseURL(t)
	dataDir := env["POSTHASTE_DATA_DIR"]
	st := devStore(t, dbURL, dataDir)
	c := apiClient{t: t, base: dev.base, key: dev.newTeam(t, "member.test").APIKey}

	// A verified domain of the test's own.
	domain := uniqueDomain("example")
	c.verifiedDomain(dns, domain)

	// A webhook endpoint for contact events.
	recv := newHookReceiver(t)
	status, hook := c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL,
		"events": []string{"contact.updated", "contact.topics.updated", "contact.created"}})
	require.Equal(t, 201, status, hook)
	recv.mu.Lock()
	recv.secret = hook["signing_secret"].(string)
	recv.mu.Unlock()

	// A topic everyone receives until they opt out, and two contacts.
	status, topic := c.do("POST", "/topics", map[string]any{"name": "Product news", "default_subscription": "opt_in",
		"visibility": "public"})
	require.Equal(t, 201, status, topic)
	topicID := topic["id"].(string)
	contacts := map[string]string{}
	for _, addr := range []string{"ann@rcpt.test", "bob@rcpt.test"} {
		status, ct := c.do("POST", "/contacts", map[string]any{"email": addr})
		require.Equal(t, 201, status, ct)
		contacts[addr] = ct["id"].(string)
	}
	require.Len(t, recv.waitFor(2), 2, "contact.created twice")

	// A template with the unsubscribe link; without topic_id it cannot
	// be sent (the variable has no value).
	status, tpl := c.do("POST", "/templates", map[string]any{"name": "News", "alias": "news",
		"from": "Shop <hello@" + domain + ">", "subject": "News",
		"html": `<p>News</p><p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>`,
		"text": "News\nUnsubscribe: {{{UNSUBSCRIBE_URL}}}"})
	require.Equal(t, 201, status, tpl)
	status, body := c.do("POST", "/templates/news/publish", nil)
	require.Equal(t, 200, status, body)
	status, body = c.do("POST", "/emails", map[string]any{"to": "ann@rcpt.test", "template": map[string]any{"id": "news"}})
	require.Equal(t, 422, status, body)
	require.Contains(t, body["message"], "RESEND_UNSUBSCRIBE_URL")

	id := c.send(map[string]any{"to": []string{"ann@rcpt.test", "bob@rcpt.test"}, "topic_id": topicID,
		"template": map[string]any{"id": "news"}})
	c.waitFor(id, map[string]string{"ann@rcpt.test": "delivered", "bob@rcpt.test": "delivered"})
	msgs := dev.messagesAbout(domain)
	require.Len(t, msgs, 2, "one message per recipient")
	links := map[string]string{}
	mailtos := map[string]string{}
	for _, m := range msgs {
		require.Len(t, m.To, 1)
		requireAuthenticated(t, dns, m, domain)
		mr, err := mail.CreateReader(bytes.NewReader(m.Data))
		require.NoError(t, err)
		require.Equal(t, "List-Unsubscribe=One-Click", mr.Header.Get("List-Unsubscribe-Post"))
		lu := mr.Header.Get("List-Unsubscribe")
		httpEntry, mailtoEntry, found := strings.Cut(lu, ", ")
		require.True(t, found, "the URL and a mailto: %s", lu)
		require.True(t, strings.HasPrefix(httpEntry, "<"+dev.base+"/unsubscribe/"), lu)
		link := strings.Trim(httpEntry, "<>")
		require.True(t, strings.HasPrefix(mailtoEntry, "<mailto:unsubscribe+") &&
			strings.HasSuffix(mailtoEntry, "@send."+domain+">"), lu)
		mailtos[m.To[0]] = strings.TrimSuffix(strings.TrimPrefix(mailtoEntry, "<mailto:"), ">")
		sig := mr.Header.Get("DKIM-Signature")
		compact := strings.Join(strings.Fields(strings.ToLower(sig)), "")
		require.Contains(t, compact, "list-unsubscribe:list-unsubscribe-post", "RFC 8058 §3.1: both fields signed")
		var text, html string
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			b, err := io.ReadAll(p.Body)
			require.NoError(t, err)
			if ct, _, _ := p.Header.(*mail.InlineHeader).ContentType(); ct == "text/html" {
				html = string(b)
			} else {
				text = string(b)
			}
		}
		require.Contains(t, html, `<a href="`+link+`">Unsubscribe</a>`)
		require.Contains(t, text, "Unsubscribe: "+link)
		links[m.To[0]] = link
	}
	require.NotEqual(t, links["ann@rcpt.test"], links["bob@rcpt.test"])
	stored, err := st.Emails.Message(ctx, uuid.MustParse(id))
	require.NoError(t, err)
	require.NotContains(t, string(stored), "/unsubscribe/", "the stored copy shows nobody's link")

	// One click, as a mailbox provider makes it: no cookies, no key.
	annLink := links["ann@rcpt.test"]
	res, err := http.Post(annLink, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	status, tl := c.do("GET", "/contacts/"+contacts["ann@rcpt.test"]+"/topics", nil)
	require.Equal(t, 200, status, tl)
	subs := map[string]string{}
	for _, x := range tl["data"].([]any) {
		xm := x.(map[string]any)
		subs[xm["id"].(string)] = xm["subscription"].(string)
	}
	require.Equal(t, map[string]string{topicID: "opt_out"}, subs)
	got := recv.waitFor(3)
	require.Equal(t, "contact.topics.updated", got[2].Type)

	// The page of the link lists the topic; a tampered link is 404.
	res, err = http.Get(annLink)
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, string(page), "Product news")
	require.Contains(t, string(page), "ann@rcpt.test")
	u, err := url.Parse(annLink)
	require.NoError(t, err)
	tok := strings.TrimPrefix(u.Path, "/unsubscribe/")
	flipped := "A"
	if tok[20] == 'A' {
		flipped = "B"
	}
	for _, bad := range []string{tok[:20] + flipped + tok[21:], tok[:len(tok)-3]} {
		res, err = http.Post(dev.base+"/unsubscribe/"+bad, "application/x-www-form-urlencoded",
			strings.NewReader("List-Unsubscribe=One-Click"))
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, 404, res.StatusCode)
	}
	require.NotContains(t, dev.out.String(), tok, "tokens are never logged")
	// Nor are they in the request log: once a later API request's entry
	// is written, none of the unsubscribe requests has one.
	status, _ = c.do("GET", "/topics/"+topicID, nil)
	require.Equal(t, 200, status)
	db, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer db.Close(ctx)
	count := func(q string) int {
		var n int
		require.NoError(t, db.QueryRow(ctx, q).Scan(&n))
		return n
	}
	eventually(t, 90*time.Second, func() error {
		if count(`SELECT count(*) FROM request_log WHERE path = '/topics/`+topicID+`'`) == 0 {
			return errors.New("the request log was not written")
		}
		return nil
	})
	require.Zero(t, count(`SELECT count(*) FROM request_log WHERE path LIKE '/unsubscribe/%'`))

	// The next send with the topic skips Ann.
	id2 := c.send(map[string]any{"from": "Shop <hello@" + domain + ">", "to": []string{"ann@rcpt.test", "bob@rcpt.test"},
		"subject": "More news", "html": `<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`, "topic_id": topicID})
	c.waitFor(id2, map[string]string{"ann@rcpt.test": "failed", "bob@rcpt.test": "delivered"})
	evs, err := st.Emails.Events(ctx, uuid.MustParse(id2))
	require.NoError(t, err)
	var reason any
	for _, ev := range evs {
		if ev.Type == store.EventFailed && ev.Recipient == "ann@rcpt.test" {
			reason = ev.Detail["reason"]
		}
	}
	require.Equal(t, delivery.TopicOptOutReason(uuid.MustParse(topicID)), reason)
	require.Len(t, dev.messagesAbout(domain), 3)
	last := dev.messagesAbout(domain)[2]
	require.Equal(t, []string{"bob@rcpt.test"}, last.To)
	requireAuthenticated(t, dns, last, domain)

	// Bob unsubscribes by mail (RFC 2369 mailto): any message from any
	// sender to his address at the inbound MX.
	inboundAddr := env["POSTHASTE_INBOUND_LISTEN"]
	bobMailto := mailtos["bob@rcpt.test"]
	require.NotEqual(t, mailtos["ann@rcpt.test"], bobMailto)
	mailUnsubscribe := func(rcpt string) error {
		sc, err := smtp.Dial(inboundAddr)
		require.NoError(t, err)
		defer sc.Close()
		require.NoError(t, sc.Hello("mail.rcpt.test"))
		require.NoError(t, sc.Mail("bob@rcpt.test"))
		if err := sc.Rcpt(rcpt); err != nil {
			return err
		}
		w, err := sc.Data()
		require.NoError(t, err)
		_, err = io.WriteString(w, "From: bob@rcpt.test\r\nTo: "+rcpt+"\r\nSubject: unsubscribe\r\n\r\nPlease stop.\r\n")
		require.NoError(t, err)
		if err := w.Close(); err != nil {
			return err
		}
		return sc.Quit()
	}
	code := strings.TrimSuffix(strings.TrimPrefix(bobMailto, "unsubscribe+"), "@send."+domain)
	forgedChar := "a"
	if code[30] == 'a' {
		forgedChar = "c"
	}
	forged := "unsubscribe+" + code[:30] + forgedChar + code[31:] + "@send." + domain
	requireCode(t, mailUnsubscribe(forged), 550)
	requireCode(t, mailUnsubscribe(strings.Replace(bobMailto, "@send."+domain, "@"+domain, 1)), 550)
	require.NoError(t, mailUnsubscribe(bobMailto))
	bobTopic := func() string {
		status, tl := c.do("GET", "/contacts/"+contacts["bob@rcpt.test"]+"/topics", nil)
		require.Equal(t, 200, status, tl)
		for _, x := range tl["data"].([]any) {
			if xm := x.(map[string]any); xm["id"] == topicID {
				return xm["subscription"].(string)
			}
		}
		return ""
	}
	eventually(t, 60*time.Second, func() error {
		if bobTopic() != "opt_out" {
			return errors.New("bob's mailto unsubscribe was not applied")
		}
		return nil
	})
	got = recv.waitFor(4)
	require.Equal(t, "contact.topics.updated", got[3].Type, "the webhook the one-click fires")
	status, annTopics := c.do("GET", "/contacts/"+contacts["ann@rcpt.test"]+"/topics", nil)
	require.Equal(t, 200, status)
	require.Len(t, annTopics["data"], 1)

}
