package delivery_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Every recipient's copy goes in its own transaction from its own
// return path, which names it.
func TestDeliverSendsEachRecipientFromItsReturnPath(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	box := newBox(t)
	d, _ := insertDomain(t, st, box, "shop.test")
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{})
	dns.AddMX("dest.test", "mx.dest.test", 10)
	dns.AddA("mx.dest.test", "127.0.0.1")
	client, err := mta.New(mta.Config{Hostname: "out.example", Resolver: dns.Resolver(), Port: mx.Port(), Egress: loopback})
	require.NoError(t, err)
	defer client.Close()
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box}, st, client, metrics, nil)

	e := domainEmail(t, st, d, "a@dest.test", "b@dest.test")
	prep, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Len(t, prep.Groups, 1)
	g := prep.Groups[0]
	_, err = run[contract.DeliverInput, struct{}](t, acts.Deliver, contract.DeliverInput{EmailID: e.ID.String(),
		TeamID: prep.TeamID, Domain: g.Domain, Recipients: g.Recipients, TLS: "opportunistic", ReturnPath: g.ReturnPath})
	require.NoError(t, err)
	key := box.DeriveKey(reports.VERPKeyPurpose)
	msgs := mx.Messages()
	require.Len(t, msgs, 2, "one transaction per recipient")
	for i, m := range msgs {
		require.Equal(t, []string{e.Recipients[i].Address}, m.To)
		rp, err := reports.RecipientReturnPath(key, e.ID, i, d.ReturnPath+"."+d.Name)
		require.NoError(t, err)
		require.Equal(t, rp, m.From)
		v, ok := reports.ParseVERP(m.From)
		require.True(t, ok)
		require.True(t, v.PerRecipient && v.Index == i && v.Verify(key))
	}
	// Each outcome is recorded, and its event counted, once.
	require.Equal(t, 2.0, testutil.ToFloat64(metrics.EmailEvents.WithLabelValues("delivered")))
}
