package submit

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestSenderDomainIsLoadedOnce checks that each way of sending loads its
// sender domain once: authorising the sender (for an SMTP message its
// envelope sender, From and Sender) and computing the insights share the
// row.
func TestSenderDomainIsLoadedOnce(t *testing.T) {
	ctx := context.Background()
	text := "Your order has shipped."
	caps := "YOUR ORDER HAS SHIPPED"
	req := func(to, subject string) SendRequest {
		return SendRequest{From: "Shop <shop@example.com>", To: []string{to}, Subject: &subject, Text: &text}
	}

	t.Run("send", func(t *testing.T) {
		st := &domainStore{}
		_, err := New(Config{Store: st}).Send(ctx, Sender{TeamID: uuid.New()}, req("a@elsewhere.test", caps))
		require.NoError(t, err)
		require.Len(t, st.accepted, 1)
		require.Equal(t, []string{"dmarc_missing", "all_caps_subject"}, insightCodes(st.accepted[0]))
		require.Equal(t, 1, st.lookups)
	})

	t.Run("batch of 3", func(t *testing.T) {
		st := &domainStore{}
		items := []BatchItem{{Request: req("a@elsewhere.test", text)}, {Request: req("b@elsewhere.test", caps)},
			{Request: req("c@elsewhere.test", text)}}
		_, err := New(Config{Store: st}).SendBatch(ctx, Sender{TeamID: uuid.New()}, items, BatchOptions{})
		require.NoError(t, err)
		require.Len(t, st.accepted, 3)
		for i, want := range [][]string{{"dmarc_missing"}, {"dmarc_missing", "all_caps_subject"}, {"dmarc_missing"}} {
			require.Equal(t, want, insightCodes(st.accepted[i]), i)
		}
		require.Equal(t, 1, st.lookups)
	})

	t.Run("batch from a domain the team does not have", func(t *testing.T) {
		st := &domainStore{}
		other := func(to string) BatchItem {
			return BatchItem{Request: SendRequest{From: "shop@other.test", To: []string{to}, Subject: &text, Text: &text}}
		}
		items := []BatchItem{other("a@elsewhere.test"), {Request: req("b@elsewhere.test", text)}, other("c@elsewhere.test")}
		res, err := New(Config{Store: st}).SendBatch(ctx, Sender{TeamID: uuid.New()}, items,
			BatchOptions{Mode: BatchPermissive})
		require.NoError(t, err)
		require.Len(t, res.Errors, 2)
		require.Equal(t, 0, res.Errors[0].Index)
		require.Equal(t, 2, res.Errors[1].Index)
		require.Equal(t, res.Errors[0].Message, res.Errors[1].Message, "the missing domain is refused alike each time")
		require.Len(t, st.accepted, 1)
		require.Equal(t, 2, st.lookups, "one lookup for other.test, found missing, and one for example.com")
	})

	t.Run("SMTP message", func(t *testing.T) {
		st := &domainStore{}
		data := strings.ReplaceAll("From: Shop <shop@example.com>\nSender: orders@example.com\n"+
			"To: someone@elsewhere.test\nSubject: "+caps+"\n\n"+text+"\n", "\n", "\r\n")
		_, err := New(Config{Store: st}).SendMessage(ctx, Sender{TeamID: uuid.New()}, Message{
			EnvelopeFrom: "bounces@example.com", Recipients: []string{"someone@elsewhere.test"}, Data: []byte(data)})
		require.NoError(t, err)
		require.Len(t, st.accepted, 1)
		require.Equal(t, []string{"dmarc_missing", "all_caps_subject"}, insightCodes(st.accepted[0]))
		require.Equal(t, 1, st.lookups)
	})
}
