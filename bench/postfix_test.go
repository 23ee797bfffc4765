package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// needPostfix skips the test when this machine cannot run a throwaway
// Postfix instance, saying what is missing; the bench skips its Postfix
// reference for the same reason.
func needPostfix(t *testing.T) {
	t.Helper()
	if why := postfixUnavailable(); why != "" {
		t.Skip(why)
	}
}

// TestDurableReference runs the bench's reference with small counts: each
// run gets a rate only when the instance logged all its messages.
func TestDurableReference(t *testing.T) {
	needPostfix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := []smtpRun{{conns: 1, messages: 5}, {conns: 4, messages: 20}}
	require.NoError(t, durableReference(ctx, runs, t.Logf))
	for _, r := range runs {
		require.Equal(t, r.messages, r.durable.n)
		require.Positive(t, r.durable.elapsed)
	}
}
