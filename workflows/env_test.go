package workflows

import (
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/webhook"
)

// The activities, registered by the tests (on nil receivers) under their
// contract names so that the mocks' signatures are checked against the
// real ones, each from the package of its area.
var (
	sendingActs     *delivery.Sending
	reconcilerActs  *delivery.Reconciler
	inboundActs     *receiving.Activities
	retentionActs   *datareq.Retention
	domainActs      *domains.Activities
	importActs      *imports.Activities
	broadcastActs   *broadcast.Activities
	dataRequestActs *datareq.Activities
	webhookActs     *webhook.Activities
)

// testEnv is a workflow test environment whose deadlock detector gives a
// workflow task a minute: under -race on a loaded 2-core machine the SDK's
// 1 s default fires on code that never blocks.
func testEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}
