package activities_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/activities"
	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

func newBox(t *testing.T) *seal.Box {
	t.Helper()
	k, err := seal.NewKey()
	require.NoError(t, err)
	raw, err := seal.ParseKey(k)
	require.NoError(t, err)
	b, err := seal.New(raw)
	require.NoError(t, err)
	return b
}

// insertDomain adds a verified domain with a sealed key to a new team.
func insertDomain(t *testing.T, st *store.Store, box *seal.Box, name string) (store.Domain, dkim.Key) {
	t.Helper()
	ctx := context.Background()
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	key, err := dkim.GenerateKey()
	require.NoError(t, err)
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: name, Region: "eu-west-1",
		Status: store.DomainVerified, ReturnPath: "bounce", TLS: store.TLSEnforced, DKIMSelector: "sel",
		DKIMPublicKey: key.PublicBase64}
	d.DKIMPrivateKey, err = box.Seal(key.PrivatePKCS8, d.ID[:])
	require.NoError(t, err)
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	return d, key
}

func domainEmail(t *testing.T, st *store.Store, d store.Domain, rcpts ...string) store.Email {
	t.Helper()
	text := "Hello from a verified domain."
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID,
		From: "Shop <hello@" + d.Name + ">", FromDomain: d.Name, To: rcpts, Subject: "Signed", Text: &text,
		ReplyTo:   []string{"help@" + d.Name},
		Headers:   []store.Header{{Name: "List-Unsubscribe", Value: "<mailto:u@" + d.Name + ">"}},
		LastEvent: store.EventQueued, CreatedAt: time.Now()}
	for _, r := range rcpts {
		_, dom, _ := strings.Cut(r, "@")
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: dom, Status: store.EventQueued})
	}
	_, err := storetest.InsertEmail(context.Background(), st, e)
	require.NoError(t, err)
	return e
}

func TestPrepareSignsAndSkipsSuppressed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, key := insertDomain(t, st, box, "shop.test")
	_, _, err := st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID,
		Email: "gone@dest.test", Reason: store.SuppressionManual})
	require.NoError(t, err)
	e := domainEmail(t, st, d, "a@dest.test", "Gone@dest.test", "delivered@posthaste.test")
	acts := activities.New(activities.Config{Hostname: "out.example", Keys: box}, st, nil, nil, nil)

	res, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
	require.NoError(t, err)
	require.Equal(t, []contract.DeliveryGroup{{Domain: "dest.test", Region: "eu-west-1", TLS: "enforced",
		ReturnPath: reports.SignedReturnPath(box.DeriveKey(activities.VERPKeyPurpose), e.ID, "bounce.shop.test"),
		Recipients: []string{"a@dest.test"}}}, res.Groups)
	v, ok := reports.ParseVERP(res.Groups[0].ReturnPath)
	require.True(t, ok)
	require.True(t, v.Verify(box.DeriveKey(activities.VERPKeyPurpose)), "the return path is signed")
	require.Len(t, res.Sandbox, 1)
	require.Equal(t, map[string]string{"a@dest.test": "sent", "Gone@dest.test": "suppressed",
		"delivered@posthaste.test": "sent"}, recipientStatus(t, st, e))

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
		acts := activities.New(activities.Config{Keys: box}, st, nil, nil, nil)
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
	acts := activities.New(activities.Config{}, st, nil, nil, nil)
	_, err := run[contract.FailEmailInput, struct{}](t, acts.FailEmail,
		contract.FailEmailInput{EmailID: e.ID.String(), Reason: "DKIM key unavailable"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a@dest.test": "failed"}, recipientStatus(t, st, e))
	require.False(t, func() bool { _, ok := contract.PermanentReason(errors.New("connection refused")); return ok }(),
		"a plain error is not permanent")
}
