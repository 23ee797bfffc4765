package reports

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/bounce"
)

// fixtureKey is the key the signed VERP addresses of testdata were made
// with (see testdata/README.md).
var fixtureKey = []byte("fixture-verp-key")

const (
	fixtureEmailID = "0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60"
	fixtureMsgID   = "0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60@example.com"
)

type wantRcpt struct {
	addr     string
	action   Action
	status   string
	diag     string // DiagnosticCode, exactly
	final    bool
	bounce   string // "Type/SubType" of the bounce; "" when Bounce says none
	suppress bool
}

type wantFeedback struct {
	typ, userAgent, mailFrom string
	rcpts                    []string
	jmrp                     bool
}

func openFixture(t testing.TB, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestParseFixtures reads every sample of testdata (their formats are
// listed in testdata/README.md) and checks what each yields: its kind,
// each recipient's action, status, diagnostic and bounce class, the email
// the VERP return path names and the original's Message-ID.
func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file      string
		kind      Kind
		rcpts     []wantRcpt
		verp      string // email id the VERP return path names; "" for none
		signed    bool
		msgID     string // the original's Message-ID
		autoReply string
		feedback  *wantFeedback
	}{
		{
			file: "postfix-failed.eml", kind: KindDSN, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{{addr: "nobody@example.org", action: ActionFailed, status: "5.1.1",
				diag:  "smtp; 550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in virtual mailbox table",
				final: true, bounce: "Permanent/NoEmail", suppress: true}},
		},
		{
			file: "postfix-delayed.eml", kind: KindDSN, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{{addr: "slow@example.org", action: ActionDelayed, status: "4.4.1",
				diag:  "X-Postfix; connect to mx.example.org[192.0.2.26]:25: Connection timed out",
				final: false}},
		},
		{
			// RFC 3464 Appendix A: a failure with a 4.X.X status (the MTA
			// gave up after 5 days of deferrals) is a Transient bounce.
			file: "rfc3464-simple.eml", kind: KindDSN, verp: fixtureEmailID, signed: false, msgID: fixtureMsgID,
			rcpts: []wantRcpt{{addr: "louisl@larry.slip.umd.edu", action: ActionFailed, status: "4.0.0",
				diag: "smtp; 426 connection timed out", final: true, bounce: "Transient/General"}},
		},
		{
			// Several recipients: failed, delayed, failed, delivered.
			file: "rfc3464-multi.eml", kind: KindDSN, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{
				{addr: "arathib@vnet.ibm.com", action: ActionFailed, status: "5.0.0",
					diag:  "smtp;  550 'arathib@vnet.IBM.COM' is not a registered gateway user",
					final: true, bounce: "Permanent/General"},
				{addr: "johnh@hpnjld.njd.hp.com", action: ActionDelayed, status: "4.0.0", final: false},
				{addr: "wsnell@sdcc13.ucsd.edu", action: ActionFailed, status: "5.0.0", diag: "smtp; 550 user unknown",
					final: true, bounce: "Permanent/NoEmail", suppress: true},
				{addr: "keith@cs.utk.edu", action: ActionDelivered, status: "2.0.0", final: true},
			},
		},
		{
			// The original is not attached: Gmail names it in
			// X-Original-Message-ID.
			file: "gmail-failure.eml", kind: KindDSN, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{{addr: "no-such-user@gmail.com", action: ActionFailed, status: "5.1.1",
				diag: "smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try " +
					"550-5.1.1 double-checking the recipient's email address for typos or 550-5.1.1 unnecessary spaces. " +
					"For more information, go to 550 5.1.1  https://support.google.com/mail/?p=NoSuchUser " +
					"a640c23a62f3a-aa5b1c2d3e4si1234567866b.512 - gsmtp",
				final: true, bounce: "Permanent/NoEmail", suppress: true}},
		},
		{
			// Exchange Online addresses its NDR to the From address and
			// base64-encodes the report: only the Message-ID matches it.
			file: "outlook-ndr.eml", kind: KindDSN, verp: "", msgID: fixtureMsgID,
			rcpts: []wantRcpt{{addr: "henry@contoso.com", action: ActionFailed, status: "5.1.10",
				diag:  "smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient henry@contoso.com not found by SMTP address lookup",
				final: true, bounce: "Permanent/NoEmail", suppress: true}},
		},
		{
			file: "exim-failed.eml", kind: KindBounce, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{
				{addr: "alice@example.net", action: ActionFailed, status: "5.2.1",
					diag: "smtp; 550 5.2.1 <alice@example.net>: mailbox disabled", final: true,
					bounce: "Permanent/NoEmail", suppress: true},
				{addr: "bob@example.net", action: ActionFailed, status: "5.2.2", diag: "smtp; 552 5.2.2 Mailbox full",
					final: true, bounce: "Transient/MailboxFull"},
			},
		},
		{
			file: "exim-delayed.eml", kind: KindBounce, verp: fixtureEmailID, signed: true,
			rcpts: []wantRcpt{{addr: "carol@example.net", action: ActionDelayed, status: "4.7.1",
				diag: "smtp; 451 4.7.1 Greylisted, please try again later", final: false}},
		},
		{
			file: "qmail-failure.eml", kind: KindBounce, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{
				{addr: "dave@example.org", action: ActionFailed, status: "5.1.1",
					diag: "smtp; 550 5.1.1 <dave@example.org>... User unknown", final: true,
					bounce: "Permanent/NoEmail", suppress: true},
				{addr: "erin@example.org", action: ActionFailed, status: "5.1.1",
					diag: "Sorry, no mailbox here by that name. (#5.1.1)", final: true,
					bounce: "Permanent/NoEmail", suppress: true},
			},
		},
		{
			file: "gmail-legacy-plain.eml", kind: KindBounce, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			rcpts: []wantRcpt{{addr: "frank@example.com", action: ActionFailed, status: "5.1.1",
				diag:  "smtp; 550 5.1.1 <frank@example.com>: Recipient address rejected: User unknown",
				final: true, bounce: "Permanent/NoEmail", suppress: true}},
		},
		{
			file: "rfc5965-arf.eml", kind: KindFeedback, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			feedback: &wantFeedback{typ: "abuse", userAgent: "SomeGenerator/1.0",
				mailFrom: "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com",
				rcpts:    []string{"user@example.com"}},
		},
		{
			// Yahoo redacts the recipient: the report names none.
			file: "yahoo-arf.eml", kind: KindFeedback, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			feedback: &wantFeedback{typ: "abuse", userAgent: "Yahoo!-Mail-Feedback/2.0",
				mailFrom: "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com"},
		},
		{
			// JMRP in ARF: the recipient only in the original's
			// X-HmXmrOriginalRecipient.
			file: "microsoft-jmrp-arf.eml", kind: KindFeedback, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			feedback: &wantFeedback{typ: "abuse", userAgent: "Microsoft Junk Mail Reporting Program",
				mailFrom: "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com",
				rcpts:    []string{"ivan@hotmail.com"}},
		},
		{
			file: "microsoft-jmrp-legacy.eml", kind: KindFeedback, verp: fixtureEmailID, signed: true, msgID: fixtureMsgID,
			feedback: &wantFeedback{typ: "abuse",
				mailFrom: "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com",
				rcpts:    []string{"judy@outlook.com"}, jmrp: true},
		},
		{file: "autoreply-vacation.eml", kind: KindAutoReply, verp: fixtureEmailID, signed: true,
			autoReply: "Auto-Submitted: auto-replied"},
		{
			// "Automatic reply: Undeliverable ...": the responder's subject
			// wins over the bounce word.
			file: "autoreply-outlook.eml", kind: KindAutoReply, autoReply: "subject",
		},
		{file: "autoreply-vacation-program.eml", kind: KindAutoReply, verp: fixtureEmailID, signed: true,
			autoReply: "X-Autoreply"},
		{file: "human-reply.eml", kind: KindUnknown},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rep, err := Parse(openFixture(t, tc.file), Limits{})
			require.NoError(t, err)
			require.Equal(t, tc.kind, rep.Kind)
			assert.False(t, rep.Truncated)
			assert.Equal(t, tc.msgID, rep.Original.MessageID, "original Message-ID")
			assert.Equal(t, tc.autoReply, rep.AutoReply)

			v, ok := rep.VERP()
			if tc.verp == "" {
				assert.False(t, ok, "VERP %v", v)
			} else {
				require.True(t, ok, "no VERP in %v", rep.ReturnPaths())
				assert.Equal(t, tc.verp, v.EmailID.String())
				assert.Equal(t, tc.signed, v.Verify(fixtureKey), "signature verifies")
				assert.False(t, v.Verify([]byte("another key")))
			}

			switch tc.kind {
			case KindDSN, KindBounce:
				require.NotNil(t, rep.DSN)
				require.Len(t, rep.DSN.Recipients, len(tc.rcpts))
				for i, w := range tc.rcpts {
					r := rep.DSN.Recipients[i]
					assert.Equal(t, w.addr, r.Address())
					assert.Equal(t, w.action, r.Action, w.addr)
					assert.Equal(t, w.status, r.Status, w.addr)
					assert.Equal(t, w.diag, r.DiagnosticCode, w.addr)
					assert.Equal(t, w.final, r.Final(), w.addr)
					b, ok := r.Bounce()
					if w.bounce == "" {
						assert.False(t, ok, "%s is no bounce: %+v", w.addr, b)
						continue
					}
					require.True(t, ok, w.addr)
					assert.Equal(t, w.bounce, b.Type+"/"+b.SubType, w.addr)
					assert.Equal(t, w.suppress, b.Suppress, w.addr)
					assert.NotEmpty(t, b.Message)
					if w.diag != "" {
						assert.Equal(t, []string{w.diag}, b.DiagnosticCode)
					} else {
						assert.Equal(t, []string{}, b.DiagnosticCode)
					}
				}
				assert.Nil(t, rep.Feedback)
			case KindFeedback:
				require.NotNil(t, rep.Feedback)
				f := rep.Feedback
				assert.Equal(t, tc.feedback.typ, f.Type)
				assert.True(t, f.Complaint())
				assert.Equal(t, tc.feedback.userAgent, f.UserAgent)
				assert.Equal(t, tc.feedback.mailFrom, f.OriginalMailFrom)
				assert.Equal(t, tc.feedback.rcpts, f.Recipients())
				assert.Equal(t, tc.feedback.jmrp, f.JMRP)
				assert.Nil(t, rep.DSN)
			default:
				assert.Nil(t, rep.DSN, "never a bounce")
				assert.Nil(t, rep.Feedback)
			}
		})
	}
}

