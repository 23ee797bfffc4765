package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/postfixtest"
)

// TestDurableReference runs the bench's reference with small counts: each
// run gets a rate only when the instance logged all its messages.
func TestDurableReference(t *testing.T) {
	postfixtest.Require(t, "smtp-source")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := []smtpRun{{conns: 1, messages: 5}, {conns: 4, messages: 20}}
	require.NoError(t, durableReference(ctx, runs, t.Logf))
	for _, r := range runs {
		require.Equal(t, r.messages, r.durable.n)
		require.Positive(t, r.durable.elapsed)
	}
}
