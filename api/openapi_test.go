package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/tracking"
	"github.com/posthaste/posthaste/internal/unsubscribe"
)

// The OpenAPI document is checked two ways: every route the server
// registers is in it (and nothing else), and every response the api
// tests receive from a server built by newEnv, newBareEnv and the other
// helpers validates against it (specCheck wraps their handlers).
// kin-openapi checks that the document is valid OpenAPI and looks up its
// operations; the bodies are validated with the JSON Schema 2020-12
// validator it uses for OpenAPI 3.1, each schema compiled once.

// openAPI is the served document, parsed once per package run.
var openAPI = sync.OnceValues(loadOpenAPI)

const openAPIURL = "https://posthaste.test/openapi.json"

type openAPIDoc struct {
	doc   *openapi3.T
	paths []specPath
	// compiler holds the document as one JSON Schema resource; schemas
	// caches the compiled schemas by their location in it.
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
}

// specPath is one path of the document split into its segments, "" for
// a parameter.
type specPath struct {
	template string
	segments []string
	params   []string
	item     *openapi3.PathItem
}

func loadOpenAPI() (*openAPIDoc, error) {
	b, err := api.OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("loading the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the document is not valid OpenAPI: %w", err)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	closeDocument(raw.(map[string]any))
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, raw); err != nil {
		return nil, err
	}
	d := &openAPIDoc{doc: doc, compiler: c, schemas: map[string]*jsonschema.Schema{}}
	for tmpl, item := range doc.Paths.Map() {
		sp := specPath{template: tmpl, item: item}
		for _, seg := range strings.Split(strings.Trim(tmpl, "/"), "/") {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				sp.params = append(sp.params, strings.Trim(seg, "{}"))
				seg = ""
			}
			sp.segments = append(sp.segments, seg)
		}
		d.paths = append(d.paths, sp)
	}
	return d, nil
}

// closeDocument closes the document's objects for the tests: the
// document leaves objects open to new fields, as clients must be, but
// every object schema that lists its properties and says nothing of
// others gets additionalProperties false here, so that a field the API
// answers but the document lacks fails the tests.
func closeDocument(doc map[string]any) {
	var walk func(v any)
	walk = func(v any) {
		s, ok := v.(map[string]any)
		if !ok {
			return
		}
		if props, ok := s["properties"].(map[string]any); ok {
			if _, set := s["additionalProperties"]; !set {
				s["additionalProperties"] = false
			}
			for _, p := range props {
				walk(p)
			}
		}
		walk(s["items"])
		walk(s["additionalProperties"])
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			list, _ := s[k].([]any)
			for _, x := range list {
				walk(x)
			}
		}
	}
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	for _, s := range schemas {
		walk(s)
	}
	// The schemas written inline in responses.
	var responses []any
	resps, _ := comps["responses"].(map[string]any)
	for _, r := range resps {
		responses = append(responses, r)
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		ops, _ := item.(map[string]any)
		for _, op := range ops {
			o, _ := op.(map[string]any)
			rs, _ := o["responses"].(map[string]any)
			for _, r := range rs {
				responses = append(responses, r)
			}
		}
	}
	for _, r := range responses {
		rm, _ := r.(map[string]any)
		content, _ := rm["content"].(map[string]any)
		for _, mt := range content {
			m, _ := mt.(map[string]any)
			walk(m["schema"])
		}
	}
}

// find returns the path of the document that serves path, preferring
// literal segments to parameters as gin does.
func (d *openAPIDoc) find(path string) *specPath {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var best *specPath
	bestLiterals := -1
	for i := range d.paths {
		sp := &d.paths[i]
		if len(sp.segments) != len(segs) {
			continue
		}
		literals, ok := 0, true
		for j, seg := range sp.segments {
			if seg == "" {
				ok = ok && segs[j] != ""
				continue
			}
			if seg != segs[j] {
				ok = false
				break
			}
			literals++
		}
		if ok && (literals > bestLiterals || literals == bestLiterals && earlierLiterals(sp, best)) {
			best, bestLiterals = sp, literals
		}
	}
	return best
}

// earlierLiterals reports whether a has a literal segment where b first
// has a parameter (gin matches left to right, literals first).
func earlierLiterals(a, b *specPath) bool {
	for i := range a.segments {
		if (a.segments[i] == "") != (b.segments[i] == "") {
			return a.segments[i] != ""
		}
	}
	return false
}