// TestParseDSNFields checks the per-message fields and the remote MTA of
// the Postfix sample (RFC 3464 §2.2, §2.3.5) and the ARF fields of RFC
// 5965's sample.
func TestParseDSNFields(t *testing.T) {
	rep, err := Parse(openFixture(t, "postfix-failed.eml"), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "dns; mail.example.net", rep.DSN.ReportingMTA)
	assert.Equal(t, "Sun, 24 Nov 2024 15:00:01 +0000 (UTC)", rep.DSN.ArrivalDate)
	assert.Equal(t, "bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com", rep.DSN.Sender)
	assert.Equal(t, "dns; mx.example.org", rep.DSN.Recipients[0].RemoteMTA)
	assert.Equal(t, "Undelivered Mail Returned to Sender", rep.Subject)
	assert.Equal(t, "MAILER-DAEMON@mail.example.net", rep.From)
	assert.Equal(t, "Your invoice", rep.Original.Get("Subject"))

	rep, err = Parse(openFixture(t, "rfc3464-multi.eml"), Limits{})
	require.NoError(t, err)
	assert.Equal(t, fixtureEmailID, rep.DSN.EnvelopeID, "Original-Envelope-Id")

	rep, err = Parse(openFixture(t, "rfc5965-arf.eml"), Limits{})
	require.NoError(t, err)
	f := rep.Feedback
	assert.Equal(t, "1", f.Version)
	assert.Equal(t, "Thu, 8 Mar 2005 14:00:00 EDT", f.ArrivalDate)
	assert.Equal(t, []string{"example.com"}, f.ReportedDomain)
	assert.Equal(t, "198.51.100.7", f.SourceIP)
	assert.Equal(t, "dns; mail.example.com", f.ReportingMTA)
	assert.Equal(t, []string{"user@example.com"}, f.RemovalRecipient)

	rep, err = Parse(openFixture(t, "yahoo-arf.eml"), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "Sun, 24 Nov 2024 15:00:03 +0000", rep.Feedback.ArrivalDate, "Received-Date stands for Arrival-Date")

	rep, err = Parse(openFixture(t, "exim-failed.eml"), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "dns; mx.example.net", rep.DSN.Recipients[0].RemoteMTA)

	rep, err = Parse(openFixture(t, "qmail-failure.eml"), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "dns; mail.example.org", rep.DSN.ReportingMTA)
	assert.Equal(t, "dns; 192.0.2.50", rep.DSN.Recipients[0].RemoteMTA)
}

