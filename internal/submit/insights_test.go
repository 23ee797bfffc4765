package submit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// domainStore is a Store with one verified domain, example.com, whose
// DMARC record a verification from before migration 00025 found missing;
// it records what it accepts and counts domain lookups.
type domainStore struct {
	memberStore
	lookups int
}

func (d *domainStore) DomainByName(_ context.Context, team uuid.UUID, name string) (store.Domain, error) {
	d.lookups++
	if name != "example.com" {
		return store.Domain{}, store.ErrNotFound
	}
	return store.Domain{ID: uuid.MustParse("00000000-0000-0000-0000-000000000001"), TeamID: team, Name: name,
		Status: store.DomainVerified, RecordStatus: map[string]string{"dkim": "verified", "dmarc": "failed"}}, nil
}

func insightCodes(e store.Email) []string {
	out := []string{}
	for _, i := range e.Insights {
		out = append(out, i.Code)
	}
	return out
}

func TestInsightsOfSMTPMessages(t *testing.T) {
	st := &domainStore{}
	s := New(Config{Store: st, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	data := strings.ReplaceAll(`From: Shop <shop@example.com>
To: someone@elsewhere.test
Subject: November news
Precedence: bulk
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/html

<p>Our November news, with many things to read about tea and coffee and cocoa and biscuits.</p>
--b
Content-Type: application/octet-stream
Content-Disposition: attachment; filename="update.scr"

MZ
--b--
`, "\n", "\r\n")
	_, err := s.SendMessage(context.Background(), Sender{TeamID: uuid.New()}, Message{EnvelopeFrom: "shop@example.com",
		Recipients: []string{"someone@elsewhere.test"}, Data: []byte(data)})
	require.NoError(t, err)
	require.Len(t, st.accepted, 1)
	require.Equal(t, []string{"no_text_alternative", "bulk_without_unsubscribe", "dmarc_missing", "risky_attachment"},
		insightCodes(st.accepted[0]))
}

func TestInsightsOfABatchLookTheDomainUpOnce(t *testing.T) {
	st := &domainStore{}
	s := New(Config{Store: st})
	text := "Your order has shipped."
	caps := "YOUR ORDER HAS SHIPPED"
	items := []BatchItem{
		{Request: SendRequest{From: "Shop <shop@example.com>", To: []string{"a@elsewhere.test"}, Subject: &text, Text: &text}},
		{Request: SendRequest{From: "Shop <shop@example.com>", To: []string{"b@elsewhere.test"}, Subject: &caps, Text: &text}},
	}
	_, err := s.SendBatch(context.Background(), Sender{TeamID: uuid.New()}, items, BatchOptions{})
	require.NoError(t, err)
	require.Len(t, st.accepted, 2)
	require.Equal(t, []string{"dmarc_missing"}, insightCodes(st.accepted[0]))
	require.Equal(t, []string{"dmarc_missing", "all_caps_subject"}, insightCodes(st.accepted[1]))
	// The lookup that authorizes the batch's sender serves its insights too.
	require.Equal(t, 1, st.lookups)
}