// check validates one response to r against the document; route is
// the operation of the document it was checked against ("" for none).
func (d *openAPIDoc) check(r *http.Request, status int, header http.Header, body []byte) (route string, err error) {
	if p := r.URL.Path; p == "/" || p == "/dashboard" || strings.HasPrefix(p, "/dashboard/") ||
		strings.HasPrefix(p, api.CodecPath) {
		return "", nil // not the API (notAPI)
	}
	sp := d.find(r.URL.Path)
	var op *openapi3.Operation
	if sp != nil {
		op = sp.item.GetOperation(r.Method)
	}
	if op == nil {
		return "", d.checkUnrouted(sp, status, header, body)
	}
	route = r.Method + " " + sp.template
	if r.Method == http.MethodHead {
		return route, nil
	}
	// Where the response is written: in the operation, or in
	// components when it is a reference.
	code := strconv.Itoa(status)
	ref := op.Responses.Value(code)
	if ref == nil {
		code = "default"
		if ref = op.Responses.Default(); ref == nil {
			return route, fmt.Errorf("status %d is not among the operation's responses", status)
		}
	}
	at := "#/paths/" + pointerEscape(sp.template) + "/" + strings.ToLower(r.Method) + "/responses/" + code
	if ref.Ref != "" {
		at = ref.Ref
	}
	if len(ref.Value.Content) == 0 {
		if len(body) > 0 {
			return route, fmt.Errorf("the %d response has no content in the document, yet a body of %d bytes", status, len(body))
		}
		return route, nil
	}
	mt, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		return route, fmt.Errorf("the Content-Type %q: %w", header.Get("Content-Type"), err)
	}
	key := ""
	for _, k := range []string{mt, strings.Split(mt, "/")[0] + "/*", "*/*"} {
		if _, ok := ref.Value.Content[k]; ok {
			key = k
			break
		}
	}
	if key == "" {
		return route, fmt.Errorf("the content type %s is not among the %d response's", mt, status)
	}
	if ref.Value.Content[key].Schema == nil {
		return route, nil // binary content
	}
	sch, err := d.schema(at + "/content/" + pointerEscape(key) + "/schema")
	if err != nil {
		return route, err
	}
	return route, validateBody(sch, key, body)
}

func validateBody(sch *jsonschema.Schema, mediaType string, body []byte) error {
	var v any = string(body)
	if mediaType == "application/json" {
		var err error
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(body)); err != nil {
			return fmt.Errorf("the body is not JSON: %w", err)
		}
	}
	return sch.Validate(v)
}

// schema compiles the schema at the pointer into the document, once.
func (d *openAPIDoc) schema(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[pointer]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(openAPIURL + pointer)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", pointer, err)
	}
	d.schemas[pointer] = s
	return s, nil
}

// pointerEscape escapes a JSON Pointer token (RFC 6901 §3).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// checkUnrouted checks the answer to a path or method the document does
// not have (sp is the path, nil when none matched).
func (d *openAPIDoc) checkUnrouted(sp *specPath, status int, header http.Header, body []byte) error {
	// The answer must be the API's error or, on the public pages, a
	// line of text.
	if status < 400 {
		return fmt.Errorf("no operation in the document, yet status %d", status)
	}
	mt, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	switch {
	case mt == "application/json":
		sch, err := d.schema("#/components/schemas/Error")
		if err != nil {
			return err
		}
		return validateBody(sch, mt, body)
	case mt == "text/plain" && sp != nil && slices.Contains(publicPages, sp.template):
		return nil
	}
	return fmt.Errorf("no operation in the document, and the answer is %q, not the error object", mt)
}

// publicPages answer their refusals as text (PlainError).
var publicPages = []string{"/unsubscribe/{token}", "/o/{token}", "/c/{token}"}

// specCheck wraps h so that every response it gives fails t unless the
// OpenAPI document allows it: route, method, status, content type and
// body. It reports with Errorf, which is safe from the server's
// goroutines, so the test that received the response fails.
func specCheck(t testing.TB, h http.Handler) http.Handler {
	d, err := openAPI()
	require.NoError(t, err)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &teeWriter{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route, err := d.check(r, rec.status, w.Header(), rec.body.Bytes())
		if err != nil {
			if route == "" {
				route = "no route of the document"
			}
			t.Errorf("OpenAPI: the %d answer to %s %s (%s) does not match api/openapi.yaml: %s", rec.status,
				r.Method, r.URL.Path, route, describe(err))
		}
	})
}

// describe spells out a validation error: each failed keyword with where
// in the body it failed.
func describe(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var lines []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			lines = append(lines, e.Error())
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return "\n\t" + strings.Join(lines, "\n\t")
}

// teeWriter keeps a copy of the status and body written through it.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Flush passes on flushes (gin's writer asserts that its writer flushes).
func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// notAPI are the routes the document leaves out: the dashboard's pages
// and the Temporal codec endpoint are not part of the API.
var notAPI = []string{"/", "/dashboard", "/dashboard/{path}", "/temporal-codec/{path}"}

// anyMethods is how many methods gin's Any registers a path for.
var anyMethods = len([]string{"GET", "POST", "PUT", "PATCH", "HEAD", "OPTIONS", "DELETE", "CONNECT", "TRACE"})

