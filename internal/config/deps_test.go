package config_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestConfigLinksNoSMTPClient: reading the configuration (IP pools, shaping,
// egress policy) does not link the SMTP client that uses it.
func TestConfigLinksNoSMTPClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{"github.com/posthaste/posthaste/internal/mta", "github.com/emersion/go-smtp"} {
		if slices.Contains(deps, p) {
			t.Errorf("internal/config links %s", p)
		}
	}
}
