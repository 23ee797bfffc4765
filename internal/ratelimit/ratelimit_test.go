package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLocalBurstRefillAndReset(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLocal()
	l.now = func() time.Time { return now }
	ctx := context.Background()
	for i := range 4 {
		r, err := l.Allow(ctx, "team:a", 4)
		require.NoError(t, err)
		require.True(t, r.Allowed, i)
		require.Equal(t, 4, r.Limit)
		require.Equal(t, 3-i, r.Remaining)
		require.Equal(t, 1, r.ResetSeconds())
	}
	r, _ := l.Allow(ctx, "team:a", 4)
	require.False(t, r.Allowed)
	require.Equal(t, 0, r.Remaining)
	require.Equal(t, 250*time.Millisecond, r.RetryAfter)
	require.Equal(t, 1, r.RetryAfterSeconds())

	other, _ := l.Allow(ctx, "team:b", 4)
	require.True(t, other.Allowed, "keys have their own buckets")

	now = now.Add(250 * time.Millisecond) // one token back
	r, _ = l.Allow(ctx, "team:a", 4)
	require.True(t, r.Allowed)
	require.Equal(t, 0, r.Remaining)

	// A new limit for the key starts a new, full bucket.
	r, _ = l.Allow(ctx, "team:a", 10)
	require.True(t, r.Allowed)
	require.Equal(t, 9, r.Remaining)
}

func TestLocalDropsIdleBuckets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLocal()
	l.now = func() time.Time { return now }
	for i := range maxIdleBuckets {
		_, _ = l.Allow(context.Background(), fmt.Sprint(i), 10)
	}
	now = now.Add(2 * time.Second)
	_, _ = l.Allow(context.Background(), "new", 10)
	require.Len(t, l.buckets, 1, "full buckets were dropped")
}
