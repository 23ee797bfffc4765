package delivery_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

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

// senders is the Senders of a test: a Deliverer per pool name.
type senders map[string]delivery.Deliverer

func (s senders) Sender(pool string) (delivery.Deliverer, bool) {
	d, ok := s[pool]
	return d, ok
}

// Prepare gives the group of a team assigned a pool that pool, and the
// group of a team assigned the default pool (by name) the default queues
// (""); the first attempt Prepare makes of a group from a pool sends from
// the pool's address with its EHLO name and records the source address in
// the delivered event; a worker without that pool neither marks the group
// local nor delivers it, locally or not.
func TestPrepareAndDeliverFromTheTeamsPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.9:0")
	require.NoError(t, err, "this test needs 127.0.0.9 on loopback")
	_ = ln.Close()
	st := storetest.New(t)
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	shared, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback})
	require.NoError(t, err)
	defer shared.Close()
	acme, err := pooldeliver.New(mta.Config{Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback},
		[]ippool.Address{{IP: netip.MustParseAddr("127.0.0.9"), Hostname: "mta9.test"}}, pooldeliver.Warmup{})
	require.NoError(t, err)
	defer acme.Close()
	for _, name := range []string{"shared", "acme"} {
		_, err := st.Domains.AddIPPool(ctx, store.IPPool{Name: name})
		require.NoError(t, err)
	}
	cfg := delivery.Config{Hostname: "out.example", DefaultPool: "shared"}
	both := delivery.NewWithSenders(cfg, st, senders{"": shared, "acme": acme}, nil, nil).
		WithLocalDelivery([]string{delivery.DefaultRegion})
	onlyDefault := delivery.NewWithSenders(cfg, st, senders{"": shared}, nil, nil).
		WithLocalDelivery([]string{delivery.DefaultRegion})

	e := insertEmail(t, st, "a@dest.test")
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, e.TeamID, "acme"))
	res, err := run[contract.PrepareInput, contract.PrepareResult](t, onlyDefault.Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Equal(t, "acme", res.Groups[0].Pool)
	require.False(t, res.Groups[0].Local, "this worker does not deliver from acme")
	res, err = run[contract.PrepareInput, contract.PrepareResult](t, both.Prepare,
		contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Equal(t, "acme", res.Groups[0].Pool)
	require.True(t, res.Groups[0].Local)
	require.Equal(t, &contract.DeliverLocalResult{Done: true}, res.Groups[0].First,
		"the worker that delivers from acme made the first attempt in Prepare")

	g := res.Groups[0]
	in := contract.DeliverInput{EmailID: e.ID.String(), Domain: g.Domain, Recipients: g.Recipients, TLS: g.TLS,
		ReturnPath: g.ReturnPath, Region: g.Region, Pool: g.Pool}
	out, err := run[contract.DeliverInput, contract.DeliverLocalResult](t, onlyDefault.DeliverLocal, in)
	require.NoError(t, err)
	require.Contains(t, out.Retry, `does not deliver from IP pool "acme"`)
	_, err = run[contract.DeliverInput, any](t, onlyDefault.Deliver, in)
	require.ErrorContains(t, err, `does not deliver from IP pool "acme"`)
	require.Equal(t, 1, mx.Connections(), "nothing left from the wrong pool, only Prepare's attempt from acme")

	msgs := mx.Messages()
	require.Len(t, msgs, 1)
	host, _, err := net.SplitHostPort(msgs[0].RemoteAddr)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.9", host)
	require.Equal(t, "mta9.test", msgs[0].Helo)
	evs, err := st.Emails.Events(ctx, e.ID)
	require.NoError(t, err)
	var source any
	for _, ev := range evs {
		if ev.Type == store.EventDelivered {
			source = ev.Detail["source_ip"]
		}
	}
	require.Equal(t, "127.0.0.9", source, "the delivered event names the source address")

	// A team assigned the default pool by name uses the default queues.
	e2 := insertEmail(t, st, "b@dest.test")
	require.NoError(t, st.Domains.SetTeamIPPool(ctx, e2.TeamID, "shared"))
	res, err = run[contract.PrepareInput, contract.PrepareResult](t, onlyDefault.Prepare,
		contract.PrepareInput{EmailID: e2.ID.String()})
	require.NoError(t, err)
	require.Equal(t, "", res.Groups[0].Pool)
	require.True(t, res.Groups[0].Local)
}