// TestFeedbackThatIsNoComplaint: RFC 6591 authentication failure reports
// and RFC 6650 not-spam reports are feedback reports but no complaints.
func TestFeedbackThatIsNoComplaint(t *testing.T) {
	for _, typ := range []string{"auth-failure", "not-spam"} {
		msg := "From: dmarc@receiver.example\r\nContent-Type: multipart/report; report-type=feedback-report; boundary=B\r\n\r\n" +
			"--B\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: " + typ + "\r\nUser-Agent: x/1\r\nVersion: 1\r\n" +
			"Original-Rcpt-To: <a@receiver.example>\r\n--B--\r\n"
		rep, err := Parse(stringsReader(msg), Limits{})
		require.NoError(t, err)
		require.Equal(t, KindFeedback, rep.Kind)
		assert.Equal(t, typ, rep.Feedback.Type)
		assert.False(t, rep.Feedback.Complaint(), typ)
	}
}

// TestAutoRepliesAreNotBounces: RFC 3834 responses, whatever their words,
// never yield recipients to bounce.
func TestAutoRepliesAreNotBounces(t *testing.T) {
	for _, tc := range []struct{ name, msg, why string }{
		{"auto-replied", "From: a@example.org\r\nAuto-Submitted: auto-replied\r\nSubject: Re: hi\r\n\r\nAway.\r\n", "Auto-Submitted: auto-replied"},
		{"auto-generated", "From: a@example.org\r\nAuto-Submitted: auto-generated; owner-email=\"a@example.org\"\r\nSubject: hi\r\n\r\nx\r\n", "Auto-Submitted: auto-generated"},
		{"X-Autorespond", "From: a@example.org\r\nX-Autorespond: 1\r\nSubject: Re: hi\r\n\r\nx\r\n", "X-Autorespond"},
		{"precedence auto_reply", "From: a@example.org\r\nPrecedence: auto_reply\r\nSubject: Re: hi\r\n\r\nx\r\n", "Precedence: auto_reply"},
		{"precedence junk", "From: a@example.org\r\nPrecedence: junk\r\nSubject: Re: hi\r\n\r\nx\r\n", "Precedence: junk"},
		{"vacation subject", "From: a@example.org\r\nSubject: Abwesenheitsnotiz: Ihre Rechnung\r\n\r\nx\r\n", "subject"},
		{"encoded vacation subject", "From: a@example.org\r\nSubject: =?utf-8?q?R=C3=A9ponse_automatique=3A_facture?=\r\n\r\nx\r\n", "subject"},
		{"vacation that mentions a failure notice", "From: a@example.org\r\nAuto-Submitted: auto-replied\r\nSubject: Out of office\r\n\r\nThis is the qmail-send program? No, I'm away. 550 5.1.1\r\n", "Auto-Submitted: auto-replied"},
		{"autoreply with a bounce word", "From: a@example.org\r\nX-Autoreply: yes\r\nSubject: Undeliverable until Monday\r\n\r\nx\r\n", "X-Autoreply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Parse(stringsReader(tc.msg), Limits{})
			require.NoError(t, err)
			assert.Equal(t, KindAutoReply, rep.Kind)
			assert.Equal(t, tc.why, rep.AutoReply)
			assert.Nil(t, rep.DSN)
		})
	}
	// Auto-Submitted: no is an ordinary message (RFC 3834 §5).
	rep, err := Parse(stringsReader("From: a@example.org\r\nAuto-Submitted: no\r\nSubject: Re: hi\r\n\r\nthanks\r\n"), Limits{})
	require.NoError(t, err)
	assert.Equal(t, KindUnknown, rep.Kind)
}

