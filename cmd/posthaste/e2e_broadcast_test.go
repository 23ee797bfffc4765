package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/workflows"
)

// broadcastAudience imports n sandbox contacts (delivered+<i>@posthaste.test,
// first name Reader<i>, company Acme, except contact noCompany) into a new
// segment and returns the segment's id.
func (c apiClient) broadcastAudience(n, noCompany int) string {
	c.t.Helper()
	status, body := c.do("POST", "/contact-properties", map[string]any{"key": "company", "type": "string"})
	require.Equal(c.t, 201, status, body)
	status, seg := c.do("POST", "/segments", map[string]any{"name": "Readers"})
	require.Equal(c.t, 201, status, seg)
	var csv strings.Builder
	csv.WriteString("email,first_name,company\n")
	for i := range n {
		company := "Acme"
		if i == noCompany {
			company = ""
		}
		fmt.Fprintf(&csv, "delivered+%d@posthaste.test,Reader%d,%s\n", i, i, company)
	}
	imp := c.waitImport(c.uploadImport(csv.String(), map[string]string{"segments": `["` + seg["id"].(string) + `"]`}))
	require.Equal(c.t, "completed", imp["status"], imp)
	return seg["id"].(string)
}

// waitBroadcast polls a broadcast until done says it is finished, and
// returns it.
func (c apiClient) waitBroadcast(id string, timeout time.Duration, done func(map[string]any) bool) map[string]any {
	c.t.Helper()
	var last map[string]any
	eventually(c.t, timeout, func() error {
		status, b := c.do("GET", "/broadcasts/"+id, nil)
		if status == 200 { // the process may be restarting
			last = b
			if done(b) {
				return nil
			}
		}
		return fmt.Errorf("broadcast %s did not get there; last: %v", id, last)
	})
	return last
}

func count(b map[string]any, name string) int {
	return int(b["counts"].(map[string]any)[name].(float64))
}

// TestDevBroadcast sends a broadcast to 450 sandbox contacts through
// `posthaste dev` run as a process of its own, which SIGKILLs itself right
// after its third chunk was handed to the send path and before the
// workflow learned of it; restarted, it finishes the broadcast. Every
// contact gets one email exactly, rendered with its own variables and
// carrying its own one-click unsubscribe link, except the one that
// unsubscribed and the one that opted out of the broadcast's topic; the
// contact whose variables do not render gets an email recorded failed
// with the reason; all reach a final state and the counts add up.
func TestDevBroadcast(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	env := dbDevEnv(t, dbURL)
	smtpListen(t, env)
	env["POSTHASTE_STEP_RETRY_MAX"] = "1s"
	env["POSTHASTE_DEFAULT_RATE_LIMIT"] = "100000"
	env["POSTHASTE_BROADCAST_RATE"] = "1000000"
	env["POSTHASTE_PUBLIC_URL"] = "http://" + env["POSTHASTE_HTTP_ADDR"]
	crashing := maps.Clone(env)
	crashing["POSTHASTE_TEST_CRASH_AT"] = "after-broadcast-chunk:3"
	dev := spawn(t, crashing, "dev", `"msg":"ready"`)
	c := apiClient{t: t, base: "http://" + env["POSTHASTE_HTTP_ADDR"], key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}

	const n, noCompany, unsubscribed, optedOut = 450, 7, 3, 5
	seg := c.broadcastAudience(n, noCompany)
	status, topic := c.do("POST", "/topics", map[string]any{"name": "News", "default_subscription": "opt_in"})
	require.Equal(t, 201, status, topic)
	status, body := c.do("PATCH", fmt.Sprintf("/contacts/delivered+%d@posthaste.test", unsubscribed),
		map[string]any{"unsubscribed": true})
	require.Equal(t, 200, status, body)
	status, body = c.do("PATCH", fmt.Sprintf("/contacts/delivered+%d@posthaste.test/topics", optedOut),
		[]map[string]any{{"id": topic["id"], "subscription": "opt_out"}})
	require.Equal(t, 200, status, body)

	status, b := c.do("POST", "/broadcasts", map[string]any{
		"name": "November", "segment_id": seg, "topic_id": topic["id"], "from": "Acme <onboarding@posthaste.test>",
		"subject": "News for {{{FIRST_NAME|you}}}", "preview_text": "What {{{contact.company}}} did",
		"html": `<p>Hi {{{contact.first_name}}} of {{{company}}}</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`,
		"send": true})
	require.Equal(t, 201, status, b)
	id := b["id"].(string)

	requireKilled(t, dev, 2*time.Minute, crashing["POSTHASTE_TEST_CRASH_AT"])
	spawn(t, env, "dev", `"msg":"ready"`)

	want := n - 2 // all but the unsubscribed and the opted-out contact
	final := c.waitBroadcast(id, 3*time.Minute, func(b map[string]any) bool {
		return b["status"] == "sent" && count(b, "delivered")+count(b, "failed") == want
	})
	require.Equal(t, want, count(final, "recipients"), final)
	require.Equal(t, want-1, count(final, "delivered"), final)
	require.Equal(t, 1, count(final, "failed"), final)
	require.NotEmpty(t, final["sent_at"])

	st := devStore(t, dbURL, env["POSTHASTE_DATA_DIR"])
	seen := map[string]bool{}
	for after := ""; ; {
		status, page := c.do("GET", "/broadcasts/"+id+"/recipients?limit=100"+after, nil)
		require.Equal(t, 200, status, page)
		data := page["data"].([]any)
		for _, d := range data {
			r := d.(map[string]any)
			email := r["email"].(string)
			require.False(t, seen[email], "%s got the broadcast twice", email)
			seen[email] = true
			require.Contains(t, []any{store.EventDelivered, store.EventFailed}, r["status"], email)
		}
		if page["has_more"] != true {
			break
		}
		after = "&after=" + data[len(data)-1].(map[string]any)["id"].(string)
	}
	require.Len(t, seen, want)
	for _, skipped := range []int{unsubscribed, optedOut} {
		require.False(t, seen[fmt.Sprintf("delivered+%d@posthaste.test", skipped)])
	}

	// The failed contact says why; the others got their own rendering and link.
	status, failed := c.do("GET", "/broadcasts/"+id+"/recipients?type=failed", nil)
	require.Equal(t, 200, status, failed)
	require.Len(t, failed["data"], 1)
	fr := failed["data"].([]any)[0].(map[string]any)
	require.Equal(t, fmt.Sprintf("delivered+%d@posthaste.test", noCompany), fr["email"])
	evs := events(t, st, fr["id"].(string))
	require.Equal(t, store.EventFailed+":"+fr["email"].(string), evs[len(evs)-1])

	status, some := c.do("GET", "/broadcasts/"+id+"/recipients?type=delivered&email=delivered%2B12@posthaste.test", nil)
	require.Equal(t, 200, status, some)
	require.Len(t, some["data"], 1)
	emailID := some["data"].([]any)[0].(map[string]any)["id"].(string)
	status, em := c.do("GET", "/emails/"+emailID, nil)
	require.Equal(t, 200, status, em)
	require.Equal(t, id, em["broadcast_id"])
	require.Equal(t, "News for Reader12", em["subject"])
	require.Contains(t, em["html"], "Hi Reader12 of Acme")
	require.Contains(t, em["html"], "What Acme did", "the preview text is the preheader")
	msg, err := st.Emails.Message(ctx, uuid.MustParse(emailID))
	require.NoError(t, err)
	require.NotContains(t, string(msg), "List-Unsubscribe", "the stored copy has no recipient's link")

	saveWorkflowHistory(t, "127.0.0.1:"+env["POSTHASTE_TEMPORAL_PORT"],
		workflows.BroadcastWorkflowID(id), "broadcast_crash.json", 200)
}

