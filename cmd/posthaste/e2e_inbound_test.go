package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/postfixtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/smtpgw"
	"github.com/posthaste/posthaste/workflows"
)

// inboundListenEnv gives a dev process started by a test an inbound MX on
// a free loopback port of its own, unless the test chose one.
func inboundListenEnv(t testing.TB, env map[string]string) {
	t.Helper()
	if _, ok := env["POSTHASTE_INBOUND_LISTEN"]; !ok {
		env["POSTHASTE_INBOUND_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
}

// devVERPKey is the key the dev process in dataDir signs return paths with.
func devVERPKey(t *testing.T, dataDir string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "master.key"))
	require.NoError(t, err)
	key, err := seal.ParseKey(string(raw))
	require.NoError(t, err)
	box, err := seal.New(key)
	require.NoError(t, err)
	return box.DeriveKey(reports.VERPKeyPurpose)
}

// The email and return path every report fixture of internal/reports is
// about.
const (
	fixtureEmailID    = "0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60"
	fixtureReturnPath = "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com"
)

// reportFixture reads a report sample of internal/reports made about the
// email id sent with return path rp, with the addresses in rcpts replaced.
func reportFixture(t *testing.T, name, id, rp string, rcpts map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "reports", "testdata", name))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(b), fixtureReturnPath, rp)
	s = strings.ReplaceAll(s, fixtureEmailID, id)
	for from, to := range rcpts {
		s = strings.ReplaceAll(s, from, to)
	}
	return []byte(s)
}

