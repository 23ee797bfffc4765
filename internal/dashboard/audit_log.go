package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

type auditData struct {
	Entries                             []audit.Entry
	Actions                             []audit.Action
	Action, ActorID, TargetID, From, To string
	Error                               string
	Pager                               pager
}

// auditLog is the team's audit log, newest first, for owners, with the
// filters of GET /audit-log.
func (h *privacyHandler) auditLog(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, func() {
		http.Error(w, "Only team owners can see the audit log.", http.StatusForbidden)
	}) {
		return
	}
	q := r.URL.Query()
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	d := auditData{Actions: audit.Actions(), Action: get("action"), ActorID: get("actor_id"),
		TargetID: get("target_id"), From: get("from"), To: get("to")}
	keep := url.Values{}
	for k, v := range map[string]string{"action": d.Action, "actor_id": d.ActorID, "target_id": d.TargetID,
		"from": d.From, "to": d.To} {
		if v != "" {
			keep.Set(k, v)
		}
	}
	status := http.StatusOK
	f, err := audit.ParseFilter(get)
	if err != nil {
		d.Error, status = err.Error(), http.StatusUnprocessableEntity
	} else {
		p := pageOf(q, 50)
		list, more, err := h.auditSvc.List(r.Context(), se.TeamID, f, p)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		d.Entries = list
		if len(list) > 0 {
			d.Pager = pagerOf(keep, p, more, list[0].ID, list[len(list)-1].ID, len(list))
		}
	}
	h.render(w, status, "audit", view{Title: "Audit log", Nav: "audit", Session: se, CSRF: se.CSRFToken, Data: d})
}
