package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
)

// BenchmarkMiddlewareCost measures what authentication, the rate limiter
// and the request log cost per request: the throughput of GET /emails/{id}
// (a real email on the real database, over loopback HTTP with keep-alive,
// 8 concurrent clients) with them off and on, in one run, interleaving
// short rounds of each variant so drift on a shared machine hits all
// alike. It reports requests per second of each variant and the ratio
// on/off (1.0 = free). Run it with
//
//	GOTOOLCHAIN=local go test -run '^$' -bench MiddlewareCost ./api/
func BenchmarkMiddlewareCost(b *testing.B) {
	ctx := context.Background()
	st := storetest.New(b)
	creds, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "bench", "bench@example.com")
	if err != nil {
		b.Fatal(err)
	}
	team := uuid.MustParse(creds.TeamID)
	sub := submit.New(submit.Config{Store: submit.StoreOf(st)})
	acc, err := sub.SendWithOptions(ctx, submit.Sender{TeamID: team}, mustDecode(b), submit.SendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	path := "/emails/" + acc.ID.String()
	authn := auth.NewAuthenticator(st.Accounts, time.Second)
	p, err := authn.Authenticate(ctx, creds.APIKey)
	if err != nil {
		b.Fatal(err)
	}

	type variant struct {
		name string
		cfg  func(*api.Config)
	}
	variants := []variant{
		{"off", func(c *api.Config) { c.Unauthenticated = &p }},
		{"auth", func(c *api.Config) {}},
		{"auth+limiter", func(c *api.Config) { c.Limiter = ratelimit.NewLocal(ratelimit.LocalConfig{}) }},
		{"on", func(c *api.Config) {
			c.Limiter = ratelimit.NewLocal(ratelimit.LocalConfig{})
			c.RequestLog = newBenchLog(b, st.Insights)
		}},
	}
	servers := make([]*httptest.Server, len(variants))
	for i, v := range variants {
		reg := prometheus.NewRegistry()
		cfg := api.Config{Auth: authn, Submit: sub, Emails: submit.NewEmails(st.Emails), Usage: usage.New(st.Insights, st.Accounts),
			Metrics: telemetry.NewMetrics(reg), DefaultRateLimit: 1_000_000}
		v.cfg(&cfg)
		h, err := api.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		servers[i] = httptest.NewServer(h)
		defer servers[i].Close()
	}

	const conc, round, rounds = 8, 250 * time.Millisecond, 15
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	done := make([]int64, len(variants))
	spent := make([]time.Duration, len(variants))
	var ratios []float64 // on/off of each round
	for r := range rounds + 1 {
		per := make([]float64, len(variants))
		for i := range variants {
			n, d := hammer(b, client, "GET", servers[i].URL+path, creds.APIKey, nil, conc, round)
			per[i] = float64(n) / d.Seconds()
			if r > 0 { // the first round warms connections and caches
				done[i] += n
				spent[i] += d
			}
		}
		if r > 0 {
			ratios = append(ratios, per[len(per)-1]/per[0])
		}
	}
	rate := func(i int) float64 { return float64(done[i]) / spent[i].Seconds() }
	for i, v := range variants {
		b.ReportMetric(rate(i), v.name+"_req/s")
	}
	slices.Sort(ratios)
	b.ReportMetric(rate(len(variants)-1)/rate(0), "on/off")
	b.ReportMetric(ratios[len(ratios)/2], "on/off_median_round")
	b.Logf("GET /emails/{id}, %d clients, %d rounds of %v: off %.0f/s, auth %.0f/s, auth+limiter %.0f/s, "+
		"auth+limiter+log (on) %.0f/s; on/off %.2f overall, %.2f median of rounds",
		conc, rounds, round, rate(0), rate(1), rate(2), rate(3), rate(3)/rate(0), ratios[len(ratios)/2])
}

