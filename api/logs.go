package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/store"
)

type logJSON struct {
	Object         string  `json:"object"`
	ID             string  `json:"id"`
	CreatedAt      string  `json:"created_at"`
	Endpoint       string  `json:"endpoint"`
	Method         string  `json:"method"`
	ResponseStatus int     `json:"response_status"`
	UserAgent      *string `json:"user_agent"`
}

// logDetailJSON is one log entry: the list form plus both bodies, always
// present (null when there was none).
type logDetailJSON struct {
	logJSON
	RequestBody  any `json:"request_body"`
	ResponseBody any `json:"response_body"`
}

func renderLog(l store.RequestLog) logJSON {
	return logJSON{Object: "log", ID: l.ID.String(), CreatedAt: formatTime(l.CreatedAt), Endpoint: l.Path,
		Method: l.Method, ResponseStatus: l.Status, UserAgent: l.UserAgent}
}

// logBody shows a logged body as JSON when it is JSON (it was redacted
// field by field) and as a string otherwise (text, or JSON cut at 64 KB).
func logBody(b *string) any {
	if b == nil {
		return nil
	}
	if json.Valid([]byte(*b)) {
		return json.RawMessage(*b)
	}
	return *b
}

func (s *emailsAPI) listLogs(c *gin.Context) {
	p, err := page(c, paged)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var f store.LogFilter
	if v, ok := c.GetQuery("status"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 599 {
			s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
				"The `status` parameter must be an HTTP status code between 100 and 599."))
			return
		}
		f.Status = n
	}
	if v, ok := c.GetQuery("path"); ok {
		if !strings.HasPrefix(v, "/") || len(v) > 2048 {
			s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
				"The `path` parameter must be a request path starting with /, such as /emails."))
			return
		}
		f.Path = v
	}
	logs, more, err := s.usage.RequestLogs(c.Request.Context(), principal(c).TeamID, f, p)
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]logJSON, len(logs))
	for i, l := range logs {
		out[i] = renderLog(l)
	}
	c.PureJSON(http.StatusOK, list(out, more))
}

func (s *emailsAPI) getLog(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	l, err := s.usage.RequestLog(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, logDetailJSON{logJSON: renderLog(l),
		RequestBody: logBody(l.RequestBody), ResponseBody: logBody(l.ResponseBody)})
}
