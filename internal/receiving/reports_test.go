package receiving_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/inroute"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// reportEnv is a team with a verified domain and the activities that
// process its inbound mail, on real PostgreSQL.
type reportEnv struct {
	st   *store.Store
	d    store.Domain
	key  []byte
	acts *receiving.Activities
}

func newReportEnv(t *testing.T) reportEnv {
	t.Helper()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	acts := newActivities(st, box, "fbl.example")
	return reportEnv{st: st, d: d, key: box.DeriveKey(reports.VERPKeyPurpose), acts: acts}
}

func (r reportEnv) process(t *testing.T, id uuid.UUID) contract.ProcessInboundResult {
	t.Helper()
	res, err := run[contract.ProcessInboundInput, contract.ProcessInboundResult](t,
		r.acts.ProcessInboundMessage, contract.ProcessInboundInput{InboundID: id})
	require.NoError(t, err)
	return res
}

// delivered inserts an email created at created to rcpts, all delivered.
func (r reportEnv) delivered(t *testing.T, created time.Time, rcpts ...string) store.Email {
	t.Helper()
	e := domainEmail(t, r.st, r.d, rcpts...)
	if !created.IsZero() {
		// Not the email of domainEmail: the same, created earlier.
		e.ID, e.CreatedAt = uuid.Must(uuid.NewV7()), created
		_, err := storetest.InsertEmail(context.Background(), r.st, e)
		require.NoError(t, err)
	}
	var evs []store.Event
	for _, a := range rcpts {
		evs = append(evs, store.Event{Type: store.EventDelivered, Recipient: a})
	}
	require.NoError(t, r.st.Emails.RecordEvents(context.Background(), e.ID, evs))
	return e
}

func (r reportEnv) suppressed(t *testing.T, addr string) bool {
	t.Helper()
	_, err := storetest.SuppressionByEmail(context.Background(), r.st, r.d.TeamID, addr)
	return err == nil
}

// dsnAbout is a Postfix DSN about email e, sent to rp, that says each of
// failed bounced (550 5.1.1).
func dsnAbout(e store.Email, rp string, failed ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: MAILER-DAEMON@mx.dest.test\r\nTo: %s\r\nSubject: Undelivered Mail Returned to Sender\r\n"+
		"MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"b\"\r\n\r\n"+
		"--b\r\nContent-Type: text/plain\r\n\r\nI'm sorry.\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\n"+
		"Reporting-MTA: dns; mx.dest.test\r\n", rp)
	for _, a := range failed {
		fmt.Fprintf(&b, "\r\nFinal-Recipient: rfc822; %s\r\nAction: failed\r\nStatus: 5.1.1\r\n"+
			"Diagnostic-Code: smtp; 550 5.1.1 <%s>: Recipient address rejected: User unknown\r\n", a, a)
	}
	fmt.Fprintf(&b, "\r\n--b\r\nContent-Type: text/rfc822-headers\r\n\r\nReturn-Path: <%s>\r\nFrom: hello@shop.test\r\n"+
		"Message-ID: <%s@shop.test>\r\nSubject: Signed\r\n\r\n--b--\r\n", rp, e.ID)
	return []byte(b.String())
}

// arfAbout is an ARF complaint of the feedback loop of fbl.example about
// email e, sent to rp, naming rcpt ("" for none, as Yahoo redacts it).
func arfAbout(e store.Email, rp, rcpt string) []byte {
	named := ""
	if rcpt != "" {
		named = "Original-Rcpt-To: <" + rcpt + ">\r\n"
	}
	return []byte("From: <fbl@fbl.example>\r\nTo: <" + rp + ">\r\nSubject: complaint\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"b\"\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nA complaint.\r\n\r\n--b\r\nContent-Type: message/feedback-report\r\n\r\n" +
		"Feedback-Type: abuse\r\nUser-Agent: fbl/1.0\r\nVersion: 1\r\n" + named +
		"\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nReturn-Path: <" + rp + ">\r\nFrom: hello@shop.test\r\n" +
		"Message-ID: <" + e.ID.String() + "@shop.test>\r\nSubject: Signed\r\n\r\nHello.\r\n--b--\r\n")
}

