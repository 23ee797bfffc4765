// Package redistest runs a private redis-server on a free loopback port
// for tests that need a real Redis (the shared rate limiter).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Start runs redis-server without persistence until the test ends and
// returns its URL (redis://127.0.0.1:port/0) once it answers PING.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server is needed: apt-get install redis-server (scripts/setup.sh installs it)")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	require.Eventually(t, func() bool { return rdb.Ping(context.Background()).Err() == nil },
		10*time.Second, 20*time.Millisecond, "redis-server did not start")
	return url
}
