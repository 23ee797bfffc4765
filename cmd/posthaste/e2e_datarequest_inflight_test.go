package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/workflows"
)

// TestDevErasureOfAddressInFlight erases an address while an email to it
// and to someone else is still being delivered (the MX defers it): the
// email's workflow history names the address, and after the erasure its
// payloads can no longer be decoded. The erasure stops that workflow and
// sends the email on in a new one that names only the other recipient,
// who gets it exactly once when the MX accepts; no workflow is left open.
func TestDevErasureOfAddressInFlight(t *testing.T) {
	var accept atomic.Bool
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{STARTTLS: true, Rcpt: func(rcpt string, _ int) error {
		if accept.Load() {
			return nil
		}
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "try again later"}
	}})
	dns.AddMX("people.test", "mx.people.test", 10)
	dns.AddA("mx.people.test", "127.0.0.1")
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, mx.Port())
	env["POSTHASTE_CODEC_CACHE_TTL"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_INITIAL"] = "1s"
	env["POSTHASTE_DELIVERY_RETRY_MAX"] = "2s"
	env["POSTHASTE_DELIVERY_HEARTBEAT"] = "3s"
	dev := startDev(t, env)
	defer dev.stop(t)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}
	c.verifiedDomain(dns, "shop.test")

	tag := uuid.NewString()[:8]
	bob := "bob-" + tag + "@people.test"
	alice := "alice-" + tag + "@people.test"
	status, r := c.do("POST", "/emails", map[string]any{"from": "Shop <hello@shop.test>",
		"to": []string{bob, alice}, "subject": "News", "text": "Hello both"})
	require.Equal(t, 200, status, r)
	id := r["id"].(string)
	c.waitFor(id, map[string]string{bob: "delivery_delayed", alice: "delivery_delayed"})

	er := c.waitDataRequest(c.dataRequest(bob, "erasure"))
	require.Equal(t, "completed", er["status"], er)
	found := er["found"].(map[string]any)
	require.Equal(t, 1.0, found[store.InFlightEmails], found)
	require.Equal(t, 1.0, found[store.AnonymizedEmails], found)

	accept.Store(true)
	c.waitFor(id, map[string]string{store.ErasedPlaceholder: "canceled", alice: "delivered"})
	msgs := mx.WaitMessages(t, 1, 30*time.Second)
	require.Len(t, msgs, 1)
	require.Equal(t, []string{alice}, msgs[0].To)
	require.NotContains(t, strings.ToLower(string(msgs[0].Data)), strings.ToLower(bob))

	// The first workflow was terminated, its restart completed, and no
	// workflow of the email is still open.
	hostPort := "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	ctx := context.Background()
	d, err := tc.DescribeWorkflowExecution(ctx, workflows.EmailWorkflowID(id), "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, d.WorkflowExecutionInfo.Status)
	restart := workflows.RestartEmailWorkflowID(id, 1)
	var st enums.WorkflowExecutionStatus
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		d, err := tc.DescribeWorkflowExecution(ctx, restart, "")
		require.NoError(t, err)
		if st = d.WorkflowExecutionInfo.Status; st == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			break
		}
		time.Sleep(pollPause(i))
	}
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, st, "the restarted workflow completes")
	open, err := tc.ListOpenWorkflow(ctx, &workflowservice.ListOpenWorkflowExecutionsRequest{MaximumPageSize: 1000})
	require.NoError(t, err)
	for _, ex := range open.Executions {
		require.False(t, strings.Contains(ex.Execution.WorkflowId, id), "workflow %s is still open",
			ex.Execution.WorkflowId)
	}
	require.Len(t, mx.Messages(), 1, "alice got the email once")
	requireAddressErased(t, env, hostPort, bob, alice)
}
