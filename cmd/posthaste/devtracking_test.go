package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// dev tracks under its own address when it has no tracking host, or one
// on this machine; the address is its public URL's, loopback written
// localhost.
func TestDevTrackingURL(t *testing.T) {
	for _, tc := range []struct{ public, want string }{
		{"http://localhost:3000", "http://localhost:3000"},
		{"http://127.0.0.1:8080", "http://localhost:8080"},
		{"http://[::1]:8080", "http://localhost:8080"},
		{"http://192.168.1.5:3000", "http://192.168.1.5:3000"},
		{"https://dev.example.com", "https://dev.example.com"},
		{"http://localhost:0", ""},
		{"", ""},
		{"ftp://localhost:21", ""},
	} {
		require.Equal(t, tc.want, devTrackingURL(tc.public), tc.public)
	}
	for host, want := range map[string]bool{"localhost": true, "LOCALHOST.": true, "app.localhost": true,
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "": false, "track.example.com": false,
		"192.168.1.5": false, "localhost.example.com": false} {
		require.Equal(t, want, isLoopbackHost(host), host)
	}
}