// TestDevBroadcastCancel cancels a broadcast paced to one chunk a second
// after its first chunk went out: no chunk follows, the workflow ends, and
// what was handed over still reaches its outcome.
func TestDevBroadcastCancel(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	env := dbDevEnv(t, dbURL)
	env["POSTHASTE_DEFAULT_RATE_LIMIT"] = "100000"
	env["POSTHASTE_BROADCAST_RATE"] = "50" // a chunk of 100 every 2 s
	dev := startDev(t, env)
	defer dev.stop(t)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}
	seg := c.broadcastAudience(1000, -1)
	status, b := c.do("POST", "/broadcasts", map[string]any{"segment_id": seg, "from": "onboarding@posthaste.test",
		"subject": "Hi {{{FIRST_NAME}}}", "text": "Hello {{{FIRST_NAME}}}", "send": true})
	require.Equal(t, 201, status, b)
	id := b["id"].(string)
	c.waitBroadcast(id, time.Minute, func(b map[string]any) bool { return count(b, "recipients") >= 100 })
	status, body := c.do("POST", "/broadcasts/"+id+"/cancel", nil)
	require.Equal(t, 200, status, body)

	tc, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer tc.Close()
	eventually(t, time.Minute, func() error {
		d, err := tc.DescribeWorkflowExecution(context.Background(), workflows.BroadcastWorkflowID(id), "")
		require.NoError(t, err)
		if d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return fmt.Errorf("the canceled broadcast's workflow did not end: %v", d.WorkflowExecutionInfo.Status)
		}
		return nil
	})
	final := c.waitBroadcast(id, time.Minute, func(b map[string]any) bool {
		return count(b, "delivered") == count(b, "recipients")
	})
	require.Equal(t, "canceled", final["status"])
	handed := count(final, "recipients")
	require.Less(t, handed, 1000, "chunks went on after the cancel")
	require.Equal(t, handed, count(final, "delivered"), final)
	t.Logf("canceled after %d of 1000 contacts", handed)
}
