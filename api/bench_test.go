package api_test

import (
	"context"
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

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/storetest"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/telemetry"
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
	creds, err := account.NewTeam(ctx, st, "bench", "bench@example.com")
	if err != nil {
		b.Fatal(err)
	}
	team := uuid.MustParse(creds.TeamID)
	sub := submit.New(submit.Config{Store: st})
	acc, err := sub.SendWithOptions(ctx, submit.Sender{TeamID: team}, mustDecode(b), submit.SendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	path := "/emails/" + acc.ID.String()
	authn := auth.NewAuthenticator(st, time.Second)
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
		{"auth+limiter", func(c *api.Config) { c.Limiter = ratelimit.NewLocal() }},
		{"on", func(c *api.Config) {
			c.Limiter = ratelimit.NewLocal()
			c.RequestLog = newBenchLog(b, st)
		}},
	}
	servers := make([]*httptest.Server, len(variants))
	for i, v := range variants {
		reg := prometheus.NewRegistry()
		cfg := api.Config{Store: st, Auth: authn, Submit: sub, Metrics: telemetry.NewMetrics(reg),
			DefaultRateLimit: 1_000_000}
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
			n, d := hammer(b, client, servers[i].URL+path, creds.APIKey, conc, round)
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

// hammer sends GET url from conc clients for d and counts the answers.
func hammer(b *testing.B, c *http.Client, url, key string, conc int, d time.Duration) (int64, time.Duration) {
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for range conc {
		wg.Go(func() {
			for time.Now().Before(stop) {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Errorf("status %d", res.StatusCode)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(start)
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
