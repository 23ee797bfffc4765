package main

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
)

// The MTA a process builds obeys the egress configuration: by default a
// loopback MX is refused; POSTHASTE_ALLOW_PRIVATE_EGRESS (as `dev` sets it)
// or POSTHASTE_EGRESS_ALLOW reaches it; POSTHASTE_RELAY is reached
// whatever its address.
func TestDelivererObeysEgressConfig(t *testing.T) {
	dns, mx := memberMX(t)
	delivery := config.Delivery{Hostname: "posthaste.example", DNSServer: dns.Addr(), MXPort: mx.Port()}
	relay := smtptest.NewServer(t, smtptest.Options{})
	viaRelay := delivery
	viaRelay.Relay = "smtp://" + relay.Addr()
	for _, tc := range []struct {
		name     string
		delivery config.Delivery
		egress   config.Egress
		want     mta.Status
	}{
		{"default", delivery, config.Egress{}, mta.Refused},
		{"private allowed", delivery, config.Egress{AllowPrivate: true}, mta.Delivered},
		{"listed", delivery, config.Egress{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, mta.Delivered},
		{"relay", viaRelay, config.Egress{}, mta.Delivered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mtaConfig(tc.delivery, tc.egress, nil, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			d, err := mta.New(cfg)
			require.NoError(t, err)
			defer d.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got := d.Deliver(ctx, "member.test", mta.Envelope{From: "bounces@posthaste.example",
				To: []string{"owner@member.test"}, Data: []byte("From: a@posthaste.example\r\n\r\nHi\r\n")})
			require.Equal(t, tc.want, got[0].Status, got[0].Message)
		})
	}
	require.Len(t, mx.Messages(), 2)
	require.Len(t, relay.Messages(), 1)
}
