package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/workflows"
)

// TestDomains takes a domain from creation to signed delivery through
// `posthaste dev`: the records the API returns are published in a loopback
// DNS server, VerifyDomain finds them, and mail from the domain reaches
// loopback MX hosts DKIM-signed (checked with go-msgauth and with Debian's
// dkimpy), with a return path whose SPF passes (pyspf) and aligns with the
// From domain for DMARC. The MX hosts greylist, reject and drop the
// connection mid-DATA; enforced TLS delivers only over a verified
// certificate.
func TestDomains(t *testing.T) {
	ctx := context.Background()
	dns := dnstest.NewServer(t)
	var mu sync.Mutex
	rcpts := map[string]int{}
	mx := smtptest.NewServer(t, smtptest.Options{
		STARTTLS:  true,
		CertHosts: []string{"mx.rcpt.test"},
		Rcpt: func(rcpt string, n int) error {
			mu.Lock()
			rcpts[rcpt]++
			mu.Unlock()
			switch {
			case strings.HasPrefix(rcpt, "grey@") && n == 1:
				return smtptest.Reply(451, "4.7.1 Greylisted, try again later")
			case strings.HasPrefix(rcpt, "gone@"):
				return smtptest.Reply(550, "5.1.1 No such user")
			}
			return nil
		},
	})
	port := mx.Port()
	dropper := smtptest.NewServer(t, smtptest.Options{Addr: fmt.Sprintf("127.0.0.2:%d", port),
		DropData: func(n int) bool { return n == 1 }})
	plain := smtptest.NewServer(t, smtptest.Options{Addr: fmt.Sprintf("127.0.0.3:%d", port)})
	for domain, ip := range map[string]string{"rcpt.test": "127.0.0.1", "drop.test": "127.0.0.2", "plain.test": "127.0.0.3"} {
		dns.AddMX(domain, "mx."+domain, 10)
		dns.AddA("mx."+domain, ip)
	}
	caFile := filepath.Join(t.TempDir(), "mx-ca.pem")
	require.NoError(t, os.WriteFile(caFile, mx.CertPEM(), 0o600))
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, port)
	dataDir := env["POSTHASTE_DATA_DIR"]
	for k, v := range map[string]string{
		"POSTHASTE_TLS_CA_FILE":            caFile,
		"POSTHASTE_VERIFY_EXPIRE":          "2m",
		"POSTHASTE_VERIFY_RECHECK":         "1s",
		"POSTHASTE_DELIVERY_RETRY_INITIAL": "300ms",
		"POSTHASTE_DELIVERY_RETRY_MAX":     "1s",
		"POSTHASTE_DELIVERY_EXPIRE":        "6s",
	} {
		env[k] = v
	}
	dev := startDev(t, env)
	defer dev.stop(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	defer st.Close()
	key, err := os.ReadFile(filepath.Join(dataDir, "master.key"))
	require.NoError(t, err, "dev made a master key")
	info, err := os.Stat(filepath.Join(dataDir, "master.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.NotContains(t, dev.out.String(), strings.TrimSpace(string(key)), "the master key is never logged")
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, dataDir).APIKey}

	// Create the domain and publish its records, DKIM first.
	status, d := c.do("POST", "/domains", map[string]any{"name": "example.test", "region": "eu-west-1"})
	require.Equal(t, 201, status, d)
	domainID := d["id"].(string)
	recs := map[string]map[string]any{}
	for _, r := range d["records"].([]any) {
		rm := r.(map[string]any)
		recs[rm["record"].(string)+" "+rm["type"].(string)] = rm
	}
	require.Len(t, recs, 4)
	fqdn := func(r map[string]any) string { return r["name"].(string) + ".example.test" }
	status, _ = c.do("POST", "/domains/"+domainID+"/verify", nil)
	require.Equal(t, 200, status)
	c.waitDomain(domainID, "pending")
	dns.AddTXT(fqdn(recs["DKIM TXT"]), recs["DKIM TXT"]["value"].(string)) // over 255 bytes: split in two strings
	c.waitDomain(domainID, "partially_verified")
	dns.AddMX(fqdn(recs["SPF MX"]), recs["SPF MX"]["value"].(string), 10)
	dns.AddTXT(fqdn(recs["SPF TXT"]), recs["SPF TXT"]["value"].(string))
	dns.AddTXT(fqdn(recs["DMARC TXT"]), recs["DMARC TXT"]["value"].(string))
	got := c.waitDomain(domainID, "verified")
	for _, r := range got["records"].([]any) {
		require.Equal(t, "verified", r.(map[string]any)["status"], r)
	}

	status, e := c.do("POST", "/emails", map[string]any{"from": "hello@other.test", "to": "ok@rcpt.test", "subject": "x", "text": "x"})
	require.Equal(t, 403, status)
	require.Contains(t, e["message"], "other.test")

	// Greylisting, a hard bounce and a delivery in one send.
	id := c.send(map[string]any{
		"from":     "Shop <hello@example.test>",
		"to":       []string{"ok@rcpt.test", "grey@rcpt.test", "gone@rcpt.test"},
		"reply_to": "help@example.test",
		"subject":  "Your order ✓",
		"html":     "<p>Thanks for your <b>order</b>.</p>",
		"headers":  map[string]string{"List-Unsubscribe": "<mailto:unsubscribe@example.test>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
	})
	c.waitFor(id, map[string]string{"ok@rcpt.test": "delivered", "grey@rcpt.test": "delivered", "gone@rcpt.test": "bounced"})
	evs := events(t, st, id)
	require.ElementsMatch(t, []string{"queued:", "sent:", "delivered:ok@rcpt.test", "bounced:gone@rcpt.test",
		"delivery_delayed:grey@rcpt.test", "delivered:grey@rcpt.test"}, evs, "delivery_delayed once")
	require.Equal(t, "delivered:grey@rcpt.test", evs[len(evs)-1], "the greylisted recipient is delivered on a retry")
	requireRegion(t, env["POSTHASTE_TEMPORAL_PORT"], id, "eu-west-1")

	msgs := mx.Messages()
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		v, ok := reports.ParseVERP(m.From)
		require.True(t, ok, m.From)
		require.True(t, v.PerRecipient, m.From)
		require.Equal(t, mustRecipientPath(t, devVERPKey(t, dataDir), v.EmailID, v.Index, "send.example.test"), m.From,
			"the return path is signed")
		require.Equal(t, m.To, []string{[]string{"ok@rcpt.test", "grey@rcpt.test", "gone@rcpt.test"}[v.Index]},
			"and names the recipient")
		require.Equal(t, id, v.EmailID.String())
		require.True(t, m.TLS)
		requireAuthenticated(t, dns, m, "example.test")
	}
	checkSMTPDomainMail(t, c, env, mx, dns)

	// The bounced address is suppressed: the next send does not try it.
	status, sl := c.do("GET", "/suppressions", nil)
	require.Equal(t, 200, status)
	require.Len(t, sl["data"], 1)
	sp := sl["data"].([]any)[0].(map[string]any)
	require.Equal(t, "gone@rcpt.test", sp["email"])
	require.Equal(t, "bounce", sp["reason"])
	require.Equal(t, id, sp["email_id"])
	id2 := c.send(map[string]any{"from": "hello@example.test", "to": []string{"gone@rcpt.test", "ok@rcpt.test"}, "subject": "again", "text": "again"})
	c.waitFor(id2, map[string]string{"gone@rcpt.test": "suppressed", "ok@rcpt.test": "delivered"})
	mu.Lock()
	require.Equal(t, 1, rcpts["gone@rcpt.test"], "a suppressed address is not attempted")
	mu.Unlock()
	status, del := c.do("DELETE", "/suppressions/gone@rcpt.test", nil)
	require.Equal(t, 200, status, del)
	id3 := c.send(map[string]any{"from": "hello@example.test", "to": "gone@rcpt.test", "subject": "lifted", "text": "x"})
	c.waitFor(id3, map[string]string{"gone@rcpt.test": "bounced"})

	// The connection drops in the middle of DATA: retried, delivered once.
	id4 := c.send(map[string]any{"from": "hello@example.test", "to": "x@drop.test", "subject": "drop", "text": "x"})
	c.waitFor(id4, map[string]string{"x@drop.test": "delivered"})
	require.Equal(t, []string{"queued:", "sent:", "delivery_delayed:x@drop.test", "delivered:x@drop.test"}, events(t, st, id4))
	require.Len(t, dropper.Messages(), 1)
	requireAuthenticated(t, dns, dropper.Messages()[0], "example.test")

	// Enforced TLS: delivered over a certificate valid for the MX name;
	// deferred by an MX without STARTTLS until the delivery expires.
	status, _ = c.do("PATCH", "/domains/"+domainID, map[string]any{"tls": "enforced"})
	require.Equal(t, 200, status)
	id5 := c.send(map[string]any{"from": "hello@example.test", "to": []string{"y@rcpt.test", "z@plain.test"}, "subject": "tls", "text": "x"})
	c.waitFor(id5, map[string]string{"y@rcpt.test": "delivered", "z@plain.test": "bounced"})
	require.Len(t, plain.Messages(), 0, "nothing goes in plaintext")
	evs5, err := st.Emails.Events(ctx, uuid.MustParse(id5))
	require.NoError(t, err)
	last := evs5[len(evs5)-1]
	require.Equal(t, "bounced", last.Type)
	require.Equal(t, "Transient", last.Detail["type"], "a delivery deferred until it expires is a transient bounce")
	require.Contains(t, events(t, st, id5), "delivery_delayed:z@plain.test")

	// A record vanishes: the recheck moves the domain to temporary_failure,
	// which may still send; it is verified again when the record is back.
	dns.Remove(fqdn(recs["DKIM TXT"]), 16 /* TXT */)
	c.waitDomain(domainID, "temporary_failure")
	id6 := c.send(map[string]any{"from": "hello@example.test", "to": "ok@rcpt.test", "subject": "still", "text": "x"})
	dns.AddTXT(fqdn(recs["DKIM TXT"]), recs["DKIM TXT"]["value"].(string))
	c.waitDomain(domainID, "verified")
	c.waitFor(id6, map[string]string{"ok@rcpt.test": "delivered"})

	writeHistory(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"], workflows.DomainVerifyWorkflowID(domainID), "verifydomain.json")

	// Deleting the domain stops new sends; one accepted before still goes.
	id7 := c.send(map[string]any{"from": "hello@example.test", "to": "late@rcpt.test", "subject": "late", "text": "x"})
	status, _ = c.do("DELETE", "/domains/"+domainID, nil)
	require.Equal(t, 200, status)
	status, e = c.do("POST", "/emails", map[string]any{"from": "hello@example.test", "to": "ok@rcpt.test", "subject": "x", "text": "x"})
	require.Equal(t, 403, status, e)
	c.waitFor(id7, map[string]string{"late@rcpt.test": "delivered"})
}

// writeHistory writes the history of a workflow's current run as JSON for
// the replay tests of package workflows when POSTHASTE_WRITE_HISTORIES
// names a directory.
func writeHistory(t *testing.T, hostPort, workflowID, name string) {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	recordHistory(t, tc, workflowID, name, 1000)
}

// recipientMX starts a loopback MX that accepts everything and publishes
// it as the MX of rcpt.test on dns.
func recipientMX(t testing.TB, dns *dnstest.Server) *smtptest.Server {
	t.Helper()
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("rcpt.test", "mx.rcpt.test", 10)
	dns.AddA("mx.rcpt.test", "127.0.0.1")
	return mx
}

// domainDevEnv is the environment of a `posthaste dev` that sends from
// verified domains: a private database, free ports, lookups on dns (which
// gets the operator's SPF record, included by every return path, and the
// A record of its host name), every MX dialled on mxPort, and domain
// verification every 200 ms.
func domainDevEnv(t testing.TB, dbURL string, dns *dnstest.Server, mxPort int) map[string]string {
	t.Helper()
	dns.AddTXT("_spf.posthaste.example", "v=spf1 ip4:127.0.0.0/8 -all")
	dns.AddA("posthaste.example", "127.0.0.1")
	return map[string]string{
		"DATABASE_URL":                  dbURL,
		"POSTHASTE_DATA_DIR":            t.TempDir(),
		"POSTHASTE_HTTP_ADDR":           fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":       fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT":    "0",
		"POSTHASTE_DNS_SERVER":          dns.Addr(),
		"POSTHASTE_MX_PORT":             fmt.Sprint(mxPort),
		"POSTHASTE_HOSTNAME":            "posthaste.example",
		"POSTHASTE_BOUNCE_HOST":         "bounces.posthaste.example",
		"POSTHASTE_SPF_INCLUDE":         "_spf.posthaste.example",
		"POSTHASTE_VERIFY_INTERVAL":     "200ms",
		"POSTHASTE_VERIFY_FAST_PERIOD":  "2s",
		"POSTHASTE_VERIFY_MAX_INTERVAL": "1s",
		"POSTHASTE_LOG_LEVEL":           "warn",
	}
}

// verifiedDomain adds the domain name, publishes its TXT and MX records
// on dns and waits until it is verified; it returns the domain's id.
func (c apiClient) verifiedDomain(dns *dnstest.Server, name string) string {
	c.t.Helper()
	status, d := c.do("POST", "/domains", map[string]any{"name": name})
	require.Equal(c.t, 201, status, d)
	id := d["id"].(string)
	for _, r := range d["records"].([]any) {
		rm := r.(map[string]any)
		host := rm["name"].(string) + "." + name
		switch rm["type"] {
		case "TXT":
			dns.AddTXT(host, rm["value"].(string))
		case "MX":
			dns.AddMX(host, rm["value"].(string), 10)
		}
	}
	status, _ = c.do("POST", "/domains/"+id+"/verify", nil)
	require.Equal(c.t, 200, status)
	c.waitDomain(id, "verified")
	return id
}

// waitDomain polls a domain until it reaches status.
func (c apiClient) waitDomain(id, want string) map[string]any {
	c.t.Helper()
	var last map[string]any
	eventually(c.t, 30*time.Second, func() error {
		status, d := c.do("GET", "/domains/"+id, nil)
		require.Equal(c.t, 200, status, d)
		last = d
		if d["status"] != want {
			return fmt.Errorf("domain %s did not become %s; last: %v", id, want, d)
		}
		return nil
	})
	return last
}

func events(t *testing.T, st *store.Store, id string) []string {
	t.Helper()
	evs, err := st.Emails.Events(context.Background(), uuid.MustParse(id))
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type+":"+ev.Recipient)
	}
	return out
}