// TestPlainBounceHeuristics covers the non-standard bounce classifier on
// shapes the fixtures do not: a bounce recognised by its words only, a
// sendmail transcript, prose naming the recipient, a bounce naming no
// recipient.
func TestPlainBounceHeuristics(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		kind      Kind
		rcpts     []string
		status    string
		bounce    string
	}{
		{
			name: "sendmail transcript",
			msg: "From: Mail Delivery Subsystem <MAILER-DAEMON@mx.example.org>\r\nTo: bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60@send.example.com\r\n" +
				"Subject: Returned mail: see transcript for details\r\n\r\n" +
				"   ----- The following addresses had permanent fatal errors -----\r\n<gus@example.org>\r\n    (reason: 550 5.1.1 User unknown)\r\n\r\n" +
				"   ----- Transcript of session follows -----\r\n... while talking to mx.example.org.:\r\n>>> RCPT To:<gus@example.org>\r\n<<< 550 5.1.1 User unknown\r\n",
			kind: KindBounce, rcpts: []string{"gus@example.org"}, status: "5.1.1", bounce: "Permanent/NoEmail",
		},
		{
			name: "words only, no daemon sender",
			msg: "From: postoffice@example.org\r\nSubject: failure notice\r\n\r\nI'm afraid I wasn't able to deliver your message to the following addresses.\r\n" +
				"This is a permanent error; I've given up.\r\n\r\n<hal@example.org>:\r\nmailbox is full: quota exceeded (#5.2.2)\r\n",
			kind: KindBounce, rcpts: []string{"hal@example.org"}, status: "5.2.2", bounce: "Transient/MailboxFull",
		},
		{
			name: "prose",
			msg: "From: postmaster@example.org\r\nSubject: Undeliverable: hi\r\n\r\nYour message to ida@example.org couldn't be delivered.\r\n" +
				"Remote server returned '550 5.4.1 Recipient address rejected: Access denied'\r\n",
			kind: KindBounce, rcpts: []string{"ida@example.org"}, status: "5.4.1", bounce: "Permanent/General",
		},
		{
			name: "sendmail problem list",
			msg: "From: Mail Delivery Subsystem <MAILER-DAEMON@mx.example.org>\r\nSubject: Returned mail: User unknown\r\n\r\n" +
				"   ----- The following addresses had delivery problems -----\r\n<kai@example.org>  (unrecoverable error)\r\n",
			kind: KindBounce, rcpts: []string{"kai@example.org"}, status: "", bounce: "Undetermined/Undetermined",
		},
		{
			name: "no recipient named",
			msg:  "From: MAILER-DAEMON@example.org\r\nSubject: Mail delivery failed\r\n\r\nSomething went wrong.\r\n",
			kind: KindBounce, rcpts: nil,
		},
		{
			name: "html only",
			msg: "From: postmaster@example.org\r\nSubject: Undeliverable: hi\r\nContent-Type: text/html\r\n\r\n" +
				"<html><head><style>p{}</style></head><body><p>Delivery has failed to these recipients or groups:</p><p><b>jo@example.org</b></p>" +
				"<p>Remote server returned '550 5.1.1 User unknown'</p></body></html>\r\n",
			kind: KindBounce, rcpts: []string{"jo@example.org"}, status: "5.1.1", bounce: "Permanent/NoEmail",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Parse(stringsReader(tc.msg), Limits{})
			require.NoError(t, err)
			require.Equal(t, tc.kind, rep.Kind)
			require.NotNil(t, rep.DSN)
			var got []string
			for _, r := range rep.DSN.Recipients {
				got = append(got, r.Address())
			}
			require.Equal(t, tc.rcpts, got)
			if len(got) == 0 {
				return
			}
			r := rep.DSN.Recipients[0]
			assert.Equal(t, tc.status, r.Status)
			b, ok := r.Bounce()
			require.True(t, ok)
			assert.Equal(t, tc.bounce, b.Type+"/"+b.SubType)
		})
	}
}

