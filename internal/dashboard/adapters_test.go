package dashboard_test

import (
	"strings"
	"testing"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/testkit/sourcetest"
)

// TestDashboardHoldsNoStore: the dashboard is an adapter (parse, call a
// service, render); it reaches data only through the services
// cmd/posthaste builds once and hands it in Config, so no file of it names
// the store or one of its areas (internal/store/areas.go).
func TestDashboardHoldsNoStore(t *testing.T) {
	t.Parallel()
	sourcetest.ForbidStore(t, "../store/areas.go", []string{"."}, "the dashboard calls services (dashboard.Config), never the store")
}

// TestConfigNeedsItsServices: New refuses a Config without a required
// service instead of failing on the first page that uses it.
func TestConfigNeedsItsServices(t *testing.T) {
	t.Parallel()
	_, err := dashboard.New(dashboard.Config{})
	if err == nil || !strings.Contains(err.Error(), "Accounts") || !strings.Contains(err.Error(), "Usage") ||
		strings.Contains(err.Error(), "Broadcasts") {
		t.Fatalf("New(Config{}) = %v, want an error naming the required services (not the optional Broadcasts)", err)
	}
}
