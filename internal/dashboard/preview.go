package dashboard

import (
	"net/http"

	"github.com/posthaste/posthaste/internal/preview"
)

// previewHeaders sets the headers of the email preview frame: sandboxed,
// nothing remote unless remote (preview.Headers).
func previewHeaders(h http.Header, remote bool) { preview.Headers(h, remote) }
