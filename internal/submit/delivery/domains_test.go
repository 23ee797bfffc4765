package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

func newBox(t *testing.T) *seal.Box {
	t.Helper()
	return acttest.NewBox(t)
}

// insertDomain adds a verified domain with a sealed key to a new team.
func insertDomain(t *testing.T, st *store.Store, box *seal.Box, name string) (store.Domain, dkim.Key) {
	t.Helper()
	return acttest.InsertDomain(t, st, box, name)
}

func domainEmail(t *testing.T, st *store.Store, d store.Domain, rcpts ...string) store.Email {
	t.Helper()
	return acttest.DomainEmail(t, st, d, rcpts...)
}

func TestPrepareSignsAndSkipsSuppressed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, key := insertDomain(t, st, box, "shop.test")
	_, _, err := st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID,
		Email: "gone@dest.test", Reason: store.SuppressionComplaint})
	require.NoError(t, err)
	hook := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: hook, TeamID: d.TeamID,
		Endpoint: "https://hooks.example/x", Status: "enabled", Secret: []byte("s"), Events: []string{"email.suppressed"}}))
	e := domainEmail(t, st, d, "a@dest.test", "Gone@dest.test", "delivered@posthaste.test")
	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box}, st, nil, nil, nil)

	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Equal(t, []contract.DeliveryGroup{{Domain: "dest.test", Region: "eu-west-1", TLS: "enforced",
		ReturnPath: reports.SignedReturnPath(box.DeriveKey(reports.VERPKeyPurpose), e.ID, "bounce.shop.test"),
		Recipients: []string{"a@dest.test"}}}, res.Groups)
	v, ok := reports.ParseVERP(res.Groups[0].ReturnPath)
	require.True(t, ok)
	require.True(t, v.Verify(box.DeriveKey(reports.VERPKeyPurpose)), "the return path is signed")
	require.Len(t, res.Sandbox, 1)
	require.Equal(t, map[string]string{"a@dest.test": "sent", "Gone@dest.test": "suppressed",
		"delivered@posthaste.test": "sent"}, recipientStatus(t, st, e))
	// email.suppressed carries Resend's suppressed object.
	msgs, _, err := st.Webhooks.ListWebhookMessages(ctx, d.TeamID, hook, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var p struct{ Data map[string]any }
	require.NoError(t, json.Unmarshal(msgs[0].Payload, &p))
	require.Equal(t, "Gone@dest.test", p.Data["recipient"])
	require.Equal(t, map[string]any{"type": "OnAccountSuppressionList", "reason": "previous_complaint",
		"message": "The address is on the team's suppression list.", "diagnosticCode": []any{}}, p.Data["suppressed"])

	msg, err := st.Emails.Message(ctx, e.ID)
	require.NoError(t, err)
	verifs, err := msgdkim.VerifyWithOptions(bytes.NewReader(msg), &msgdkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) {
			if name != "sel._domainkey.shop.test" {
				return nil, errors.New("unexpected lookup " + name)
			}
			return []string{dkim.RecordValue(key.PublicBase64)}, nil
		},
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	require.NoError(t, verifs[0].Err)
	require.Equal(t, "shop.test", verifs[0].Domain)
	require.Equal(t, []string{"from", "to", "subject", "date", "message-id", "mime-version", "content-type",
		"reply-to", "list-unsubscribe", "from"}, lower(verifs[0].HeaderKeys))
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

func TestPrepareWithoutKeyIsPermanent(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	d, _ := insertDomain(t, st, newBox(t), "shop.test")
	e := domainEmail(t, st, d, "a@dest.test")
	for name, box := range map[string]*seal.Box{"no master key": nil, "another master key": newBox(t)} {
		acts := delivery.New(delivery.Config{Keys: box}, st, nil, nil, nil)
		_, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
		var ae *temporal.ApplicationError
		require.ErrorAs(t, err, &ae, name)
		require.True(t, ae.NonRetryable(), name)
		require.Contains(t, ae.Error(), "DKIM key", name)
		reason, ok := contract.PermanentReason(err)
		require.True(t, ok, name)
		require.Contains(t, reason, "DKIM key", name)
	}

	// The workflow then ends the email failed, with that reason.
	acts := delivery.New(delivery.Config{}, st, nil, nil, nil)
	_, err := run[contract.FailEmailInput, struct{}](t, acts.FailEmail,
		contract.FailEmailInput{EmailID: e.ID.String(), Reason: "DKIM key unavailable"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a@dest.test": "failed"}, recipientStatus(t, st, e))
	require.False(t, func() bool { _, ok := contract.PermanentReason(errors.New("connection refused")); return ok }(),
		"a plain error is not permanent")
}
