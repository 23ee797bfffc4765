package codec

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// HandlerConfig configures the codec endpoint.
type HandlerConfig struct {
	// Token is the operators' token (POSTHASTE_CODEC_TOKEN), required as
	// a bearer token or as the first path segment after the prefix.
	Token string
	// Origins are the origins allowed to call from a browser (the
	// Temporal UI's), for CORS; "*" allows any.
	Origins []string
}

// erasedPayload stands in for a payload whose key was erased, so the
// Temporal UI shows that instead of an error.
var erasedPayload = &commonpb.Payload{
	Metadata: map[string][]byte{metaEncoding: []byte("json/plain")},
	Data:     []byte(`{"erased":true}`),
}

// uiCodec is the codec as the UI sees it: erased payloads decode to
// erasedPayload.
type uiCodec struct{ c *Codec }

func (u uiCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return u.c.Encode(payloads)
}

func (u uiCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		d, err := u.c.decode(p)
		if errors.Is(err, ErrErased) {
			d, err = erasedPayload, nil
		}
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// Handler serves the Temporal codec-server protocol for the Temporal UI
// and `temporal` CLI (POST <prefix>/decode and <prefix>/encode with
// {"payloads": [...]}), where prefix is the path it is mounted under,
// or under <prefix>/<token>/ for UIs that cannot send a header. A
// payload whose key was erased decodes to {"erased":true}. Requests
// without the token get 401; CORS preflights from Origins are answered.
func Handler(cfg HandlerConfig, c *Codec) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(uiCodec{c})
	want := sha256.Sum256([]byte(cfg.Token))
	tokenIs := func(s string) bool {
		have := sha256.Sum256([]byte(s))
		return cfg.Token != "" && subtle.ConstantTimeCompare(want[:], have[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" &&
			(slices.Contains(cfg.Origins, origin) || slices.Contains(cfg.Origins, "*")) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		scheme, bearer, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		ok := strings.EqualFold(scheme, "Bearer") && tokenIs(strings.TrimSpace(bearer))
		if !ok {
			// <prefix>/<token>/decode: the token is the second-to-last
			// segment.
			segs := strings.Split(strings.TrimSuffix(r.URL.Path, "/"), "/")
			ok = len(segs) >= 2 && tokenIs(segs[len(segs)-2])
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="temporal-codec"`)
			http.Error(w, "A bearer token is required.", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 8<<20)
		inner.ServeHTTP(w, r)
	})
}
