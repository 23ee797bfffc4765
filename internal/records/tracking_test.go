package records

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
)

func TestTrackingRecord(t *testing.T) {
	ctx := context.Background()
	tcfg := cfg
	tcfg.TrackingHost = "track.posthaste.example"
	d := testDomain(t)
	d.TrackingSubdomain = "links"

	require.Len(t, For(tcfg, d), 4, "no tracking record while tracking is off")
	d.Tracking = true
	require.Len(t, For(cfg, d), 4, "no tracking record without a tracking host")
	recs := For(tcfg, d)
	require.Len(t, recs, 5)
	require.Equal(t, Record{Key: KeyTracking, Record: "Tracking", Type: "CNAME", Name: "links",
		FQDN: "links.example.test", Value: "track.posthaste.example"}, recs[4])
	require.False(t, Required(KeyTracking), "tracking is not needed for the domain's verification")
	require.Contains(t, Keys, KeyTracking)

	tracking := func(s *dnstest.Server) Result {
		for _, r := range Check(ctx, s.Resolver(), tcfg, d) {
			if r.Key == KeyTracking {
				return r
			}
		}
		t.Fatal("no tracking result")
		return Result{}
	}
	s := dnstest.NewServer(t)
	s.AddA("example.test", "192.0.2.10")
	r := tracking(s)
	require.False(t, r.Found)
	require.False(t, r.Temporary, r.Error)

	s.AddA("links.example.test", "192.0.2.11")
	require.False(t, tracking(s).Found, "an address record is not the CNAME")

	s2 := dnstest.NewServer(t)
	s2.AddCNAME("links.example.test", "elsewhere.example")
	require.False(t, tracking(s2).Found, "a CNAME elsewhere")

	s3 := dnstest.NewServer(t)
	s3.AddCNAME("links.example.test", "Track.Posthaste.Example")
	r = tracking(s3)
	require.True(t, r.Found, r.Error)

	s4 := dnstest.NewServer(t)
	s4.ServFail("links.example.test", true)
	r = tracking(s4)
	require.False(t, r.Found)
	require.True(t, r.Temporary, r.Error)
}
