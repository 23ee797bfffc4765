package api

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/store"
)

// RequestLog receives an entry per API request and must not block;
// *reqlog.Writer implements it.
type RequestLog interface {
	Log(e store.RequestLog) bool
}

var _ RequestLog = (*reqlog.Writer)(nil)

// requestBodyKey holds the body as read, by logRequest or by a handler
// (readBody): the one logged.
const requestBodyKey = "request_body"

// opsPath reports paths that are not API requests: probes and metrics
// are neither logged nor rate-limited.
func opsPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/metrics" || p == "/openapi.json" ||
		// Dashboard page loads are not API requests, nor are the
		// unsubscribe endpoints, whose paths hold tokens.
		p == "/" || p == "/dashboard" || strings.HasPrefix(p, "/dashboard/") || strings.HasPrefix(p, "/unsubscribe/") ||
		strings.HasPrefix(p, CodecPath)
}

// CodecPath is where the Temporal codec endpoint is served (Config.Codec).
const CodecPath = "/temporal-codec/"

// captureWriter keeps the first bytes of a response for the log.
type captureWriter struct {
	gin.ResponseWriter
	buf bytes.Buffer
	n   int
}

func (w *captureWriter) keep(p []byte) {
	w.n += len(p)
	if room := reqlog.MaxBody + 1 - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
}

func (w *captureWriter) Write(p []byte) (int, error) {
	w.keep(p)
	return w.ResponseWriter.Write(p)
}

func (w *captureWriter) WriteString(s string) (int, error) {
	w.keep([]byte(s))
	return w.ResponseWriter.WriteString(s)
}

// logRequest records every API request, whatever its outcome, in the
// request log: after the handlers ran it hands an entry to the log writer,
// which writes it in the background. The entry of a request with a valid
// key keeps both bodies, redacted; one without keeps none, so anonymous
// clients cannot fill the log with what they send.
func (s *Server) logRequest(c *gin.Context) {
	if s.reqlog == nil {
		c.Next()
		return
	}
	start := time.Now()
	// Small bodies are read here, so even a request refused before its
	// handler read the body is logged with it; readBody hands the handler
	// the same bytes. Larger ones are logged as their handler read them.
	if n := c.Request.ContentLength; n > 0 && n <= reqlog.MaxBody {
		early := make([]byte, n)
		read, _ := io.ReadFull(c.Request.Body, early)
		early = early[:read]
		c.Request.Body = io.NopCloser(bytes.NewReader(early))
		c.Set(requestBodyKey, early)
	}
	cw := &captureWriter{ResponseWriter: c.Writer}
	c.Writer = cw
	c.Next()

	id, err := uuid.NewV7()
	if err != nil {
		return
	}
	e := store.RequestLog{
		ID: id, Method: clip(c.Request.Method, 16), Path: clip(c.Request.URL.Path, 2048), Status: c.Writer.Status(),
		ClientAddr: c.ClientIP(), Duration: time.Since(start), CreatedAt: start,
	}
	if ua := clip(c.Request.UserAgent(), 512); ua != "" {
		e.UserAgent = &ua
	}
	p, ok := authenticated(c)
	if !ok {
		s.reqlog.Log(e)
		return
	}
	e.TeamID, e.KeyID = &p.TeamID, &p.KeyID
	switch b, ok := c.Get(requestBodyKey); {
	case strings.HasPrefix(e.Path, "/data-requests"):
		// The body of a data subject request names the person; the log
		// must not keep the address that an erasure is about to remove.
		note := "[not logged: a data subject request]"
		e.RequestBody = &note
	case ok:
		e.RequestBody = reqlog.Body(b.([]byte))
	case c.Request.ContentLength > reqlog.MaxBody || c.Request.ContentLength < 0:
		note := fmt.Sprintf("[body not read: the request was answered before its body was used (%d bytes declared)]",
			c.Request.ContentLength)
		e.RequestBody = &note
	}
	if cw.n > 0 {
		if cw.n > reqlog.MaxBody {
			// Only the first bytes were kept: redacted as far as they go.
			e.ResponseBody = reqlog.Prefix(cw.buf.Bytes(), cw.n)
		} else {
			e.ResponseBody = reqlog.Body(cw.buf.Bytes())
		}
	}
	s.reqlog.Log(e)
}

// clip cuts s to at most n bytes on a UTF-8 boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
