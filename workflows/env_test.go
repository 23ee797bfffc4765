package workflows

import (
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
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
