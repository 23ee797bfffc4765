package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/client"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/passwordtest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/internal/usage"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// newAPI serves the real API over a private PostgreSQL database and
// returns a client with a full-access key.
func newAPI(t *testing.T) *client.Client {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	h, err := api.New(api.Config{
		Auth:     auth.NewAuthenticator(st.Accounts, time.Second),
		Submit:   submit.New(submit.Config{Store: submit.StoreOf(st)}),
		Emails:   submit.NewEmails(st.Emails),
		Usage:    usage.New(st.Insights, st.Accounts),
		Accounts: account.New(account.Config{Store: st}),
		AuditLog: auditlog.New(st),
	})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	team, err := account.NewTeam(ctx, st, passwordtest.NewPool(), "Acme", "owner@acme.test")
	require.NoError(t, err)
	c, err := client.New(client.Config{BaseURL: srv.URL + "/", APIKey: team.APIKey})
	require.NoError(t, err)
	return c
}

func TestEmailsAgainstTheAPI(t *testing.T) {
	ctx := context.Background()
	c := newAPI(t)
	text := "Hi"
	req := &client.SendEmailRequest{From: "Acme <onboarding@posthaste.test>", To: []string{"delivered@posthaste.test"},
		Subject: "Welcome", HTML: "<p>Hi</p>", Text: &text, Tags: []client.Tag{{Name: "kind", Value: "welcome"}},
		ScheduledAt: "in 1 hour"}
	sent, err := c.Emails.Send(ctx, req, &client.SendOptions{IdempotencyKey: "welcome/1"})
	require.NoError(t, err)
	again, err := c.Emails.Send(ctx, req, &client.SendOptions{IdempotencyKey: "welcome/1"})
	require.NoError(t, err)
	require.Equal(t, sent.ID, again.ID)

	e, err := c.Emails.Get(ctx, sent.ID)
	require.NoError(t, err)
	require.Equal(t, "scheduled", e.LastEvent)
	require.Equal(t, "Welcome", e.Subject)
	require.Equal(t, []client.Tag{{Name: "kind", Value: "welcome"}}, e.Tags)
	require.NotNil(t, e.ScheduledAt)

	ref, err := c.Emails.Update(ctx, sent.ID, &client.UpdateEmailRequest{ScheduledAt: "tomorrow at 9am"})
	require.NoError(t, err)
	require.Equal(t, client.ObjectRef{Object: "email", ID: sent.ID}, *ref)
	ref, err = c.Emails.Cancel(ctx, sent.ID)
	require.NoError(t, err)
	require.Equal(t, sent.ID, ref.ID)
	_, err = c.Emails.Update(ctx, sent.ID, &client.UpdateEmailRequest{ScheduledAt: "in 2 hours"})
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, client.ErrValidation, apiErr.Name)
	require.Equal(t, 422, apiErr.StatusCode)
	require.False(t, apiErr.Temporary())

	batch := []client.SendEmailRequest{
		{From: "onboarding@posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "1", HTML: "<p>1</p>"},
		{From: "onboarding@posthaste.test", Subject: "no recipient", HTML: "<p>2</p>"},
	}
	res, err := c.Emails.SendBatch(ctx, batch, &client.BatchOptions{Validation: client.BatchPermissive, IdempotencyKey: "b1"})
	require.NoError(t, err)
	require.Len(t, res.Data, 1)
	require.Equal(t, []client.BatchError{{Index: 1, Message: "Missing `to` field."}}, res.Errors)
	_, err = c.Emails.SendBatch(ctx, batch, &client.BatchOptions{IdempotencyKey: "b1"})
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, client.ErrInvalidIdempotentRequest, apiErr.Name, "another mode is another request")
	_, err = c.Emails.SendBatch(ctx, batch, nil)
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, client.ErrMissingRequiredField, apiErr.Name)

	list, err := c.Emails.List(ctx, &client.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.True(t, list.HasMore)
	require.Len(t, list.Data, 1)
	require.Nil(t, list.Data[0].HTML)
	_, err = c.Emails.Get(ctx, "00000000-0000-4000-8000-000000000000")
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, client.ErrNotFound, apiErr.Name)
}

func TestAPIKeysAgainstTheAPI(t *testing.T) {
	ctx := context.Background()
	c := newAPI(t)
	k, err := c.APIKeys.Create(ctx, &client.CreateAPIKeyRequest{Name: "ci", Permission: client.SendingAccess})
	require.NoError(t, err)
	require.NotEmpty(t, k.Token)
	keys, err := c.APIKeys.List(ctx, nil)
	require.NoError(t, err)
	require.Len(t, keys.Data, 2)
	d, err := c.APIKeys.Delete(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, client.Deleted{Object: "api_key", ID: k.ID, Deleted: true}, *d)
}