// sendInbound delivers msg from the null sender (RFC 5321 §4.5.5, as
// reports are sent) to rcpt at the inbound MX addr, over plain SMTP; the
// error is the first refusal.
func sendInbound(t *testing.T, addr, rcpt string, msg []byte) error {
	t.Helper()
	c, err := smtp.Dial(addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("mail.example.net"))
	ok, _ := c.Extension("STARTTLS")
	require.True(t, ok, "STARTTLS is offered")
	_, auth := c.Extension("AUTH")
	require.Empty(t, auth, "no AUTH on the MX")
	require.NoError(t, c.Mail(""))
	if err := c.Rcpt(rcpt); err != nil {
		return err
	}
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write(msg)
	require.NoError(t, err)
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// requireCode checks that err is an SMTP reply with code.
func requireCode(t *testing.T, err error, code int) {
	t.Helper()
	var te *textproto.Error
	require.True(t, errors.As(err, &te), "an SMTP reply, got %v", err)
	require.Equal(t, code, te.Code, te.Msg)
}

// TestDevInbound takes asynchronous bounces and complaints through
// `posthaste dev`: an email from a verified domain is delivered to a
// loopback MX with a signed return path; a Postfix DSN sent to that
// return path at the dev inbound MX makes the recipient `bounced` after
// `delivered`, suppresses the address and fires email.bounced; an ARF
// complaint makes the other recipient `complained`, suppressed with
// reason complaint, and fires email.complained. The MX refuses at RCPT a
// foreign domain (no open relay), an unsigned return path of an unknown
// email, a forged signature and the unsigned form of a new email; a DSN
// to the signed return path of an email no longer kept is accepted and
// ignored.
func TestDevInbound(t *testing.T) {
	ctx := context.Background()
	dns := dnstest.NewServer(t)
	mx := recipientMX(t, dns)
	// Postfix, the MX of pfx.test, on the same port at another address.
	dns.AddMX("pfx.test", "mx.pfx.test", 10)
	dns.AddA("mx.pfx.test", "127.0.0.4")
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, mx.Port())
	dataDir := env["POSTHASTE_DATA_DIR"]
	inboundAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env["POSTHASTE_INBOUND_LISTEN"] = inboundAddr
	// The feedback loop of example.net, whose reports pass SPF for the
	// HELO name sendInbound gives.
	env["POSTHASTE_FBL_DOMAINS"] = "example.net"
	dns.AddTXT("mail.example.net", "v=spf1 ip4:127.0.0.1 -all")
	dev := startDev(t, env)
	defer dev.stop(t)
	st := devStore(t, dbURL, dataDir)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, dataDir).APIKey}

	// A verified domain.
	c.verifiedDomain(dns, "example.test")

	recv := newHookReceiver(t)
	status, hook := c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL,
		"events": []string{"email.bounced", "email.complained"}})
	require.Equal(t, 201, status, hook)
	recv.mu.Lock()
	recv.secret = hook["signing_secret"].(string)
	recv.mu.Unlock()

	// Sent and delivered, each recipient's copy in its own transaction
	// from its own signed return path.
	id := c.send(map[string]any{"from": "Shop <hello@example.test>", "to": []string{"ann@rcpt.test", "bob@rcpt.test"},
		"subject": "Your order", "text": "Thanks."})
	c.waitFor(id, map[string]string{"ann@rcpt.test": "delivered", "bob@rcpt.test": "delivered"})
	msgs := mx.Messages()
	require.Len(t, msgs, 2)
	key := devVERPKey(t, dataDir)
	paths := map[string]string{}
	for i, m := range msgs {
		v, ok := reports.ParseVERP(m.From)
		require.True(t, ok, m.From)
		require.Equal(t, id, v.EmailID.String())
		require.Equal(t, "send.example.test", v.Host)
		require.True(t, v.PerRecipient && v.Index == i && v.Verify(key), "the return path names its recipient: %s", m.From)
		require.Len(t, m.To, 1)
		paths[m.To[0]] = m.From
	}
	rp, bobRP := paths["ann@rcpt.test"], paths["bob@rcpt.test"]
	v, _ := reports.ParseVERP(rp)

	// Refused at RCPT: not an open relay, nothing forged.
	dsn := reportFixture(t, "postfix-failed.eml", id, rp, map[string]string{"nobody@example.org": "ann@rcpt.test"})
	for name, rcpt := range map[string]string{
		"a foreign domain":           "someone@elsewhere.test",
		"our domain, not a VERP":     "postmaster@example.test",
		"an unknown email, unsigned": reports.VERPPrefix + uuid.Must(uuid.NewV7()).String() + "@send.example.test",
		"a forged signature":         reports.SignedReturnPath([]byte("not the key, but 32 bytes long.."), v.EmailID, "send.example.test"),
		"the unsigned form":          reports.VERPPrefix + id + "@send.example.test",
		"the per-email form":         reports.SignedReturnPath(key, v.EmailID, "send.example.test"),
		"a recipient it lacks":       mustRecipientPath(t, key, v.EmailID, 2, "send.example.test"),
		"a forged code":              mustRecipientPath(t, []byte("not the key, but 32 bytes long.."), v.EmailID, 0, "send.example.test"),
		"another host for the email": mustRecipientPath(t, key, v.EmailID, 0, "send.other.test"),
	} {
		err := sendInbound(t, inboundAddr, rcpt, dsn)
		require.Error(t, err, name)
		requireCode(t, err, 550)
	}
	// A DSN for an email we signed for but no longer keep is accepted and
	// ignored.
	require.NoError(t, sendInbound(t, inboundAddr,
		reports.SignedReturnPath(key, uuid.Must(uuid.NewV7()), "send.example.test"), dsn))
	e := c.waitFor(id, map[string]string{"ann@rcpt.test": "delivered", "bob@rcpt.test": "delivered"})
	require.Equal(t, "delivered", e["last_event"])

	team := mustTeam(t, st, id)
	// waitProcessed waits until the team has n inbound messages, all
	// processed, and returns them, newest first.
	waitProcessed := func(n int) []store.InboundMessage {
		t.Helper()
		var rows []store.InboundMessage
		eventually(t, 30*time.Second, func() error {
			var err error
			rows, err = storetest.InboundMessages(ctx, st, team, 10)
			require.NoError(t, err)
			done := 0
			for _, r := range rows {
				if r.Status == store.InboundProcessed {
					done++
				}
			}
			if len(rows) != n || done != n {
				return fmt.Errorf("inbound messages not processed: %+v", rows)
			}
			return nil
		})
		return rows
	}

	// The reproduced attack (issue 33): bob sends a DSN naming ann to
	// his own return path. Processed, it changes nothing for ann.
	require.NoError(t, sendInbound(t, inboundAddr, bobRP, dsn))
	waitProcessed(1)
	e = c.waitFor(id, map[string]string{"ann@rcpt.test": "delivered", "bob@rcpt.test": "delivered"})
	require.Equal(t, "delivered", e["last_event"])

	// A DSN: bounced after delivered, suppressed, email.bounced.
	require.NoError(t, sendInbound(t, inboundAddr, rp, dsn))
	e = c.waitFor(id, map[string]string{"ann@rcpt.test": "bounced", "bob@rcpt.test": "delivered"})
	require.Equal(t, "bounced", e["last_event"])
	for _, r := range e["recipients"].([]any) {
		rm := r.(map[string]any)
		if rm["email"] == "ann@rcpt.test" {
			b := rm["bounce"].(map[string]any)
			require.Equal(t, "Permanent", b["type"], b)
			require.Equal(t, "NoEmail", b["subType"], b)
			require.Contains(t, b["diagnosticCode"].([]any)[0], "550 5.1.1")
		} else {
			require.Nil(t, rm["bounce"])
		}
	}
	got := recv.waitFor(1)
	require.Equal(t, hookEvent{got[0].ID, "email.bounced", id}, got[0])
	require.Equal(t, []string{"queued:", "sent:", "delivered:ann@rcpt.test", "delivered:bob@rcpt.test",
		"bounced:ann@rcpt.test"}, sortedDelivered(events(t, st, id)))
	bounces, err := st.Emails.Bounces(ctx, mustTeam(t, st, id), uuid.MustParse(id))
	require.NoError(t, err)
	require.Equal(t, "Permanent", bounces["ann@rcpt.test"].Type)
	require.Contains(t, bounces["ann@rcpt.test"].DiagnosticCode[0], "550 5.1.1")
	requireSuppressed(t, c, "ann@rcpt.test", "bounce", id)

	// The same DSN again, from swaks over STARTTLS (a retrying sender):
	// accepted, and nothing changes.
	dsnFile := filepath.Join(t.TempDir(), "dsn.eml")
	require.NoError(t, os.WriteFile(dsnFile, dsn, 0o600))
	out, accepted := swaks(t, "--server", inboundAddr, "--tls", "--from", "", "--to", rp, "--data", dsnFile)
	require.Len(t, accepted, 1, out)

	// An ARF complaint about bob from a domain that is not a trusted
	// feedback loop: kept, acting on nobody.
	arf := reportFixture(t, "rfc5965-arf.eml", id, bobRP, map[string]string{"user@example.com": "bob@rcpt.test"})
	require.NoError(t, sendInbound(t, inboundAddr, bobRP, arf))
	waitProcessed(4)
	c.waitFor(id, map[string]string{"ann@rcpt.test": "bounced", "bob@rcpt.test": "delivered"})
	// The same from the feedback loop of example.net (SPF pass).
	arf = reportFixture(t, "rfc5965-arf.eml", id, bobRP, map[string]string{"user@example.com": "bob@rcpt.test",
		"abusedesk@example.com": "fbl@example.net"})
	require.NoError(t, sendInbound(t, inboundAddr, bobRP, arf))
	c.waitFor(id, map[string]string{"ann@rcpt.test": "bounced", "bob@rcpt.test": "complained"})
	got = recv.waitFor(2)
	require.Equal(t, hookEvent{got[1].ID, "email.complained", id}, got[1])
	requireSuppressed(t, c, "bob@rcpt.test", "complaint", id)

	// Every accepted message was processed by its workflow.
	rows := waitProcessed(5)
	var results []string
	for _, r := range rows {
		results = append(results, r.Result)
	}
	require.Equal(t, []string{"feedback", "feedback", "dsn", "dsn", "dsn"}, results)
	require.Equal(t, "", rows[3].MailFrom, "the null sender")
	require.Contains(t, string(rows[3].Raw), "Received: from mail.example.net", "stored with our Received header")
	require.Len(t, recv.events(), 2, "the attack, the repeated DSN and the untrusted complaint fired nothing")
	writeHistory(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"], workflows.InboundWorkflowID(rows[3].ID.String()),
		"processinbound_dsn.json")

	// A real peer: Postfix accepts the message (delivered), then fails
	// the mailbox and sends its own DSN to our return path.
	t.Run("Postfix bounces after accepting", func(t *testing.T) {
		postfixtest.Require(t)
		pf := startPostfixPeer(t, fmt.Sprintf("127.0.0.4:%d", mx.Port()), "pfx.test", inboundAddr)
		id := c.send(map[string]any{"from": "Shop <hello@example.test>", "to": "gone@pfx.test",
			"subject": "Welcome", "text": "Hello."})
		eventually(t, 60*time.Second, func() error {
			if evs := events(t, st, id); !slices.Contains(evs, "bounced:gone@pfx.test") {
				return fmt.Errorf("no bounce; events %v; Postfix log:\n%s", evs, pf.log())
			}
			return nil
		})
		// Postfix bounces within milliseconds of its 250, so its DSN may
		// be recorded before the delivery is: `delivered` is then
		// dropped (the recipient already has its outcome).
		evs := events(t, st, id)
		require.Contains(t, [][]string{
			{"queued:", "sent:", "delivered:gone@pfx.test", "bounced:gone@pfx.test"},
			{"queued:", "sent:", "bounced:gone@pfx.test"},
		}, evs)
		require.Regexp(t, `to=<gone@pfx.test>.*dsn=5\.1\.1, status=bounced \(Mailbox does not exist\)`, pf.log(),
			"Postfix accepted the message, then bounced it itself")
		rows, err := storetest.InboundMessages(ctx, st, team, 1)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, id, rows[0].Recipients[0].EmailID.String(), "the bounce came through the inbound MX")
		require.Contains(t, string(rows[0].Raw), "Reporting-MTA: dns; mx.pfx.test")
		e := c.waitFor(id, map[string]string{"gone@pfx.test": "bounced"})
		require.Equal(t, "bounced", e["last_event"])
		bounces, err := st.Emails.Bounces(ctx, team, uuid.MustParse(id))
		require.NoError(t, err)
		b := bounces["gone@pfx.test"]
		require.Equal(t, "Permanent", b.Type, b)
		require.Equal(t, "NoEmail", b.SubType, b)
		require.Len(t, b.DiagnosticCode, 1)
		require.Contains(t, b.DiagnosticCode[0], "Mailbox does not exist")
		requireSuppressed(t, c, "gone@pfx.test", "bounce", id)
		got := recv.waitFor(3)
		require.Equal(t, hookEvent{got[2].ID, "email.bounced", id}, got[2])
	})
}

