package api_test

import (
	"slices"
	"testing"

	"github.com/posthaste/posthaste/internal/testkit/sourcetest"
)

// TestAPIHoldsNoStore: the API is an adapter (parse, call a service,
// render); it reaches data only through the services cmd/posthaste builds
// once and hands it in Config, so no file of it names the store or one of
// its areas (internal/store/areas.go).
func TestAPIHoldsNoStore(t *testing.T) {
	t.Parallel()
	handles := append(sourcetest.Embedders(t, "../internal/store/areas.go", "Store"), "Store")
	if !slices.Contains(handles, "Insights") {
		t.Fatalf("the store's areas are not where the test looks: %v", handles)
	}
	sourcetest.ForbidTypes(t, []string{"."}, "github.com/posthaste/posthaste/internal/store", handles,
		"the API calls services (api.Config), never the store")
}