// TestDomains checks the wire shapes of the domain calls against a
// recording server (the server side is not part of this package).
func TestDomains(t *testing.T) {
	type call struct {
		method, path string
		body         map[string]any
	}
	var calls []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// assert, not require: handlers run on the server's goroutines.
		assert.Equal(t, "Bearer ph_key", r.Header.Get("Authorization"))
		cl := call{method: r.Method, path: r.URL.RequestURI()}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			assert.NoError(t, json.Unmarshal(b, &cl.body))
		}
		calls = append(calls, cl)
		w.Header().Set("Content-Type", "application/json")
		domain := `{"object":"domain","id":"d1","name":"example.com","status":"not_started","created_at":"2026-11-22T10:00:00.000000Z",
			"region":"eu-west-1","open_tracking":false,"click_tracking":true,"tls":"enforced","records":[
			{"record":"DKIM","name":"ph1._domainkey","type":"TXT","ttl":"Auto","status":"not_started","value":"v=DKIM1; k=rsa; p=AAA"},
			{"record":"SPF","name":"send","type":"MX","ttl":"Auto","status":"not_started","value":"bounce.posthaste.example","priority":10}]}`
		switch {
		case r.Method == "POST" && r.URL.Path == "/domains":
			w.WriteHeader(201)
			io.WriteString(w, domain)
		case r.Method == "GET" && r.URL.Path == "/domains":
			io.WriteString(w, `{"object":"list","has_more":false,"data":[{"object":"domain","id":"d1","name":"example.com","status":"pending"}]}`)
		case r.Method == "GET":
			io.WriteString(w, domain)
		case r.Method == "PATCH", r.Method == "POST":
			io.WriteString(w, `{"object":"domain","id":"d1"}`)
		case r.Method == "DELETE":
			io.WriteString(w, `{"object":"domain","id":"d1","deleted":true}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: "ph_key"})
	require.NoError(t, err)
	yes, no := true, false
	d, err := c.Domains.Create(ctx, &client.CreateDomainRequest{Name: "example.com", Region: "eu-west-1", ClickTracking: &yes, TLS: "enforced"})
	require.NoError(t, err)
	require.Equal(t, "d1", d.ID)
	require.Len(t, d.Records, 2)
	require.Equal(t, 10, *d.Records[1].Priority)
	list, err := c.Domains.List(ctx, &client.ListOptions{Limit: 5, After: "d0"})
	require.NoError(t, err)
	require.Equal(t, "pending", list.Data[0].Status)
	got, err := c.Domains.Get(ctx, "d1")
	require.NoError(t, err)
	require.True(t, got.ClickTracking)
	ref, err := c.Domains.Update(ctx, "d1", &client.UpdateDomainRequest{OpenTracking: &no})
	require.NoError(t, err)
	require.Equal(t, "domain", ref.Object)
	_, err = c.Domains.Verify(ctx, "d1")
	require.NoError(t, err)
	del, err := c.Domains.Delete(ctx, "d1")
	require.NoError(t, err)
	require.True(t, del.Deleted)
	require.Equal(t, []call{
		{"POST", "/domains", map[string]any{"name": "example.com", "region": "eu-west-1", "click_tracking": true, "tls": "enforced"}},
		{"GET", "/domains?after=d0&limit=5", nil},
		{"GET", "/domains/d1", nil},
		{"PATCH", "/domains/d1", map[string]any{"open_tracking": false}},
		{"POST", "/domains/d1/verify", nil},
		{"DELETE", "/domains/d1", nil},
	}, calls)
}

func TestErrorsCarryRateLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"default";q=10;w=1`)
		w.Header().Set("RateLimit-Limit", "10")
		w.Header().Set("RateLimit-Remaining", "0")
		w.Header().Set("RateLimit-Reset", "1")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(429)
		io.WriteString(w, `{"statusCode":429,"message":"Too many requests.","name":"rate_limit_exceeded"}`)
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: "k"})
	require.NoError(t, err)
	_, err = c.Emails.List(context.Background(), nil)
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, client.Error{StatusCode: 429, Name: client.ErrRateLimitExceeded, Message: "Too many requests.",
		RateLimit: client.RateLimit{Limit: 10, Remaining: 0, Reset: time.Second, RetryAfter: 2 * time.Second,
			Policy: `"default";q=10;w=1`}}, *apiErr)
	require.True(t, apiErr.Temporary())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Emails.List(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)

	_, err = client.New(client.Config{BaseURL: "localhost:3000"})
	require.Error(t, err)
}
