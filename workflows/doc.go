// Package workflows holds Posthaste's Temporal workflows: deterministic code
// only. Workflows call activities through the method signatures of
// activities.Activities (a nil receiver), never do I/O, never read the wall
// clock or start goroutines, and carry ids rather than bodies in their
// inputs, because Temporal payloads are capped at 2 MB.
package workflows
