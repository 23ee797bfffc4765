package broadcast_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestHandOffBroadcastChunk hands a broadcast's contacts over through the
// activity: the sandbox sender's broadcast reaches sandbox addresses and
// fails, with the reason, for a contact it may not write to; a team whose
// sending is paused for its account health pauses its broadcast with the
// pause's reason, which goes on once an operator resumes the team.
func TestHandOffBroadcastChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	acts := broadcast.NewActivities(broadcast.ActivitiesConfig{}, st)

	seg, err := st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "all"})
	require.NoError(t, err)
	for _, addr := range []string{"delivered+1@posthaste.test", "delivered+2@posthaste.test", "stranger@example.com"} {
		_, err := st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: addr},
			[]uuid.UUID{seg.ID}, nil)
		require.NoError(t, err)
	}
	newBroadcast := func() store.Broadcast {
		html := "<p>Hi {{{FIRST_NAME|there}}}</p>"
		b, err := st.Broadcasts.CreateBroadcast(ctx, store.Broadcast{ID: uuid.Must(uuid.NewV7()), TeamID: team, SegmentID: &seg.ID,
			From: "onboarding@posthaste.test", Subject: "News for {{{FIRST_NAME|you}}}", HTML: &html})
		require.NoError(t, err)
		_, err = st.Broadcasts.SendBroadcast(ctx, team, b.ID, nil, nil)
		require.NoError(t, err)
		return b
	}
	handOff := func(b store.Broadcast) contract.BroadcastChunkResult {
		res, err := acttest.Run[contract.BroadcastChunkInput, contract.BroadcastChunkResult](t, acts.HandOffBroadcastChunk,
			contract.BroadcastChunkInput{BroadcastID: b.ID, Size: 100})
		require.NoError(t, err)
		return res
	}

	first := newBroadcast()
	res := handOff(first)
	require.Equal(t, 2, res.Emails)
	require.Equal(t, 1, res.Failed, "the sandbox sender may not write to stranger@example.com")
	failed, _, err := st.Broadcasts.BroadcastRecipients(ctx, team, first.ID, "failed", "", "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	e, err := st.Emails.GetEmail(ctx, team, failed[0].EmailID)
	require.NoError(t, err)
	require.Equal(t, "News for you", e.Subject, "the failed email reads as it would have, placeholders filled")

	// 10 bounces in 100 recipients: above 4 %, and the operator pauses.
	for i := range 100 {
		status := store.EventDelivered
		if i < 10 {
			status = store.EventBounced
		}
		addr := fmt.Sprintf("r%d@example.com", i)
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
			FromDomain: "posthaste.test", To: []string{addr}, Subject: "s", LastEvent: status, CreatedAt: time.Now(),
			Recipients: []store.Recipient{{Address: addr, Kind: "to", Domain: "example.com", Status: status}}}
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
	}
	_, err = st.Insights.EvaluateHealth(ctx, time.Now(), health.DefaultWindow, true)
	require.NoError(t, err)
	pause, err := st.Insights.SendingPause(ctx, team)
	require.NoError(t, err)
	require.NotNil(t, pause)

	b := newBroadcast()
	res = handOff(b)
	require.True(t, res.Paused)
	require.Equal(t, pause.Message(), res.Reason)
	got, err := st.Broadcasts.Broadcast(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastPaused, got.Status)
	counts, err := st.Broadcasts.BroadcastCounts(ctx, team, b.ID)
	require.NoError(t, err)
	require.Zero(t, counts.Total, "nothing is handed over while the team is paused")

	resumed, err := st.Insights.ResumeSending(ctx, team, time.Now())
	require.NoError(t, err)
	require.True(t, resumed)
	res = handOff(b)
	require.Equal(t, 2, res.Emails)
	got, err = st.Broadcasts.Broadcast(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastSending, got.Status)
}

// TestBroadcastEmailInsights checks that a broadcast's emails are stored
// with the insights an API email of the same content gets (rendered
// subject and HTML, the text part derived from the HTML), from the sandbox sender and from a
// verified domain whose DMARC record its verification found missing.
func TestBroadcastEmailInsights(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	require.NoError(t, st.Domains.CreateDomain(ctx, store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "shop.test",
		Region: "eu-west-1", Status: store.DomainVerified, ReturnPath: "bounce", TLS: store.TLSEnforced,
		DKIMSelector: "sel", DKIMPublicKey: "unused", DKIMPrivateKey: []byte("unused"),
		RecordStatus: map[string]string{records.KeyDMARC: store.DomainFailed}}))
	acts := broadcast.NewActivities(broadcast.ActivitiesConfig{}, st)
	api := submit.New(submit.Config{Store: submit.StoreOf(st)})
	seg, err := st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "all"})
	require.NoError(t, err)
	_, err = st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Email: "delivered@posthaste.test"}, []uuid.UUID{seg.ID}, nil)
	require.NoError(t, err)

	codes := func(is []store.Insight) []string {
		out := []string{}
		for _, i := range is {
			out = append(out, i.Code)
		}
		return out
	}
	for _, tt := range []struct {
		name, from string
		want       []string
	}{
		{"sandbox sender", "onboarding@posthaste.test", []string{"all_caps_subject"}},
		{"verified domain", "Shop <news@shop.test>", []string{"dmarc_missing", "all_caps_subject"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			html := "<p>Hi {{{FIRST_NAME|there}}}, here is our news about tea and coffee.</p>"
			b, err := st.Broadcasts.CreateBroadcast(ctx, store.Broadcast{ID: uuid.Must(uuid.NewV7()), TeamID: team,
				SegmentID: &seg.ID, From: tt.from, Subject: "NEWS FOR {{{FIRST_NAME|YOU}}}", HTML: &html})
			require.NoError(t, err)
			_, err = st.Broadcasts.SendBroadcast(ctx, team, b.ID, nil, nil)
			require.NoError(t, err)
			res, err := acttest.Run[contract.BroadcastChunkInput, contract.BroadcastChunkResult](t,
				acts.HandOffBroadcastChunk, contract.BroadcastChunkInput{BroadcastID: b.ID, Size: 100})
			require.NoError(t, err)
			require.Equal(t, 1, res.Emails)
			queued, _, err := st.Broadcasts.BroadcastRecipients(ctx, team, b.ID, "queued", "", "", store.Page{Limit: 10})
			require.NoError(t, err)
			require.Len(t, queued, 1)
			got, err := st.Emails.GetEmail(ctx, team, queued[0].EmailID)
			require.NoError(t, err)
			require.Equal(t, tt.want, codes(got.Insights))
			require.True(t, got.GenerateText, "a text part is derived from the HTML")

			// The same email sent through the API, HTML only.
			subject, apiHTML := "NEWS FOR YOU", "<p>Hi there, here is our news about tea and coffee.</p>"
			id, err := api.Send(ctx, submit.Sender{TeamID: team}, submit.SendRequest{From: tt.from,
				To: []string{"delivered@posthaste.test"}, Subject: &subject, HTML: &apiHTML})
			require.NoError(t, err)
			want, err := st.Emails.GetEmail(ctx, team, id)
			require.NoError(t, err)
			require.Equal(t, want.Insights, got.Insights)
		})
	}
}
