package smtpgw_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/store"
)

// TestAuthFromOutsideTheKeysRangesIsRefused checks that SMTP AUTH with a
// key limited to client address ranges fails with 535 5.7.8 from outside
// them, as an invalid key would, and works from inside.
func TestAuthFromOutsideTheKeysRangesIsRefused(t *testing.T) {
	h := newHarness(t, options{})
	token, prefix, hash, err := auth.NewToken()
	require.NoError(t, err)
	require.NoError(t, h.st.Accounts.CreateAPIKey(context.Background(), store.APIKey{ID: uuid.Must(uuid.NewV7()), TeamID: h.team,
		Name: "office", Prefix: prefix, Hash: hash, Permission: store.PermissionSendingAccess,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("2001:db8::/32")}}))

	d := h.dialFrom(h.implicit, &net.TCPAddr{IP: net.ParseIP("127.0.0.3")})
	d.cmd(250, "EHLO client.test")
	msg := d.cmd(535, "AUTH PLAIN %s", plain("posthaste", token))
	require.Contains(t, msg, "5.7.8")

	d = h.dialFrom(h.implicit, &net.TCPAddr{IP: net.ParseIP("127.0.0.2")})
	d.cmd(250, "EHLO client.test")
	d.cmd(235, "AUTH PLAIN %s", plain("posthaste", token))
	d.cmd(250, "MAIL FROM:<onboarding@posthaste.test>")
}
