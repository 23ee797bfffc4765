package delivery_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func insertEmail(t *testing.T, st *store.Store, rcpts ...string) store.Email {
	t.Helper()
	return acttest.InsertEmail(t, st, rcpts...)
}

func insertEmailAt(t *testing.T, st *store.Store, at time.Time, rcpts ...string) store.Email {
	t.Helper()
	return acttest.InsertEmailAt(t, st, at, rcpts...)
}

// run executes an activity the way a worker does (with activity info).
func run[I, O any](t *testing.T, fn any, in I) (O, error) {
	t.Helper()
	return acttest.Run[I, O](t, fn, in)
}

func TestPrepareBuildsStoresAndGroups(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	acts := delivery.New(delivery.Config{Hostname: "mx.example"}, st, nil, nil, nil)
	e := insertEmail(t, st, "delivered@posthaste.test", "complained+x@posthaste.test", "a@one.test", "b@one.test", "c@two.test")

	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.False(t, res.Skip)
	require.Equal(t, []contract.SandboxRecipient{
		{Address: "delivered@posthaste.test", Events: []string{"delivered"}},
		{Address: "complained+x@posthaste.test", Events: []string{"delivered", "complained"}},
	}, res.Sandbox)
	require.Len(t, res.Groups, 2)
	require.Equal(t, "one.test", res.Groups[0].Domain)
	require.Equal(t, []string{"a@one.test", "b@one.test"}, res.Groups[0].Recipients)
	require.Equal(t, "two.test", res.Groups[1].Domain)

	msg, err := st.Emails.Message(context.Background(), e.ID)
	require.NoError(t, err)
	mr, err := mail.CreateReader(bytes.NewReader(msg))
	require.NoError(t, err)
	subj, err := mr.Header.Subject()
	require.NoError(t, err)
	require.Equal(t, "Hi ✓", subj)
	require.Equal(t, "7", mr.Header.Get("X-Entity-Ref-ID"))
	mid, err := mr.Header.MessageID()
	require.NoError(t, err)
	require.Equal(t, e.ID.String()+"@posthaste.test", mid)
	require.Contains(t, mr.Header.Get("Content-Type"), "multipart/alternative", "text generated from html")

	// A retry keeps the first message and records `sent` once.
	_, err = run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	again, err := st.Emails.Message(context.Background(), e.ID)
	require.NoError(t, err)
	require.Equal(t, msg, again)
	evs, err := st.Emails.Events(context.Background(), e.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2, "queued, sent")
}

func TestPrepareSkipsCanceled(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	acts := delivery.New(delivery.Config{}, st, nil, nil, nil)
	e := insertEmail(t, st, "delivered@posthaste.test")
	require.NoError(t, st.Emails.RecordEvents(context.Background(), e.ID, []store.Event{{Type: store.EventCanceled}}))
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.True(t, res.Skip)
}

func TestDeliverRecordsOutcomesAndRetriesOnlyDeferred(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{
		Rcpt: func(rcpt string, n int) error {
			switch {
			case strings.HasPrefix(rcpt, "gone@"):
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
			case strings.HasPrefix(rcpt, "grey@") && n == 1:
				return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted"}
			}
			return nil
		},
	})
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	client, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback})
	require.NoError(t, err)
	defer client.Close()
	acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil)

	e := insertEmail(t, st, "ok@dest.test", "gone@dest.test", "grey@dest.test")
	_, err = run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	in := contract.DeliverInput{EmailID: e.ID.String(), Domain: "dest.test", TLS: "opportunistic",
		Recipients: []string{"ok@dest.test", "gone@dest.test", "grey@dest.test"}}

	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, in)
	require.ErrorContains(t, err, "1 of 3 recipients deferred", "the greylisted recipient makes the activity retry")
	status := recipientStatus(t, st, e)
	require.Equal(t, map[string]string{"ok@dest.test": "delivered", "gone@dest.test": "bounced", "grey@dest.test": "delivery_delayed"}, status)

	// The retry delivers only the deferred recipient.
	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, in)
	require.NoError(t, err)
	status = recipientStatus(t, st, e)
	require.Equal(t, "delivered", status["grey@dest.test"])
	msgs := mx.Messages()
	require.Len(t, msgs, 2)
	require.Equal(t, []string{"ok@dest.test"}, msgs[0].To)
	require.Equal(t, []string{"grey@dest.test"}, msgs[1].To)
	require.Equal(t, fmt.Sprintf("bounces+%s@out.example", e.ID), msgs[0].From, "sandbox-sender mail returns to this host")

	evs, err := st.Emails.Events(context.Background(), e.ID)
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type+":"+ev.Recipient)
	}
	require.Equal(t, []string{"queued:", "sent:", "delivered:ok@dest.test", "bounced:gone@dest.test",
		"delivery_delayed:grey@dest.test", "delivered:grey@dest.test"}, types)
	require.Contains(t, fmt.Sprint(evs[3].Detail["message"]), "550")

	// The permanent bounce put the address on the team's suppression list,
	// and only it.
	sp, err := storetest.SuppressionByEmail(context.Background(), st, e.TeamID, "Gone@dest.test")
	require.NoError(t, err)
	require.Equal(t, store.SuppressionBounce, sp.Reason)
	require.Equal(t, e.ID, *sp.EmailID)
	sup, err := st.Emails.Suppressed(context.Background(), e.TeamID, []string{"ok@dest.test", "grey@dest.test", "gone@dest.test"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"gone@dest.test": true}, sup)

	// Everything final: a further retry sends nothing.
	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, in)
	require.NoError(t, err)
	require.Len(t, mx.Messages(), 2)
}

func recipientStatus(t *testing.T, st *store.Store, e store.Email) map[string]string {
	t.Helper()
	return acttest.RecipientStatus(t, st, e)
}
