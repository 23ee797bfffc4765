package webhook_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/webhook"
)

type wakes []string

func (w *wakes) Wake(_ context.Context, id string) error { *w = append(*w, id); return nil }

// Bad endpoints and event types are refused before anything is stored,
// each naming its field.
func TestCreateRefusesBadInput(t *testing.T) {
	e := webhook.NewEndpoints(webhook.EndpointsConfig{}, nil) // no store: nothing may reach it
	for _, tc := range []struct {
		endpoint string
		events   []string
		field    string
	}{
		{"http://example.com/hook", []string{"email.sent"}, "endpoint"},
		{"/hook", []string{"email.sent"}, "endpoint"},
		{"https://example.com/hook", nil, "events"},
		{"https://example.com/hook", []string{"email.nope"}, "events"},
	} {
		_, _, err := e.Create(context.Background(), uuid.New(), tc.endpoint, tc.events, audit.Entry{})
		var ie *invalid.Error
		require.ErrorAs(t, err, &ie, tc.endpoint)
		require.Equal(t, tc.field, ie.Field)
	}
	_, _, err := e.Create(context.Background(), uuid.New(), "https://example.com/hook", []string{"email.sent"}, audit.Entry{})
	require.ErrorIs(t, err, webhook.ErrNoMasterKey)
}

// Each change records its audit entry (the status in the detail of
// SetStatus); events, their attempts and replays go through the service.
func TestEndpointsRecordAndReplay(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	box, err := seal.New(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	var woken wakes
	e := webhook.NewEndpoints(webhook.EndpointsConfig{Keys: box, AllowHTTP: true, Waker: &woken,
		Client: webhook.NewClient(egress.New(egress.Config{AllowPrivate: true}), webhook.ClientConfig{Timeout: 2 * time.Second})}, st)
	require.True(t, e.CanTest())
	key := uuid.Must(uuid.NewV7())
	actor := audit.Entry{ActorType: audit.ActorAPIKey, ActorID: &key}

	w, secret, err := e.Create(ctx, team, srv.URL, []string{"email.sent"}, actor)
	require.NoError(t, err)
	require.Contains(t, secret, "whsec_")
	list, _, err := e.List(ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = e.Get(ctx, uuid.Must(uuid.NewV7()), w.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's endpoint")

	at, err := e.Test(ctx, w, "")
	require.NoError(t, err)
	msgs, _, err := e.Messages(ctx, team, w.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m, err := e.Message(ctx, team, w.ID, at.MessageID)
	require.NoError(t, err)
	require.Equal(t, store.MessageSuccess, m.Status)
	attempts, err := e.Attempts(ctx, team, m.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)

	require.NoError(t, e.SetStatus(ctx, team, w.ID, store.WebhookDisabled, actor))
	w, err = e.Get(ctx, team, w.ID)
	require.NoError(t, err)
	require.ErrorIs(t, e.Replay(ctx, w, m.ID), webhook.ErrDisabled)
	require.NoError(t, e.Update(ctx, team, w.ID, webhook.Change{Status: new(string(store.WebhookEnabled))}, actor))
	w, err = e.Get(ctx, team, w.ID)
	require.NoError(t, err)
	woken = nil
	require.NoError(t, e.Replay(ctx, w, m.ID))
	require.Equal(t, wakes{w.ID.String()}, woken, "the replay wakes the delivery")
	m, err = e.Message(ctx, team, w.ID, m.ID)
	require.NoError(t, err)
	require.Equal(t, store.MessagePending, m.Status)

	_, err = e.Rotate(ctx, w, actor)
	require.NoError(t, err)
	require.NoError(t, e.Delete(ctx, team, w.ID, actor))

	entries, _, err := auditlog.New(st).List(ctx, team, audit.Filter{TargetID: w.ID.String()}, store.Page{Limit: 10})
	require.NoError(t, err)
	var got []string
	for _, x := range entries {
		require.Equal(t, key, *x.ActorID)
		got = append(got, string(x.Action)+" "+x.Detail)
	}
	require.Equal(t, []string{"webhook.delete {}", "webhook.rotate_secret {}", "webhook.update {}",
		`webhook.update {"status":"disabled"}`, "webhook.create {}"}, got, "newest first")
}
