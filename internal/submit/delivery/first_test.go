package delivery_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/logtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Prepare's first attempt of a local group (DeliveryGroup.First), against
// a real MX: a deferral comes back as the reason to retry, recorded once
// as delivery_delayed, with nothing answered; an MX slower than the
// attempt's time is left to the regular Deliver (the attempt ends, the
// recipient keeps no outcome); a permanent failure comes back as its
// reason, not as Prepare's error, so the workflow ends the group failed.
func TestPrepareMakesTheFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	release := make(chan struct{})
	mx, client := destMX(t, smtptest.Options{
		Rcpt: func(rcpt string, _ int) error {
			if rcpt == "later@dest.test" {
				return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted"}
			}
			return nil
		},
		Data: func(rcpts []string, _ int) error {
			if rcpts[0] == "slow@dest.test" {
				<-release // answers once the attempt has given up
			}
			return nil
		},
	})
	defer close(release)
	acts := delivery.New(delivery.Config{Hostname: "out.example", FirstAttempt: 500 * time.Millisecond}, st, client, nil, nil).
		WithLocalDelivery([]string{delivery.DefaultRegion})
	prepare := func(e store.Email) contract.DeliveryGroup {
		t.Helper()
		res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
		require.NoError(t, err)
		require.Len(t, res.Groups, 1)
		require.NotNil(t, res.Groups[0].First)
		return res.Groups[0]
	}

	deferred := insertEmail(t, st, "later@dest.test")
	g := prepare(deferred)
	require.False(t, g.First.Done)
	require.Contains(t, g.First.Retry, "451 4.7.1 greylisted")
	require.Empty(t, g.First.Answered)
	require.Empty(t, g.First.Permanent)
	evs, err := st.Emails.Events(ctx, deferred.ID)
	require.NoError(t, err)
	var delayed int
	for _, ev := range evs {
		if ev.Type == store.EventDeliveryDelayed {
			delayed++
		}
	}
	require.Equal(t, 1, delayed)

	slow := insertEmail(t, st, "slow@dest.test")
	g = prepare(slow)
	require.False(t, g.First.Done)
	require.NotEmpty(t, g.First.Retry)
	require.Equal(t, map[string]string{"slow@dest.test": "sent"}, recipientStatus(t, st, slow),
		"no outcome: the regular Deliver takes the recipient over")

	require.Empty(t, mx.Messages(), "neither was accepted")

	refused := delivery.New(delivery.Config{Hostname: "out.example"}, st, privateOnly(t), nil, nil).
		WithLocalDelivery([]string{delivery.DefaultRegion})
	e := insertEmail(t, st, "a@dest.test")
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, refused.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err, "a permanent failure of the attempt is its result, not Prepare's error")
	require.Contains(t, res.Groups[0].First.Permanent, "egress policy refuses")
	require.False(t, res.Groups[0].First.Done)
}

// privateOnly is a client whose only MX, for dest.test, is on loopback,
// which the production egress policy refuses.
func privateOnly(t *testing.T) *mta.Client {
	t.Helper()
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	client, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// At debug level Prepare and its first attempt each log a trace line
// naming the email, the step's time and the time since acceptance
// (docs/operations.md, "Why was this email slow?").
func TestPrepareTracesTheEmailsSteps(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, client := destMX(t, smtptest.Options{})
	var buf logtest.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, logger).
		WithLocalDelivery([]string{delivery.DefaultRegion})
	e := insertEmail(t, st, "a@dest.test")
	_, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)

	steps := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["email_id"] == e.ID.String() {
			steps[rec["msg"].(string)] = rec
		}
	}
	for _, msg := range []string{"email prepared", "delivery attempt"} {
		rec, ok := steps[msg]
		require.True(t, ok, "no %q line in %s", msg, buf.String())
		require.GreaterOrEqual(t, rec["took_ms"], 0.0)
		require.GreaterOrEqual(t, rec["since_accepted_ms"], rec["took_ms"])
	}
	require.Equal(t, "delivered", steps["delivery attempt"]["first_status"])
	require.Equal(t, "dest.test", steps["delivery attempt"]["rcpt_domain"])
}

// Prepare attempts every local group at once: two recipient domains, one
// message each, both recorded delivered.
func TestPrepareAttemptsEveryGroup(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	for _, d := range []string{"one.test", "two.test"} {
		dns.AddMX(d, "mx."+d, 10)
		dns.AddA("mx."+d, "127.0.0.1")
	}
	client, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	acts := delivery.New(delivery.Config{Hostname: "out.example"}, st, client, nil, nil).
		WithLocalDelivery([]string{delivery.DefaultRegion})
	e := insertEmail(t, st, "a@one.test", "b@two.test", "c@one.test")
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Len(t, res.Groups, 2)
	for _, g := range res.Groups {
		require.Equal(t, &contract.DeliverLocalResult{Done: true}, g.First, g.Domain)
	}
	require.Len(t, mx.Messages(), 2, "a message per domain")
	require.Equal(t, map[string]string{"a@one.test": "delivered", "b@two.test": "delivered", "c@one.test": "delivered"},
		recipientStatus(t, st, e))
}