// TestBounceMatchesSynchronousClassification: an asynchronous bounce gets
// exactly the class bounce.Classify gives the same reply during the
// SMTP transaction.
func TestBounceMatchesSynchronousClassification(t *testing.T) {
	for _, tc := range []struct {
		code     int
		enhanced string
		text     string
	}{
		{550, "5.1.1", "The email account that you tried to reach does not exist."},
		{552, "5.2.2", "The email account that you tried to reach is over quota."},
		{550, "5.7.26", "Unauthenticated email from x.test is not accepted due to domain's DMARC policy."},
		{554, "5.6.0", "Attachment of type .exe not allowed"},
		{550, "5.4.1", "Recipient address rejected: Access denied"},
		{450, "4.2.2", "Mailbox full, try later"},
		{554, "5.3.4", "Message size exceeds fixed limit"},
	} {
		r := Recipient{FinalRecipient: "a@example.org", Action: ActionFailed, Status: tc.enhanced,
			DiagnosticCode: "smtp; " + replyCode(tc.code, tc.enhanced) + " " + tc.text}
		b, ok := r.Bounce()
		require.True(t, ok)
		want := bounce.Classify(tc.code, tc.enhanced, tc.text)
		assert.Equal(t, want.Type, b.Type, r.DiagnosticCode)
		assert.Equal(t, want.SubType, b.SubType, r.DiagnosticCode)
		assert.Equal(t, want.Suppress, b.Suppress, r.DiagnosticCode)
	}
}

