package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/smtpgw"
)

// TestScaleOutTopology runs `temporal`, two `worker` processes and two
// `smtp` gateways as separate OS processes against one PostgreSQL, the
// shape of a scaled-out deployment on one machine, and shows the work
// split between them: emails submitted concurrently to both gateways
// (each counts its own acceptances on its own metrics port) are all
// delivered to a loopback MX by workers polling the same task queues.
// Which worker a workflow lands on is Temporal's choice, so the test does
// not bet on a split of the first round: it then stops the worker that
// did more of it and sends a second round, which the other worker must
// then do alone. Each worker has thus done work, whatever the first
// round's split was, and the second round shows that a worker leaving
// loses nothing. It shows where work goes, not a speed-up: the processes
// share this machine's cores.
func TestScaleOutTopology(t *testing.T) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("member.test", "mx.member.test", 10)
	dns.AddA("mx.member.test", "127.0.0.1")

	dbURL := pgtest.NewDatabase(t)
	tport := freePort(t)
	base := map[string]string{
		"DATABASE_URL":               dbURL,
		"POSTHASTE_DATA_DIR":         t.TempDir(),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(tport),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"TEMPORAL_ADDRESS":           fmt.Sprintf("127.0.0.1:%d", tport),
		"POSTHASTE_DNS_SERVER":       dns.Addr(),
		"POSTHASTE_MX_PORT":          fmt.Sprint(mx.Port()),
		"POSTHASTE_HOSTNAME":         "posthaste.example",
		// The loopback MX, as an operator would allow an internal relay.
		"POSTHASTE_EGRESS_ALLOW": "127.0.0.1/32",
		// The test's own bursts stay under the team's rate limit: the
		// limit is not what this test is about.
		"POSTHASTE_DEFAULT_RATE_LIMIT": "1000",
		"POSTHASTE_LOG_LEVEL":          "warn",
	}
	out, code := runProcess(t, base, "migrate")
	require.Equal(t, 0, code, out)
	// The sandbox sender writes to the team's own members: the owner's
	// domain has the loopback MX, so every email is a real SMTP delivery
	// by a Deliver activity on a region's queue.
	out, code = runProcess(t, base, "admin create-team --name Scale --email owner@member.test")
	require.Equal(t, 0, code, out)
	var created struct {
		APIKey string `json:"api_key"`
		TeamID string `json:"team_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &created))
	team, err := uuid.Parse(created.TeamID)
	require.NoError(t, err)

	startProcess(t, base, "temporal", "Temporal is ready")
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	workers := make([]*testProcess, 2)
	for i := range workers {
		env := with(map[string]string{"POSTHASTE_METRICS_ADDR": fmt.Sprintf("127.0.0.1:%d", freePort(t))})
		workers[i] = startProcess(t, env, "worker", `"msg":"ready"`)
	}
	certDir := t.TempDir()
	certFile, keyFile := filepath.Join(certDir, "c.pem"), filepath.Join(certDir, "k.pem")
	_, err = smtpgw.EnsureSelfSigned(certFile, keyFile, []string{"localhost"})
	require.NoError(t, err)
	type gateway struct{ smtpAddr, metricsAddr string }
	gateways := make([]gateway, 2)
	for i := range gateways {
		g := gateway{
			smtpAddr:    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			metricsAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		}
		env := with(map[string]string{
			"POSTHASTE_SMTP_LISTEN":   "tls://" + g.smtpAddr,
			"POSTHASTE_TLS_CERT_FILE": certFile,
			"POSTHASTE_TLS_KEY_FILE":  keyFile,
			"POSTHASTE_METRICS_ADDR":  g.metricsAddr,
		})
		startProcess(t, env, "smtp", `"msg":"ready"`)
		gateways[i] = g
	}

	st, err := store.Open(context.Background(), store.Config{URL: dbURL})
	require.NoError(t, err)
	defer st.Close()
	pem, err := os.ReadFile(certFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))

	// submit sends perGateway messages to each gateway at once, over
	// four connections per gateway, and returns the accepted ids.
	submit := func(round string, perGateway int) []uuid.UUID {
		t.Helper()
		const conns = 4
		var mu sync.Mutex
		var ids []uuid.UUID
		var errs []error
		var wg sync.WaitGroup
		for gi, g := range gateways {
			for c := range conns {
				n := perGateway / conns
				if c < perGateway%conns {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := submitOverSMTP(g.smtpAddr, roots, created.APIKey, fmt.Sprintf("%s g%d c%d", round, gi, c), n)
					mu.Lock()
					defer mu.Unlock()
					ids = append(ids, got...)
					if err != nil {
						errs = append(errs, err)
					}
				}()
			}
		}
		wg.Wait()
		require.Empty(t, errs)
		require.Len(t, ids, 2*perGateway)
		return ids
	}
	// waitDelivered waits until every email of ids is delivered.
	waitDelivered := func(ids []uuid.UUID) {
		t.Helper()
		eventually(t, 45*time.Second, func() error {
			for _, id := range ids {
				e, err := st.Emails.GetEmail(context.Background(), team, id)
				require.NoError(t, err)
				if e.LastEvent == store.EventFailed || e.LastEvent == store.EventBounced {
					evs, err := st.Emails.Events(context.Background(), id)
					require.NoError(t, err)
					t.Fatalf("email %s ended %s: %+v", id, e.LastEvent, evs)
				}
				if e.LastEvent != store.EventDelivered {
					return fmt.Errorf("email %s still %s", id, e.LastEvent)
				}
			}
			return nil
		})
	}
	type workDone struct{ sent, delivered float64 }
	workOf := func(w *testProcess) workDone {
		t.Helper()
		m := scrapeMetrics(t, w.env["POSTHASTE_METRICS_ADDR"])
		return workDone{sent: m[`posthaste_email_events_total{type="sent"}`],
			delivered: m[`posthaste_deliveries_total{outcome="delivered"}`]}
	}

	// Round one: 40 emails, 20 to each gateway, both workers up.
	const first, second = 20, 5
	ids := submit("one", first)
	waitDelivered(ids)
	mx.WaitMessages(t, 2*first, 10*time.Second)
	before := []workDone{workOf(workers[0]), workOf(workers[1])}
	t.Logf("round one (%d emails): worker 1 prepared %v and delivered %v, worker 2 prepared %v and delivered %v",
		2*first, before[0].sent, before[0].delivered, before[1].sent, before[1].delivered)
	require.Equal(t, float64(2*first), before[0].sent+before[1].sent, "each email was prepared once, by one of the workers")
	require.Equal(t, float64(2*first), before[0].delivered+before[1].delivered, "each email was delivered once")

	// Round two: the worker that prepared more leaves; the other one does
	// all of the next 10 emails.
	gone, stays := 0, 1
	if before[1].sent > before[0].sent {
		gone, stays = 1, 0
	}
	workers[gone].stop(t)
	ids2 := submit("two", second)
	waitDelivered(ids2)
	msgs := mx.WaitMessages(t, 2*(first+second), 10*time.Second)
	require.Len(t, msgs, 2*(first+second), "one message per email at the MX")
	after := workOf(workers[stays])
	require.Equal(t, before[stays].sent+2*second, after.sent, "the remaining worker prepared round two")
	require.Equal(t, before[stays].delivered+2*second, after.delivered, "the remaining worker delivered round two")
	require.Positive(t, before[gone].sent, "worker %d did work", gone+1)
	require.Positive(t, after.sent, "worker %d did work", stays+1)

	// Each gateway accepted its own share, counted on its own metrics port.
	for i, g := range gateways {
		m := scrapeMetrics(t, g.metricsAddr)
		require.Equal(t, float64(first+second), m[`posthaste_smtp_transactions_total{result="accepted"}`], "gateway %d", i+1)
		require.Equal(t, float64(first+second), m[`posthaste_emails_accepted_total{source="smtp"}`], "gateway %d", i+1)
	}
}

// queuedID is the email id in the gateway's 250 reply to DATA (the text
// after the code).
var queuedID = regexp.MustCompile(`Ok: queued as ([0-9a-f-]{36})$`)

// submitOverSMTP authenticates once at the gateway addr (implicit TLS)
// and submits n messages from the sandbox sender to the team's owner,
// returning the ids of the "queued as" replies. It reports errors instead
// of failing the test, since it runs on goroutines of its own.
func submitOverSMTP(addr string, roots *x509.CertPool, key, label string, n int) ([]uuid.UUID, error) {
	c, err := smtp.DialTLS(addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Auth(sasl.NewPlainClient("", "posthaste", key)); err != nil {
		return nil, fmt.Errorf("AUTH: %w", err)
	}
	var ids []uuid.UUID
	for i := range n {
		if err := c.Mail("onboarding@posthaste.test", nil); err != nil {
			return ids, fmt.Errorf("MAIL: %w", err)
		}
		if err := c.Rcpt("owner@member.test", nil); err != nil {
			return ids, fmt.Errorf("RCPT: %w", err)
		}
		w, err := c.Data()
		if err != nil {
			return ids, fmt.Errorf("DATA: %w", err)
		}
		if _, err := fmt.Fprintf(w, "From: onboarding@posthaste.test\r\nTo: owner@member.test\r\n"+
			"Subject: scale-out %s #%d\r\n\r\nHello.\r\n", label, i); err != nil {
			return ids, err
		}
		res, err := w.CloseWithResponse()
		if err != nil {
			return ids, fmt.Errorf("end of DATA: %w", err)
		}
		m := queuedID.FindStringSubmatch(res.StatusText)
		if m == nil {
			return ids, fmt.Errorf("end of DATA answered 250 %s", res.StatusText)
		}
		ids = append(ids, uuid.MustParse(m[1]))
	}
	return ids, c.Quit()
}

// scrapeMetrics reads a process's /metrics on its metrics address and
// returns each sample by its series (name and labels, as written).
func scrapeMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	samples := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		samples[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return samples
}