// sortedDelivered is an email's event list with the delivered events of
// one Deliver activity (whose order among recipients is not fixed) sorted.
func sortedDelivered(evs []string) []string {
	out := append([]string(nil), evs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && strings.HasPrefix(out[j], "delivered:") && strings.HasPrefix(out[j-1], "delivered:") &&
			out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func mustTeam(t *testing.T, st *store.Store, emailID string) uuid.UUID {
	t.Helper()
	e, err := storetest.EmailForBuild(context.Background(), st, uuid.MustParse(emailID))
	require.NoError(t, err)
	return e.TeamID
}

// requireSuppressed checks the suppression list shows addr with reason,
// added by the email emailID.
func requireSuppressed(t *testing.T, c apiClient, addr, reason, emailID string) {
	t.Helper()
	status, sl := c.do("GET", "/suppressions", nil)
	require.Equal(t, 200, status, sl)
	for _, s := range sl["data"].([]any) {
		sp := s.(map[string]any)
		if sp["email"] == addr {
			require.Equal(t, reason, sp["reason"])
			require.Equal(t, emailID, sp["email_id"])
			return
		}
	}
	t.Fatalf("%s is not suppressed: %v", addr, sl)
}

// checkMXProcess runs `posthaste mx` as its own process beside the api
// and worker of base (TestSplitTopology): a DSN to the signed return path
// of an email of team is committed by the MX process, its workflow started
// by an outbox dispatcher (its own or the api's) and processed by the
// worker; a foreign recipient is refused; /readyz and /metrics answer on
// its ops listener.
func checkMXProcess(t *testing.T, base map[string]string, team string) {
	t.Helper()
	ctx := context.Background()
	env := map[string]string{}
	for k, v := range base {
		env[k] = v
	}
	opsPort := freePort(t)
	env["POSTHASTE_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", opsPort)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env["POSTHASTE_INBOUND_LISTEN"] = addr
	env["POSTHASTE_INBOUND_HOSTNAME"] = "mx.posthaste.example"
	dir := t.TempDir()
	env["POSTHASTE_TLS_CERT_FILE"], env["POSTHASTE_TLS_KEY_FILE"] = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_, err := smtpgw.EnsureSelfSigned(env["POSTHASTE_TLS_CERT_FILE"], env["POSTHASTE_TLS_KEY_FILE"],
		[]string{"mx.posthaste.example"})
	require.NoError(t, err)
	master := env["POSTHASTE_MASTER_KEY"]
	if master == "" {
		master = newMasterKey(t)
		env["POSTHASTE_MASTER_KEY"] = master
	}
	raw, err := seal.ParseKey(master)
	require.NoError(t, err)
	box, err := seal.New(raw)
	require.NoError(t, err)

	// An email of the team from a domain, delivered; scheduled far ahead
	// so that its own workflow only waits.
	st, err := store.Open(ctx, store.Config{URL: env["DATABASE_URL"]})
	require.NoError(t, err)
	defer st.Close()
	teamID := uuid.MustParse(team)
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: teamID, Name: "split.test", Region: "us-east-1",
		Status: store.DomainVerified, ReturnPath: "send", TLS: store.TLSOpportunistic, DKIMSelector: "posthaste",
		DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("sealed"), RecordStatus: map[string]string{}}
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	later := time.Now().Add(365 * 24 * time.Hour)
	text := "x"
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: teamID, DomainID: &d.ID, From: "a@split.test",
		FromDomain: "split.test", To: []string{"gone@rcpt.test"}, Subject: "s", Text: &text,
		LastEvent: store.EventScheduled, ScheduledAt: &later, CreatedAt: time.Now(),
		Recipients: []store.Recipient{{Address: "gone@rcpt.test", Kind: "to", Domain: "rcpt.test", Status: store.EventScheduled}}}
	_, err = storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventDelivered, Recipient: "gone@rcpt.test"}}))

	startProcess(t, env, "mx", `"msg":"ready"`)
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", opsPort))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)

	rp := mustRecipientPath(t, box.DeriveKey(reports.VERPKeyPurpose), e.ID, 0, "send.split.test")
	dsn := reportFixture(t, "postfix-failed.eml", e.ID.String(), rp, map[string]string{"nobody@example.org": "gone@rcpt.test"})
	requireCode(t, sendInbound(t, addr, "user@elsewhere.test", dsn), 550)
	require.NoError(t, sendInbound(t, addr, rp, dsn))
	eventually(t, 30*time.Second, func() error {
		got, err := st.Emails.GetEmail(ctx, teamID, e.ID)
		require.NoError(t, err)
		if got.Recipients[0].Status != store.EventBounced {
			return fmt.Errorf("not bounced: %s", got.Recipients[0].Status)
		}
		return nil
	})
	// The suppression is written after the bounce event, by the same
	// (idempotent, retried) activity: wait for it too.
	var sp store.Suppression
	eventually(t, 30*time.Second, func() error {
		var err error
		sp, err = storetest.SuppressionByEmail(ctx, st, teamID, "gone@rcpt.test")
		return err
	})
	require.Equal(t, store.SuppressionBounce, sp.Reason)

	res, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", opsPort))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "posthaste_inbound_")
}

// mustRecipientPath is reports.RecipientReturnPath.
func mustRecipientPath(t *testing.T, key []byte, emailID uuid.UUID, index int, host string) string {
	t.Helper()
	rp, err := reports.RecipientReturnPath(key, emailID, index, host)
	require.NoError(t, err)
	return rp
}