// TestOpenAPICoversEveryRoute checks that every route of a server with
// every part configured is in the OpenAPI document, and that the
// document names no route the server does not serve.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	d, err := openAPI()
	require.NoError(t, err)
	e := newEnvWith(t, envOptions{configure: configureEverything(t)})

	served := map[string][]string{} // path → methods
	for _, r := range api.Routes(e.api) {
		p := openAPIPath(r.Path)
		served[p] = append(served[p], r.Method)
	}
	var missing, extra []string
	for p, methods := range served {
		if slices.Contains(notAPI, p) {
			continue
		}
		sp := d.doc.Paths.Value(p)
		if len(methods) >= anyMethods { // gin's Any: the document has the methods that answer
			if sp == nil || len(sp.Operations()) == 0 {
				missing = append(missing, "ANY "+p)
			}
			continue
		}
		for _, m := range methods {
			if sp == nil || sp.GetOperation(m) == nil {
				missing = append(missing, m+" "+p)
			}
		}
	}
	for p, item := range d.doc.Paths.Map() {
		methods, ok := served[p]
		for m := range item.Operations() {
			if !ok || len(methods) < anyMethods && !slices.Contains(methods, m) {
				extra = append(extra, m+" "+p)
			}
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("routes the server serves that api/openapi.yaml lacks:\n\t%s", strings.Join(missing, "\n\t"))
	}
	if len(extra) > 0 {
		t.Errorf("operations in api/openapi.yaml that no route serves:\n\t%s", strings.Join(extra, "\n\t"))
	}
}

// openAPIPath writes a gin route pattern as an OpenAPI path: :id and
// *path become {id} and {path}.
func openAPIPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// configureEverything adds to the api tests' server the parts newEnv
// leaves out: broadcasts, the unsubscribe and tracking endpoints, the
// dashboard and the codec endpoint.
func configureEverything(t *testing.T) func(*api.Config, *store.Store) {
	return func(cfg *api.Config, st *store.Store) {
		cfg.Broadcasts = broadcast.NewService(broadcast.Config{Store: st, Submit: cfg.Submit, Waker: &broadcastWaker{}})
		us, err := unsubscribe.NewSealer(cfg.Keys.DeriveKey(unsubscribe.KeyPurpose))
		require.NoError(t, err)
		uh, err := unsubscribe.NewHandler(unsubscribe.Config{Sealer: us}, st.Audience)
		require.NoError(t, err)
		cfg.Unsubscribe = uh
		ts, err := tracking.NewSealer(cfg.Keys.DeriveKey(tracking.KeyPurpose))
		require.NoError(t, err)
		th, err := tracking.NewHandler(tracking.Config{Sealer: ts, TeamHost: st.Emails.IsTeamTrackingHost}, st.Emails)
		require.NoError(t, err)
		cfg.Tracking = th
		cfg.Dashboard = http.NotFoundHandler()
		cfg.Codec = http.NotFoundHandler()
	}
}

// TestOpenAPIServed checks GET /openapi.json: no key, cacheable, and the
// document the tests validate against; the public routes' refusals are
// in it too.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{configure: configureEverything(t)})
	r := e.do("GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, "public, max-age=3600", r.header.Get("Cache-Control"))
	require.Empty(t, r.header.Get("RateLimit"), "not rate-limited")
	want, err := api.OpenAPIJSON()
	require.NoError(t, err)
	require.Equal(t, want, r.raw)
	require.Equal(t, "3.1.0", r.body["openapi"])
	etag := r.header.Get("ETag")
	require.NotEmpty(t, etag)
	again := e.doH("GET", "/openapi.json", "", nil, map[string]string{"If-None-Match": etag})
	require.Equal(t, http.StatusNotModified, again.status)
	require.Empty(t, again.raw)

	// The public endpoints' refusals are lines of text.
	for _, c := range []struct{ method, path string }{
		{"GET", "/unsubscribe/not-a-token"},
		{"POST", "/unsubscribe/not-a-token"},
		{"GET", "/o/not-a-token"},
		{"GET", "/c/not-a-token"},
	} {
		r := e.do(c.method, c.path, "", nil)
		require.Equal(t, http.StatusNotFound, r.status, c)
		require.Contains(t, r.header.Get("Content-Type"), "text/plain", c)
	}
}

// BenchmarkOpenAPICheck measures the check every api test response goes
// through: it must stay far below a request's cost (about 90 µs here;
// compiling the schema on each call took 14 ms and slowed timing-bound
// tests past their windows).
func BenchmarkOpenAPICheck(b *testing.B) {
	d, err := openAPI()
	require.NoError(b, err)
	body := []byte(`{"object":"list","has_more":false,"data":[{"object":"email","id":"0b7a1b8e-4c1e-4c36-9a54-3f2b8a8f4b11","from":"a@b.c","to":["x@y.z"],"cc":[],"bcc":[],"reply_to":[],"subject":"s","created_at":"2026-01-01T00:00:00.000000Z","scheduled_at":null,"last_event":"queued","tags":[],"message_id":null}]}`)
	r, _ := http.NewRequest("GET", "http://x/emails", nil)
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	for b.Loop() {
		if _, err := d.check(r, 200, h, body); err != nil {
			b.Fatal(err)
		}
	}
}
