package workflows

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ioModules are the modules whose packages do I/O that workflows must not
// link: PostgreSQL, SMTP and Redis.
var ioModules = []string{"github.com/jackc/pgx", "github.com/emersion/go-smtp", "github.com/redis/go-redis"}

// forbiddenDeps lists the packages that pkgs link (go list -deps, without
// tests) that workflows may not: those of ioModules, and those of this
// module outside workflows/ (the activities, the store, the SMTP client...).
func forbiddenDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	require.NoError(t, err, "go list -deps %v", pkgs)
	var bad []string
	for _, dep := range strings.Fields(string(out)) {
		for _, m := range ioModules {
			if dep == m || strings.HasPrefix(dep, m+"/") {
				bad = append(bad, dep)
			}
		}
		if strings.HasPrefix(dep, "github.com/posthaste/posthaste/") &&
			!strings.HasPrefix(dep, "github.com/posthaste/posthaste/workflows") {
			bad = append(bad, dep)
		}
	}
	return bad
}

// TestNoIO keeps workflows on their contracts: the workflows and package
// contract link no PostgreSQL, SMTP or Redis client and none of the
// packages that do I/O on their behalf (activities).
func TestNoIO(t *testing.T) {
	require.Empty(t, forbiddenDeps(t, ".", "./contract"),
		"workflows depend on package contract only; activities and their I/O stay out")
}

// TestNoIODetects makes sure TestNoIO can fail: the delivery activities
// link the store and its PostgreSQL driver.
func TestNoIODetects(t *testing.T) {
	bad := forbiddenDeps(t, "../internal/submit/delivery")
	require.Contains(t, bad, "github.com/posthaste/posthaste/internal/submit/delivery")
	require.Contains(t, bad, "github.com/jackc/pgx/v5")
}
