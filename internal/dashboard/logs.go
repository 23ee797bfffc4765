package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

type logsData struct {
	Logs         []store.RequestLog
	Status, Path string
	Pager        pager
}

// logs is the team's API request log, newest first, filtered by status
// and path.
func (h *overviewHandler) logs(w http.ResponseWriter, r *http.Request, se *store.Session) {
	q := r.URL.Query()
	d := logsData{Status: strings.TrimSpace(q.Get("status")), Path: strings.TrimSpace(q.Get("path"))}
	var f store.LogFilter
	if n, err := strconv.Atoi(d.Status); err == nil {
		f.Status = n
	}
	f.Path = d.Path
	p := pageOf(q, 50)
	list, more, err := h.usage.RequestLogs(r.Context(), se.TeamID, f, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Logs = list
	keep := url.Values{}
	if d.Status != "" {
		keep.Set("status", d.Status)
	}
	if d.Path != "" {
		keep.Set("path", d.Path)
	}
	if len(list) > 0 {
		d.Pager = pagerOf(keep, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, http.StatusOK, "logs", view{Title: "Logs", Nav: "logs", Session: se, CSRF: se.CSRFToken, Data: d})
}

// logEntry shows one request with both bodies (already redacted when logged).
func (h *overviewHandler) logEntry(w http.ResponseWriter, r *http.Request, se *store.Session) {
	l, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.RequestLog, error) {
		return h.usage.RequestLog(r.Context(), se.TeamID, id)
	})
	if !ok {
		return
	}
	h.render(w, http.StatusOK, "log", view{Title: "Request", Nav: "logs", Session: se, CSRF: se.CSRFToken, Data: l})
}