// The reproduced attack (issue 33 point 2): a recipient sends a DSN or
// an ARF report to its own return path naming another recipient of the
// email. It changes nothing for the other; naming itself, it acts on
// itself only.
func TestReportsActOnlyOnTheRecipientOfTheirReturnPath(t *testing.T) {
	t.Parallel()
	r := newReportEnv(t)
	e := r.delivered(t, time.Time{}, "attacker@dest.test", "victim@dest.test")
	rp := rcptPath(t, r.key, e, 0, r.d)

	res := r.process(t, receive(t, r.st, r.key, rp, dsnAbout(e, rp, "victim@dest.test")))
	require.Equal(t, contract.ProcessInboundResult{Kind: "dsn", EmailID: e.ID}, res)
	res = r.process(t, receiveAuth(t, r.st, r.key, rp, arfAbout(e, rp, "victim@dest.test"), fblAuth("fbl.example")))
	require.Equal(t, contract.ProcessInboundResult{Kind: "feedback", EmailID: e.ID}, res)
	res = r.process(t, receive(t, r.st, r.key, rp, dsnAbout(e, rp, "victim@dest.test", "attacker@dest.test")))
	require.Equal(t, 1, res.Events, "only the recipient the return path names")
	require.Equal(t, map[string]string{"attacker@dest.test": "bounced", "victim@dest.test": "delivered"},
		recipientStatus(t, r.st, e))
	require.False(t, r.suppressed(t, "victim@dest.test"), "the victim is not suppressed")
	require.True(t, r.suppressed(t, "attacker@dest.test"))

	// The victim's own return path does act on the victim.
	rp1 := rcptPath(t, r.key, e, 1, r.d)
	res = r.process(t, receive(t, r.st, r.key, rp1, dsnAbout(e, rp1, "victim@dest.test")))
	require.Equal(t, 1, res.Events)
	require.Equal(t, "bounced", recipientStatus(t, r.st, e)["victim@dest.test"])
}

// Emails sent before per-recipient return paths (migration 00040) went
// out with one return path per email: a report to it is still acted on,
// but only when it names a single recipient of the email.
func TestReportsToPerEmailReturnPathsBeforeTheCutover(t *testing.T) {
	t.Parallel()
	r := newReportEnv(t)
	old := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	e := r.delivered(t, old, "a@dest.test", "b@dest.test", "c@dest.test")
	rp := perEmailPath(r.key, e.ID, r.d)

	res := r.process(t, receive(t, r.st, r.key, rp, dsnAbout(e, rp, "a@dest.test", "b@dest.test")))
	require.Zero(t, res.Events, "two recipients named: none is acted on")
	res = r.process(t, receive(t, r.st, r.key, rp, dsnAbout(e, rp, "b@dest.test", "stranger@dest.test")))
	require.Equal(t, 1, res.Events, "a single recipient of the email named")
	res = r.process(t, receiveAuth(t, r.st, r.key, rp, arfAbout(e, rp, "c@dest.test"), fblAuth("fbl.example")))
	require.Equal(t, 1, res.Events)
	res = r.process(t, receiveAuth(t, r.st, r.key, rp, arfAbout(e, rp, ""), fblAuth("fbl.example")))
	require.Zero(t, res.Events, "nobody named, several recipients: nobody blamed")
	require.Equal(t, map[string]string{"a@dest.test": "delivered", "b@dest.test": "bounced", "c@dest.test": "complained"},
		recipientStatus(t, r.st, e))

	// An email from after the cutover went out with per-recipient
	// return paths: its per-email one is forged, and not even routed.
	recent := r.delivered(t, time.Time{}, "d@dest.test")
	_, err := inroute.New(r.st.Received, r.st.Emails, r.key, nil).Route(context.Background(), perEmailPath(r.key, recent.ID, r.d))
	require.ErrorIs(t, err, inmail.ErrNotOurs)
}