// TestRecipientBounce covers Recipient.Bounce on its own: the status
// class decides, actions other than failed are no bounce.
func TestRecipientBounce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        Recipient
		ok       bool
		want     string
		suppress bool
		message  string
	}{
		{"delayed is no bounce yet", Recipient{Action: ActionDelayed, Status: "4.4.1"}, false, "", false, ""},
		{"delivered", Recipient{Action: ActionDelivered, Status: "2.0.0"}, false, "", false, ""},
		{"relayed", Recipient{Action: ActionRelayed, Status: "2.0.0"}, false, "", false, ""},
		{"expanded", Recipient{Action: ActionExpanded, Status: "2.0.0"}, false, "", false, ""},
		{"failed after deferrals is transient", Recipient{Action: ActionFailed, Status: "4.4.7",
			DiagnosticCode: "smtp; 421 4.4.2 connection dropped"}, true, "Transient/General", false,
			"The recipient's mail server rejected the message: 421 4.4.2 connection dropped"},
		{"policy rejection never suppresses", Recipient{Action: ActionFailed, Status: "5.7.1",
			DiagnosticCode: "smtp; 550 5.7.1 Message rejected as spam"}, true, "Transient/ContentRejected", false,
			"The recipient's mail server rejected the message for its content or by policy: 550 5.7.1 Message rejected as spam"},
		{"status wins over a reply of the other class", Recipient{Action: ActionFailed, Status: "5.1.1",
			DiagnosticCode: "smtp; 450 4.1.1 try later"}, true, "Permanent/NoEmail", true,
			"The recipient's address does not exist or accepts no mail: 450 4.1.1 try later"},
		{"reply quoted in a Postfix diagnostic", Recipient{Action: ActionFailed, Status: "5.0.0",
			DiagnosticCode: "X-Postfix; host mx.example.org[192.0.2.1] said: 550 5.1.1 <a@example.org>: User unknown (in reply to RCPT TO command)"},
			true, "Permanent/NoEmail", true,
			"The recipient's address does not exist or accepts no mail: 550 5.1.1 <a@example.org>: User unknown (in reply to RCPT TO command)"},
		{"no status and no code: the text", Recipient{Action: ActionFailed, DiagnosticCode: "x-unix; user unknown"},
			true, "Permanent/NoEmail", true, "The recipient's address does not exist or accepts no mail: user unknown"},
		{"nothing known is undetermined", Recipient{Action: ActionFailed}, true, "Undetermined/Undetermined", false,
			"The recipient's mail server reported a failure without saying why."},
		{"malformed status ignored", Recipient{Action: ActionFailed, Status: "",
			DiagnosticCode: "smtp; 550 5.x.1 go away"}, true, "Permanent/General", false,
			"The recipient's mail server rejected the message: 550 5.x.1 go away"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := tc.r.Bounce()
			require.Equal(t, tc.ok, ok)
			if !ok {
				return
			}
			assert.Equal(t, tc.want, b.Type+"/"+b.SubType)
			assert.Equal(t, tc.suppress, b.Suppress)
			assert.Equal(t, tc.message, b.Message)
			assert.NotNil(t, b.DiagnosticCode)
		})
	}
}

func TestDiagnosticReply(t *testing.T) {
	for _, tc := range []struct {
		in       string
		code     int
		enhanced string
		text     string
	}{
		{"smtp; 550 5.1.1 user unknown", 550, "5.1.1", "user unknown"},
		{"smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; not found", 550, "5.1.10", "RESOLVER.ADR.RecipientNotFound; not found"},
		{"smtp; 550-5.1.1 a 550-5.1.1 b 550 5.1.1  c", 550, "5.1.1", "a b c"},
		{"smtp; 554 Transaction failed", 554, "", "Transaction failed"},
		{"X-Postfix; host mx[192.0.2.1] said: 452 4.2.2 full (in reply to RCPT TO command)", 452, "4.2.2", "full (in reply to RCPT TO command)"},
		{"X-Postfix; connect to mx.example.org[192.0.2.26]:25: Connection timed out", 0, "", "connect to mx.example.org[192.0.2.26]:25: Connection timed out"},
		{"smtp; 250 ok", 0, "", "250 ok"},
		{"", 0, "", ""},
	} {
		code, enh, text := diagnosticReply(tc.in)
		assert.Equal(t, tc.code, code, tc.in)
		assert.Equal(t, tc.enhanced, enh, tc.in)
		assert.Equal(t, tc.text, text, tc.in)
	}
}