// hammer sends method url (with body, if not nil) from conc clients for d
// and counts the answers, which must be 200.
func hammer(b *testing.B, c *http.Client, method, url, key string, body []byte, conc int, d time.Duration) (
	int64, time.Duration) {
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for range conc {
		wg.Go(func() {
			for time.Now().Before(stop) {
				var r io.Reader
				if body != nil {
					r = bytes.NewReader(body)
				}
				req, _ := http.NewRequest(method, url, r)
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				res, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Errorf("%s %s: status %d", method, url, res.StatusCode)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(start)
}

// BenchmarkBatchAccept compares accepting one email (POST /emails) with
// accepting a batch of 100 (POST /emails/batch), which the issue requires
// to take at most 5 times as long. Both go through the production wiring
// (authentication, rate limiter, request log, metrics) over loopback HTTP
// with keep-alive to the same server and database, in alternating short
// rounds so that drift on a shared machine hits both alike. With
// clients=1 a call runs alone; with clients=8 calls compete for the
// machine, as in bench. It reports the mean time of a call of each kind
// and the ratio batch/single, overall and the median of the rounds.
//
// commit=durable runs on a private cluster that flushes every commit, as
// production and `posthaste dev` (what bench runs) do; commit=nosync on
// the tests' cluster, whose commits wait for nothing (fsync and
// synchronous_commit off), which leaves out a cost that a single send pays
// in full and a batch pays once. Run it with
//
//	GOTOOLCHAIN=local go test -run '^$' -bench BatchAccept -benchtime 1x ./api/
func BenchmarkBatchAccept(b *testing.B) {
	for _, commit := range []string{"durable", "nosync"} {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("commit=%s/clients=%d", commit, clients), func(b *testing.B) {
				var st *store.Store
				if commit == "durable" {
					st = durableStore(b)
				}
				benchBatchAccept(b, st, clients)
			})
		}
	}
}

// durableStore returns a migrated store on a private cluster in a
// temporary directory, with PostgreSQL's durable defaults.
func durableStore(b *testing.B) *store.Store {
	ctx := context.Background()
	pg, err := pgcluster.Start(ctx, pgcluster.Config{Dir: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = pg.Stop(context.Background()) })
	st, err := store.Open(ctx, store.Config{URL: pg.URL()})
	require.NoError(b, err)
	b.Cleanup(st.Close)
	require.NoError(b, st.Migrate(ctx))
	return st
}

// benchBatchAccept runs the comparison on st (nil: a database of the
// tests' cluster).
func benchBatchAccept(b *testing.B, st *store.Store, clients int) {
	e := newEnvWith(b, envOptions{store: st})
	require.NoError(b, e.store.Accounts.SetPlan(context.Background(), e.teamA, "2.5m"), "the bench sends more than the free plan")
	single, err := json.Marshal(sandboxTo(0))
	require.NoError(b, err)
	batch := make([]map[string]any, submit.MaxBatch)
	for i := range batch {
		batch[i] = sandboxTo(i)
	}
	batchBody, err := json.Marshal(batch)
	require.NoError(b, err)
	kinds := []struct {
		name, path string
		body       []byte
	}{{"single", "/emails", single}, {"batch", "/emails/batch", batchBody}}

	const round, rounds = 400 * time.Millisecond, 10
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var calls [2]int64
	var spent [2]time.Duration
	var ratios []float64 // batch/single of each round
	for r := range rounds + 1 {
		var mean [2]time.Duration
		for i, k := range kinds {
			n, d := hammer(b, client, "POST", e.srv.URL+k.path, e.keyA, k.body, clients, round)
			// Every client is busy for the whole round.
			mean[i] = d * time.Duration(clients) / time.Duration(n)
			if r > 0 { // the first round warms connections and caches
				calls[i] += n
				spent[i] += d * time.Duration(clients)
			}
		}
		if r > 0 {
			ratios = append(ratios, float64(mean[1])/float64(mean[0]))
		}
	}
	perCall := func(i int) time.Duration { return spent[i] / time.Duration(calls[i]) }
	slices.Sort(ratios)
	ratio := float64(perCall(1)) / float64(perCall(0))
	b.ReportMetric(float64(perCall(0).Microseconds())/1000, "single_ms")
	b.ReportMetric(float64(perCall(1).Microseconds())/1000, "batch_ms")
	b.ReportMetric(ratio, "batch/single")
	b.ReportMetric(ratios[len(ratios)/2], "batch/single_median_round")
	b.Logf("%d clients, %d rounds of %v: single %v per call, batch of %d %v per call; "+
		"batch/single %.2f overall, %.2f median of rounds (target ≤ 5)",
		clients, rounds, round, perCall(0), submit.MaxBatch, perCall(1), ratio, ratios[len(ratios)/2])
}

func newBenchLog(b *testing.B, st reqlog.Store) *reqlog.Writer {
	w := reqlog.New(reqlog.Config{}, st)
	b.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

func mustDecode(b *testing.B) submit.SendRequest {
	req, err := submit.DecodeSendRequest([]byte(`{"from":"onboarding@posthaste.test",
		"to":"delivered@posthaste.test","subject":"bench","html":"<p>hello</p>"}`))
	if err != nil {
		b.Fatal(err)
	}
	return req
}
