// Package workflows holds Posthaste's Temporal workflows: deterministic code
// only. Workflows call activities by their registered names, with the
// inputs and outputs of package contract, and import nothing that does I/O
// (TestNoIO); they never read the wall clock or start goroutines, and carry
// ids rather than bodies in their inputs, because Temporal payloads are
// capped at 2 MB.
package workflows
