package delivery_test

import (
	"context"
	"net"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/pooldeliver"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// clock is a settable clock for the warm-up's UTC days.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// A pool of two new addresses with an allowance of 3 a day each (counted
// in PostgreSQL): the first address takes three recipients and the rest
// leave from the second; once both are used up, the remaining recipients
// are deferred with a warm-up reply (POSTHASTE_WARMUP_OVERFLOW=wait), and
// either spill to the shared pool (=spill) or leave the next UTC day. The
// delivered events name the address each recipient left from.
func TestWarmupLimitsThePoolsAddresses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	base := mta.Config{Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback}

	newAddrs := []ippool.Address{{IP: netip.MustParseAddr("127.0.0.11"), Hostname: "mta11.test"},
		{IP: netip.MustParseAddr("127.0.0.12"), Hostname: "mta12.test"}}
	sharedAddrs := []ippool.Address{{IP: netip.MustParseAddr("127.0.0.13"), Hostname: "mta13.test"}}
	for name, as := range map[string][]ippool.Address{"new": newAddrs, "shared": sharedAddrs} {
		p := store.IPPool{Name: name}
		for _, a := range as {
			p.Addresses = append(p.Addresses, store.IPAddress{IP: a.IP, EHLOName: a.Hostname})
		}
		_, err := st.Domains.AddIPPool(ctx, p)
		require.NoError(t, err)
	}
	require.NoError(t, st.Domains.SetWarmup(ctx, sharedAddrs[0].IP, nil), "the shared pool is warm")
	clk := &clock{t: time.Now().UTC()}
	gate := delivery.NewWarmupGate(st.Domains, ippool.Schedule{3}, clk.now)

	shared, err := pooldeliver.New(base, sharedAddrs, pooldeliver.Warmup{Gate: gate})
	require.NoError(t, err)
	defer shared.Close()
	waiting, err := pooldeliver.New(base, newAddrs, pooldeliver.Warmup{Gate: gate})
	require.NoError(t, err)
	defer waiting.Close()
	spilling, err := pooldeliver.New(base, newAddrs, pooldeliver.Warmup{Gate: gate, Spill: shared})
	require.NoError(t, err)
	defer spilling.Close()
	cfg := delivery.Config{Hostname: "out.example", DefaultPool: "shared"}
	wait := delivery.NewWithSenders(cfg, st, senders{"": shared, "new": waiting}, nil, nil)
	spill := delivery.NewWithSenders(cfg, st, senders{"": shared, "new": spilling}, nil, nil)

	deliver := func(acts *delivery.Sending, e store.Email) error {
		t.Helper()
		res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare,
			contract.PrepareInput{EmailID: e.ID.String()})
		require.NoError(t, err)
		g := res.Groups[0]
		require.Equal(t, "new", g.Pool)
		_, err = run[contract.DeliverInput, any](t, acts.Deliver, contract.DeliverInput{EmailID: e.ID.String(),
			Domain: g.Domain, Recipients: g.Recipients, TLS: g.TLS, ReturnPath: g.ReturnPath, Region: g.Region, Pool: g.Pool})
		return err
	}
	// sources maps each recipient that reached the MX to the address it
	// left from, and checks the EHLO name said from it.
	sources := func() map[string]string {
		t.Helper()
		helo := map[string]string{"127.0.0.11": "mta11.test", "127.0.0.12": "mta12.test", "127.0.0.13": "mta13.test"}
		out := map[string]string{}
		for _, m := range mx.Messages() {
			host, _, err := net.SplitHostPort(m.RemoteAddr)
			require.NoError(t, err)
			require.Equal(t, helo[host], m.Helo)
			for _, r := range m.To {
				out[r] = host
			}
		}
		return out
	}

	e1 := insertEmail(t, st, "a@dest.test", "b@dest.test", "c@dest.test", "d@dest.test")
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, e1.TeamID, "new"))
	require.NoError(t, deliver(wait, e1))
	got := sources()
	require.Len(t, got, 4)
	perIP := map[string]int{}
	for _, ip := range got {
		perIP[ip]++
	}
	require.Equal(t, map[string]int{"127.0.0.11": 3, "127.0.0.12": 1}, perIP,
		"three from the first address, the fourth from the second")

	// Two left on the second address for three recipients.
	e2 := insertEmail(t, st, "e@dest.test", "f@dest.test", "g@dest.test")
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, e2.TeamID, "new"))
	err = deliver(wait, e2)
	require.ErrorContains(t, err, "1 of 3 recipients deferred: 451 4.7.0 warm-up: daily allowance of the pool's addresses used up")
	got = sources()
	require.Len(t, got, 6)
	status := recipientStatus(t, st, e2)
	var late string
	for r, s := range status {
		if s != store.EventDelivered {
			late = r
			require.Equal(t, store.EventDeliveryDelayed, s)
		}
	}
	require.NotEmpty(t, late)
	_, reached := got[late]
	require.False(t, reached)

	// Spilling: the deferred recipient leaves from the shared pool.
	require.NoError(t, deliver(spill, e2))
	require.Equal(t, "127.0.0.13", sources()[late])
	evs, err := st.Emails.Events(ctx, e2.ID)
	require.NoError(t, err)
	var eventIPs []string
	for _, ev := range evs {
		if ev.Type == store.EventDelivered {
			eventIPs = append(eventIPs, ev.Detail["source_ip"].(string))
		}
	}
	sort.Strings(eventIPs)
	require.Equal(t, []string{"127.0.0.12", "127.0.0.12", "127.0.0.13"}, eventIPs)

	// Waiting: the next UTC day renews the allowance.
	e3 := insertEmail(t, st, "h@dest.test")
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, e3.TeamID, "new"))
	require.ErrorContains(t, deliver(wait, e3), "warm-up")
	clk.set(clk.now().Add(24 * time.Hour))
	require.NoError(t, deliver(wait, e3))
	require.Contains(t, []string{"127.0.0.11", "127.0.0.12"}, sources()["h@dest.test"])

	addrs, err := st.Domains.WarmupAddresses(ctx, clk.now().Add(-24*time.Hour))
	require.NoError(t, err)
	sent := map[string]int64{}
	for _, a := range addrs {
		sent[a.IP.String()] = a.Sent
	}
	require.Equal(t, map[string]int64{"127.0.0.11": 3, "127.0.0.12": 3, "127.0.0.13": 1}, sent, "yesterday's counts")
}
