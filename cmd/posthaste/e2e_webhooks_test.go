package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/workflows"
)

// recordHistory checks the size of a workflow's history and, when
// POSTHASTE_WRITE_HISTORIES names a directory, writes it there as JSON for
// the replay tests of package workflows. It returns the history.
func recordHistory(t *testing.T, tc client.Client, workflowID, name string, maxEvents int) *historypb.History {
	t.Helper()
	return recordDecodedHistory(t, tc, nil, workflowID, name, maxEvents)
}

// recordDecodedHistory is recordHistory for a history whose payloads the
// codec encrypted: pc (nil: none) decodes them before the fixture is
// written, as the replay tests read fixtures without the keys.
func recordDecodedHistory(t *testing.T, tc client.Client, pc *codec.Codec, workflowID, name string, maxEvents int) *historypb.History {
	t.Helper()
	it := tc.GetWorkflowHistory(t.Context(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	t.Logf("%s: %d history events", name, len(h.Events))
	require.LessOrEqual(t, len(h.Events), maxEvents, "a workflow keeps its history small")
	dir := os.Getenv("POSTHASTE_WRITE_HISTORIES")
	if dir == "" {
		return &h
	}
	if pc != nil {
		for _, p := range encryptedPayloads(h.ProtoReflect()) {
			out, err := pc.Decode([]*commonpb.Payload{p})
			require.NoError(t, err)
			proto.Reset(p)
			proto.Merge(p, out[0])
		}
	}
	requireReplayable(t, &h)
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	return &h
}

// hookReceiver is a loopback endpoint that checks every signature with the
// Standard Webhooks library and records the events in arrival order.
type hookReceiver struct {
	t      *testing.T
	mu     sync.Mutex
	secret string
	status int
	got    []hookEvent
	srv    *httptest.Server
}

type hookEvent struct {
	ID, Type, EmailID string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{t: t, status: 200}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(r.secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		if err != nil {
			t.Errorf("signature of %s does not verify: %v", req.Header.Get("webhook-id"), err)
			w.WriteHeader(400)
			return
		}
		var p struct {
			Type string
			Data struct {
				EmailID string `json:"email_id"`
			}
		}
		require.NoError(t, json.Unmarshal(body, &p))
		r.got = append(r.got, hookEvent{req.Header.Get("webhook-id"), p.Type, p.Data.EmailID})
		w.WriteHeader(r.status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) events() []hookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookEvent(nil), r.got...)
}

func (r *hookReceiver) waitFor(n int) []hookEvent {
	r.t.Helper()
	var got []hookEvent
	eventually(r.t, 30*time.Second, func() error {
		if got = r.events(); len(got) < n {
			return fmt.Errorf("the receiver got %v, want %d events", got, n)
		}
		return nil
	})
	return got
}

// TestDevWebhooks sends sandbox mail through `posthaste dev` and checks
// that its events reach a loopback endpoint signed and in order, then goes
// through the delivery log, a replay, a test event, a rotation and an
// endpoint answering 410, whose owners are told by email.
func TestDevWebhooks(t *testing.T) {
	dataDir := t.TempDir()
	env := map[string]string{
		"POSTHASTE_DATA_DIR":         dataDir,
		"POSTHASTE_HTTP_ADDR":        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"POSTHASTE_TEMPORAL_PORT":    fmt.Sprint(freePort(t)),
		"POSTHASTE_TEMPORAL_UI_PORT": "0",
		"POSTHASTE_ADMIN_EMAIL":      "delivered+owner@posthaste.test",
		"POSTHASTE_SYSTEM_FROM":      "Posthaste <onboarding@posthaste.test>",
		"POSTHASTE_WEBHOOK_RETRY":    "200ms,200ms,200ms",
		"POSTHASTE_LOG_LEVEL":        "warn",
	}
	t.Cleanup(func() { removeRelocatedCluster(t, dataDir) })
	dev := startDev(t, env)
	defer dev.stop(t)
	creds := readCredentials(t, dataDir)
	c := apiClient{t: t, base: dev.base, key: creds.APIKey}
	recv := newHookReceiver(t)

	// Validation.
	status, out := c.do("POST", "/webhooks", map[string]any{"endpoint": "ftp://example.com/", "events": []string{"email.sent"}})
	require.Equal(t, 422, status, out)
	status, out = c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL, "events": []string{"email.nope"}})
	require.Equal(t, 422, status, out)
	require.Equal(t, "validation_error", out["name"])
	status, out = c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL})
	require.Equal(t, 422, status, out)
	require.Equal(t, "missing_required_field", out["name"])

	status, out = c.do("POST", "/webhooks", map[string]any{"endpoint": recv.srv.URL + "/hook",
		"events": []string{"email.sent", "email.delivered"}})
	require.Equal(t, 201, status, out)
	hookID := out["id"].(string)
	recv.mu.Lock()
	recv.secret = out["signing_secret"].(string)
	recv.mu.Unlock()
	require.Regexp(t, `^whsec_`, recv.secret)
	require.NotContains(t, dev.out.String(), recv.secret, "the secret is never logged")
	status, out = c.do("GET", "/webhooks/"+hookID, nil)
	require.Equal(t, 200, status, out)
	require.Equal(t, recv.secret, out["signing_secret"])
	require.Equal(t, "enabled", out["status"])
	status, _ = c.do("GET", "/webhooks/0196a0a0-0000-7000-8000-000000000000", nil)
	require.Equal(t, 404, status)

	// A sandbox send: email.sent, then email.delivered, in order.
	id := c.send(map[string]any{"from": "Acme <onboarding@posthaste.test>", "to": "delivered@posthaste.test",
		"subject": "Webhooks", "text": "hi"})
	got := recv.waitFor(2)
	require.Equal(t, []string{"email.sent", "email.delivered"}, []string{got[0].Type, got[1].Type})
	require.Equal(t, id, got[0].EmailID)
	require.Equal(t, id, got[1].EmailID)

	// The delivery log.
	status, out = c.do("GET", "/webhooks/"+hookID+"/events", nil)
	require.Equal(t, 200, status, out)
	evs := out["data"].([]any)
	require.Len(t, evs, 2)
	first := evs[1].(map[string]any)
	require.Equal(t, got[0].ID, first["id"])
	require.Equal(t, "success", first["status"])
	status, out = c.do("GET", "/webhooks/"+hookID+"/events/"+got[0].ID, nil)
	require.Equal(t, 200, status, out)
	require.Equal(t, "email.sent", out["payload"].(map[string]any)["type"])
	require.Nil(t, out["next_attempt_at"])
	status, out = c.do("GET", "/webhooks/"+hookID+"/events/"+got[0].ID+"/attempts", nil)
	require.Equal(t, 200, status, out)
	attempts := out["data"].([]any)
	require.Len(t, attempts, 1)
	require.EqualValues(t, 200, attempts[0].(map[string]any)["response_status"])

	// Replay: the same id once more.
	status, out = c.do("POST", "/webhooks/"+hookID+"/events/"+got[0].ID+"/replay", nil)
	require.Equal(t, 200, status, out)
	got = recv.waitFor(3)
	require.Equal(t, hookEvent{got[0].ID, "email.sent", id}, got[2])

	// A test event answers with its attempt.
	status, out = c.do("POST", "/webhooks/"+hookID+"/test", map[string]any{"type": "email.bounced"})
	require.Equal(t, 200, status, out)
	require.EqualValues(t, 200, out["response_status"])
	require.Equal(t, "email.bounced", recv.waitFor(4)[3].Type)

	// Rotation: the receiver still verifies with the old secret (both sign).
	status, out = c.do("POST", "/webhooks/"+hookID+"/signing-secret/rotate", nil)
	require.Equal(t, 200, status, out)
	require.NotEqual(t, recv.secret, out["signing_secret"])
	status, out = c.do("POST", "/webhooks/"+hookID+"/test", nil)
	require.Equal(t, 200, status, out)
	require.EqualValues(t, 200, out["response_status"])

	// 410 disables the endpoint; the owner is told by email.
	recv.mu.Lock()
	recv.status = http.StatusGone
	recv.mu.Unlock()
	c.send(map[string]any{"from": "Acme <onboarding@posthaste.test>", "to": "delivered@posthaste.test",
		"subject": "Gone", "text": "hi"})
	eventually(t, 30*time.Second, func() error {
		status, out = c.do("GET", "/webhooks/"+hookID, nil)
		require.Equal(t, 200, status)
		if out["status"] != "disabled" {
			return fmt.Errorf("the endpoint was not disabled: %v", out)
		}
		return nil
	})
	// Its delivery workflow has ended; its history is small and replays.
	tc, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer tc.Close()
	require.NoError(t, tc.GetWorkflow(t.Context(), workflows.WebhookWorkflowID(hookID), "").Get(t.Context(), nil))
	recordHistory(t, tc, workflows.WebhookWorkflowID(hookID), "deliverwebhook_gone.json", 60)

	eventually(t, 30*time.Second, func() error {
		_, out = c.do("GET", "/emails", nil)
		for _, e := range out["data"].([]any) {
			if e.(map[string]any)["subject"] == "Your webhook endpoint was disabled" {
				return nil
			}
		}
		return fmt.Errorf("no notice email: %v", out)
	})

	// A domain.* event carries the domain's records, as GET /domains/{id}
	// shows them (Resend's payload).
	domainRecv := newHookReceiver(t)
	status, out = c.do("POST", "/webhooks", map[string]any{"endpoint": domainRecv.srv.URL + "/hook",
		"events": []string{"domain.created"}})
	require.Equal(t, 201, status, out)
	domainHook := out["id"].(string)
	domainRecv.mu.Lock()
	domainRecv.secret = out["signing_secret"].(string)
	domainRecv.mu.Unlock()
	status, out = c.do("POST", "/domains", map[string]any{"name": "hooks-records.example"})
	require.Equal(t, 201, status, out)
	wantRecords := out["records"]
	require.NotEmpty(t, wantRecords)
	status, out = c.do("GET", "/webhooks/"+domainHook+"/events", nil)
	require.Equal(t, 200, status, out)
	require.Len(t, out["data"], 1)
	msg := out["data"].([]any)[0].(map[string]any)
	status, out = c.do("GET", "/webhooks/"+domainHook+"/events/"+msg["id"].(string), nil)
	require.Equal(t, 200, status, out)
	data := out["payload"].(map[string]any)["data"].(map[string]any)
	require.Equal(t, "hooks-records.example", data["name"])
	require.Equal(t, wantRecords, data["records"])
}
