// Package passwordtest gives tests password pools that hash cheaply.
// Production hashes cost 64 MiB and three passes (RFC 9106), about a second
// each under the race detector; a test that signs users in, or creates
// them, pays that for every user unless it hashes with a Pool from here.
package passwordtest

import (
	"context"
	"testing"

	"github.com/posthaste/posthaste/internal/password"
)

// Memory and Passes are the cost of the Pools of NewPool: 64 KiB (four
// times argon2id's minimum for two lanes) and one pass.
const (
	Memory = 64 // KiB
	Passes = 1
)

// NewPool returns a Pool of its own that hashes at the cheap cost, with
// the default bounds on concurrency. Its Verify accepts hashes of that
// cost or less; a Pool at the default cost verifies its hashes too.
func NewPool() *password.Pool {
	return password.NewPool(password.PoolConfig{Memory: Memory, Passes: Passes})
}

// Hash returns a cheap hash of pw, for users a test stores directly.
func Hash(t testing.TB, pw string) string {
	t.Helper()
	h, err := NewPool().Hash(context.Background(), pw)
	if err != nil {
		t.Fatalf("hashing a password: %v", err)
	}
	return h
}