// requireRegion checks that the email's Deliver activities ran on the task
// queue of region.
func requireRegion(t *testing.T, temporalPort, emailID, region string) {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + temporalPort})
	require.NoError(t, err)
	defer tc.Close()
	it := tc.GetWorkflowHistory(context.Background(), workflows.EmailWorkflowID(emailID), "", false,
		enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var queues []string
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			queues = append(queues, a.GetTaskQueue().GetName())
		}
	}
	require.NotEmpty(t, queues)
	for _, q := range queues {
		require.Equal(t, workflows.DeliverTaskQueue(region, ""), q)
	}
}

// requireAuthenticated checks what a receiving MTA checks: the DKIM
// signature verifies (go-msgauth and dkimpy, both reading the test DNS),
// SPF passes for the return path (pyspf), and both align with the From
// domain as DMARC requires (RFC 7489 §3.1: DKIM d= equal to the From
// domain, strict; the MAIL FROM domain under it, relaxed).
func requireAuthenticated(t *testing.T, dns *dnstest.Server, m smtptest.Message, fromDomain string) {
	t.Helper()
	r := dns.Resolver()
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(m.Data), &msgdkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) { return r.LookupTXT(context.Background(), name) },
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	require.NoError(t, verifs[0].Err)
	require.Equal(t, fromDomain, verifs[0].Domain)
	keys := strings.ToLower(strings.Join(verifs[0].HeaderKeys, ":"))
	require.True(t, strings.HasPrefix(keys, "from:to:"), keys)
	require.True(t, strings.HasSuffix(keys, ":from"), "From is over-signed: %s", keys)

	mr, err := mail.CreateReader(bytes.NewReader(m.Data))
	require.NoError(t, err)
	from, err := mr.Header.AddressList("From")
	require.NoError(t, err)
	_, headerDomain, _ := strings.Cut(from[0].Address, "@")
	require.Equal(t, fromDomain, headerDomain, "DKIM aligns with From")
	_, envDomain, _ := strings.Cut(m.From, "@")
	require.True(t, strings.HasSuffix(envDomain, "."+fromDomain), "SPF domain %s aligns with %s", envDomain, fromDomain)
	sig := mr.Header.Get("DKIM-Signature")
	require.Contains(t, sig, "c=relaxed/relaxed")
	require.Contains(t, sig, "a=rsa-sha256")

	cmd := exec.Command("testdata/dkimverify.py", dns.Addr())
	cmd.Stdin = bytes.NewReader(m.Data)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "dkimpy: %s", out)
	require.Contains(t, string(out), "pass")

	host, _, _ := strings.Cut(m.RemoteAddr, ":")
	out, err = exec.Command("testdata/spfcheck.py", dns.Addr(), host, m.From, m.Helo).CombinedOutput()
	require.NoError(t, err, "pyspf: %s", out)
	require.True(t, strings.HasPrefix(string(out), "pass"), string(out))
}

