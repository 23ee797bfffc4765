package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"
)

// TestResendGoSDK drives the real API with Resend's official Go SDK,
// unchanged, pointed at the test server: send (with an attachment, which
// the SDK encodes as an array of byte values, in a chunked body), an
// idempotent batch twice, get, reschedule and cancel.
func TestResendGoSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.goSDK(t, e.keyA)

	sent, err := c.Emails.SendWithContext(ctx, &resend.SendEmailRequest{
		From:    "Acme <onboarding@posthaste.test>",
		To:      []string{"delivered@posthaste.test"},
		Subject: "Hello from resend-go",
		Html:    "<p>Hi</p>",
		Tags:    []resend.Tag{{Name: "sdk", Value: "resend-go"}},
		Attachments: []*resend.Attachment{{
			Content: []byte("report"), Filename: "report.txt", ContentType: "text/plain",
		}},
	})
	require.NoError(t, err)
	got, err := c.Emails.GetWithContext(ctx, sent.Id)
	require.NoError(t, err)
	require.Equal(t, "Hello from resend-go", got.Subject)
	require.Equal(t, "queued", got.LastEvent)

	batch := []*resend.SendEmailRequest{
		{From: "onboarding@posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "Batch 1", Text: "one"},
		{From: "onboarding@posthaste.test", To: []string{"delivered+2@posthaste.test"}, Subject: "Batch 2", Html: "<p>two</p>",
			ScheduledAt: "in 1 hour"},
	}
	opts := &resend.BatchSendEmailOptions{IdempotencyKey: "resend-go-batch/1"}
	first, err := c.Batch.SendWithOptions(ctx, batch, opts)
	require.NoError(t, err)
	require.Len(t, first.Data, 2)
	second, err := c.Batch.SendWithOptions(ctx, batch, opts)
	require.NoError(t, err)
	require.Equal(t, first.Data, second.Data, "the same key gives the same emails")
	list, err := c.Emails.ListWithContext(ctx)
	require.NoError(t, err)
	require.Len(t, list.Data, 3, "one email set for the batch")

	permissive, err := c.Batch.SendWithOptions(ctx, []*resend.SendEmailRequest{
		batch[0], {From: "onboarding@posthaste.test", Subject: "no to", Text: "x"},
	}, &resend.BatchSendEmailOptions{BatchValidation: resend.BatchValidationPermissive})
	require.NoError(t, err)
	require.Len(t, permissive.Data, 1)
	require.Equal(t, []resend.BatchError{{Index: 1, Message: "Missing `to` field."}}, permissive.Errors)

	scheduled := first.Data[1].Id
	up, err := c.Emails.UpdateWithContext(ctx, &resend.UpdateEmailRequest{Id: scheduled, ScheduledAt: "in 2 hours"})
	require.NoError(t, err)
	require.Equal(t, scheduled, up.Id)
	require.Equal(t, "email", up.Object)
	g := e.do("GET", "/emails/"+scheduled, e.keyA, nil)
	at, err := time.Parse(time.RFC3339Nano, g.body["scheduled_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), at, 10*time.Second)

	canceled, err := c.Emails.CancelWithContext(ctx, scheduled)
	require.NoError(t, err)
	require.Equal(t, scheduled, canceled.Id)
	got, err = c.Emails.GetWithContext(ctx, scheduled)
	require.NoError(t, err)
	require.Equal(t, "canceled", got.LastEvent)

	_, err = c.Emails.UpdateWithContext(ctx, &resend.UpdateEmailRequest{Id: scheduled, ScheduledAt: "in 3 hours"})
	require.Error(t, err, "a canceled email cannot be rescheduled")
	require.Contains(t, err.Error(), "canceled")
}