// A report that reaches a receiving address is matched by the VERP
// return path it quotes, never by the original's Message-ID alone, which
// every recipient sees.
func TestReportsAreNotMatchedByMessageID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newReportEnv(t)
	enableReceiving(t, r.st, r.d)
	e := r.delivered(t, time.Time{}, "a@dest.test", "b@dest.test")
	_, err := r.st.Emails.SaveMessage(ctx, e.TeamID, e.ID, e.ID.String()+"@shop.test", []byte("m"))
	require.NoError(t, err)

	// The original's Return-Path is not ours: only the Message-ID is.
	res := r.process(t, receive(t, r.st, r.key, "support@shop.test",
		dsnAbout(e, "someone@elsewhere.test", "a@dest.test")))
	require.Equal(t, contract.ProcessInboundResult{Kind: "dsn", Received: 1}, res)
	require.Equal(t, "delivered", recipientStatus(t, r.st, e)["a@dest.test"])

	// The recipient's return path quoted in the report does match.
	rp := rcptPath(t, r.key, e, 0, r.d)
	raw := strings.Replace(string(dsnAbout(e, rp, "a@dest.test")), "To: "+rp, "To: support@shop.test", 1)
	res = r.process(t, receive(t, r.st, r.key, "support@shop.test", []byte(raw)))
	require.Equal(t, 1, res.Events)
	require.Equal(t, "bounced", recipientStatus(t, r.st, e)["a@dest.test"])
}

// Complaints act only when a trusted feedback loop demonstrably sent
// them (issue 33 point 6); any other is kept as received mail.
func TestComplaintsNeedAnAuthenticatedFeedbackLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newReportEnv(t)
	for name, auth := range map[string]inmail.Results{
		"unauthenticated": {},
		"DKIM of another domain": {DKIM: []inmail.DKIMResult{{Result: "pass", Domain: "spammer.example"}},
			DMARC: inmail.DMARCResult{FromDomain: "fbl.example"}},
		"failed DKIM": {DKIM: []inmail.DKIMResult{{Result: "fail", Domain: "fbl.example"}},
			DMARC: inmail.DMARCResult{FromDomain: "fbl.example"}},
		"SPF pass of an unlisted domain": {SPF: inmail.SPFResult{Result: "pass", Domain: "spammer.example", Scope: "mailfrom"},
			DMARC: inmail.DMARCResult{FromDomain: "fbl.example"}},
		"authenticated, not listed": {DKIM: []inmail.DKIMResult{{Result: "pass", Domain: "other.example"}},
			DMARC: inmail.DMARCResult{FromDomain: "other.example"}},
	} {
		e := r.delivered(t, time.Time{}, "user@dest.test")
		rp := rcptPath(t, r.key, e, 0, r.d)
		id := receiveAuth(t, r.st, r.key, rp, arfAbout(e, rp, "user@dest.test"), auth)
		res := r.process(t, id)
		require.Equal(t, contract.ProcessInboundResult{Kind: "feedback"}, res, name)
		require.Equal(t, "delivered", recipientStatus(t, r.st, e)["user@dest.test"], name)
		require.False(t, r.suppressed(t, "user@dest.test"), name)
		m, err := r.st.Received.InboundByID(ctx, id)
		require.NoError(t, err, "kept as received mail: %s", name)
		require.Equal(t, store.InboundProcessed, m.Status, name)
	}
	for name, auth := range map[string]inmail.Results{
		"aligned DKIM": fblAuth("fbl.example"),
		"DKIM of the parent domain": {DKIM: []inmail.DKIMResult{{Result: "pass", Domain: "fbl.example"}},
			DMARC: inmail.DMARCResult{FromDomain: "reports.fbl.example"}},
		"SPF pass": {SPF: inmail.SPFResult{Result: "pass", Domain: "bounce.fbl.example", Scope: "mailfrom"},
			DMARC: inmail.DMARCResult{FromDomain: "fbl.example"}},
	} {
		e := r.delivered(t, time.Time{}, "user"+fmt.Sprint(len(name))+"@dest.test")
		rp := rcptPath(t, r.key, e, 0, r.d)
		res := r.process(t, receiveAuth(t, r.st, r.key, rp, arfAbout(e, rp, e.Recipients[0].Address), auth))
		require.Equal(t, contract.ProcessInboundResult{Kind: "feedback", EmailID: e.ID, Events: 1, Suppressed: 1}, res, name)
	}
}
