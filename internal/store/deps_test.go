package store_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStoreLinksNoDelivery: persistence sits at the bottom. The store
// links nothing that delivers mail (the SMTP client and its policies),
// listens for it (the inbound MX, the submission gateway) or shapes it;
// what it keeps of those is described by pure packages (inmail, bounce).
func TestStoreLinksNoDelivery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/posthaste/posthaste/"
	forbidden := []string{"internal/mta", "internal/mxlisten", "internal/shaping", "internal/dane",
		"internal/mtasts", "smtpgw", "internal/pooldeliver", "github.com/emersion/go-smtp"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || dep == mod+f || strings.HasPrefix(dep, mod+f+"/") {
				t.Errorf("internal/store links %s", dep)
			}
		}
	}
}
