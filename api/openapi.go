package api

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"sigs.k8s.io/yaml"
)

// openAPIYAML is the OpenAPI 3.1 document of the API: every route New
// registers, with its request and response shapes (openapi_test.go keeps
// the two in step and validates every response the api tests receive
// against it). It is written as YAML and served as JSON.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIDoc is the document as JSON with its ETag, converted once.
var openAPIDoc = sync.OnceValues(func() (openAPIJSON, error) {
	b, err := yaml.YAMLToJSON(openAPIYAML)
	if err != nil {
		return openAPIJSON{}, err
	}
	sum := sha256.Sum256(b)
	return openAPIJSON{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}, nil
})

type openAPIJSON struct {
	body []byte
	etag string
}

// serveOpenAPI answers GET /openapi.json: no key is needed, and the
// document changes only with the binary, so caches may keep it for an
// hour and revalidate it with its ETag (RFC 9110 §13.1.2).
func serveOpenAPI(doc openAPIJSON) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=3600")
		h.Set("ETag", doc.etag)
		http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(doc.body))
	}
}
