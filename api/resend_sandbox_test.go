package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestResendNodeSDKSandbox sends Resend's test emails with Resend's Node
// SDK, unchanged (testdata/resend-node/sandbox.cjs): onboarding@resend.dev
// is the sandbox sender, and delivered@ and bounced@resend.dev are
// accepted as the sandbox addresses, not 403; another resend.dev sender
// and a stranger are refused as posthaste.test's would be. The other team
// sees none of them. (cmd/posthaste's TestDevResendTestAddresses follows
// them to their final states.)
func TestResendNodeSDKSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "sandbox.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	var res struct {
		Delivered, Bounced              string
		OtherSenderError, StrangerError map[string]any
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Equal(t, "The sandbox domain resend.dev can only send from onboarding@resend.dev.",
		res.OtherSenderError["message"])
	require.Equal(t, 403.0, res.OtherSenderError["statusCode"], res.OtherSenderError)
	require.Contains(t, res.StrangerError["message"], "You can only send testing emails from onboarding@resend.dev")
	require.Equal(t, 403.0, res.StrangerError["statusCode"], res.StrangerError)

	for id, to := range map[string]string{res.Delivered: "delivered@resend.dev", res.Bounced: "bounced+signup@resend.dev"} {
		em, err := e.store.Emails.GetEmail(context.Background(), e.teamA, uuid.MustParse(id))
		require.NoError(t, err)
		require.Equal(t, []string{to}, em.To)
		require.Equal(t, "Acme <onboarding@resend.dev>", em.From)
		require.Equal(t, "resend.dev", em.FromDomain)
		require.Nil(t, em.DomainID, "the sandbox: no domain")
		requireError(t, e.do("GET", "/emails/"+id, e.keyB, nil), 404, "not_found")
	}
	g := e.do("GET", "/emails/"+res.Delivered, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, "queued", g.body["last_event"])
}
