package records

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

func TestReceivingRecord(t *testing.T) {
	d := testDomain(t)
	require.Len(t, For(cfg, d), 4, "no Receiving record while receiving is disabled")
	d.Receiving = true
	recs := For(cfg, d)
	require.Len(t, recs, 5)
	require.Equal(t, Record{Key: KeyReceivingMX, Record: "Receiving", Type: "MX", Name: "@", FQDN: "example.test",
		Value: "feedback.posthaste.example", Priority: 10}, recs[4])
	require.False(t, Required(KeyReceivingMX), "sending never depends on it")

	s := dnstest.NewServer(t)
	res := found(Check(context.Background(), s.Resolver(), cfg, d))
	require.False(t, res[KeyReceivingMX])
	s.AddMX("example.test", "mx.elsewhere.example", 10)
	require.False(t, found(Check(context.Background(), s.Resolver(), cfg, d))[KeyReceivingMX], "another MX")
	s.AddMX("example.test", "feedback.posthaste.example.", 20)
	require.True(t, found(Check(context.Background(), s.Resolver(), cfg, d))[KeyReceivingMX])
}