// TestMasterKeyRequiredOnceDomainsExist checks the startup rule of `api`
// and `worker`: without POSTHASTE_MASTER_KEY they run only while no domain
// (whose DKIM key it seals) exists; `dev` makes a key file instead.
func TestMasterKeyRequiredOnceDomainsExist(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: pgtest.NewDatabase(t)})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Migrate(ctx))

	box, err := masterKey(ctx, config.Domains{}, st, "")
	require.NoError(t, err)
	require.Nil(t, box, "no domains: no key needed")

	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	require.NoError(t, st.Domains.CreateDomain(ctx, store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "example.test",
		Region: "us-east-1", Status: store.DomainNotStarted, ReturnPath: "send", TLS: store.TLSOpportunistic,
		DKIMSelector: "posthaste", DKIMPublicKey: "x", DKIMPrivateKey: []byte("sealed")}))
	_, err = masterKey(ctx, config.Domains{}, st, "")
	require.ErrorContains(t, err, "POSTHASTE_MASTER_KEY")

	key, err := seal.NewKey()
	require.NoError(t, err)
	box, err = masterKey(ctx, config.Domains{MasterKey: key}, st, "")
	require.NoError(t, err)
	require.NotNil(t, box)

	// A key file made now holds another key: the token keys stored under
	// the first one do not open, and the process refuses to start.
	file := filepath.Join(t.TempDir(), "master.key")
	_, err = masterKey(ctx, config.Domains{}, st, file)
	require.ErrorContains(t, err, "cannot be opened with the master key")
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}
