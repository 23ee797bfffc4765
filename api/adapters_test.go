package api_test

import (
	"testing"

	"github.com/posthaste/posthaste/internal/testkit/sourcetest"
)

// TestAPIHoldsNoStore: the API is an adapter (parse, call a service,
// render); it reaches data only through the services cmd/posthaste builds
// once and hands it in Config, so no file of it names the store or one of
// its areas (internal/store/areas.go).
func TestAPIHoldsNoStore(t *testing.T) {
	t.Parallel()
	sourcetest.ForbidStore(t, "../internal/store/areas.go", []string{"."}, "the API calls services (api.Config), never the store")
}
