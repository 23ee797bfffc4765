package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/store"
)

// privacyHandler serves the audit log and the data requests pages
// (datarequests.go, audit_log.go).
type privacyHandler struct{ *Handler }

// routes adds the audit log and the data requests pages.
func (h *privacyHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/audit", h.signedIn(h.auditLog))
	m.Handle("GET /dashboard/data-requests", h.signedIn(h.dataRequests))
	m.Handle("POST /dashboard/data-requests", h.signedIn(h.createDataRequest))
	m.Handle("GET /dashboard/data-requests/{id}/download", h.signedIn(h.downloadDataRequest))
}

// The Data requests page: team owners ask for an export or the erasure of
// everything the team holds about an email address, follow the requests
// and download finished exports (docs/privacy.md: "Data subject requests").

type dataRequestsData struct {
	Requests []store.DataRequest
	// Ready holds the ids of the requests whose archive can be downloaded.
	Ready  map[uuid.UUID]bool
	Email  string
	Type   string
	Error  string
	Notice string
	Pager  pager
}

func (h *privacyHandler) refuseDataRequests(w http.ResponseWriter) func() {
	return func() { http.Error(w, "Only team owners can make data requests.", http.StatusForbidden) }
}

// dataRequests lists the team's data requests, newest first, with the
// form that makes one.
func (h *privacyHandler) dataRequests(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, h.refuseDataRequests(w)) {
		return
	}
	d := dataRequestsData{Type: store.DataRequestExport}
	switch r.URL.Query().Get("done") {
	case "export":
		d.Notice = "Export requested. The archive appears here when it is ready."
	case "erasure":
		d.Notice = "Erasure requested. Everything about the address is being removed."
	}
	h.renderDataRequests(w, r, se, http.StatusOK, d)
}

func (h *privacyHandler) renderDataRequests(w http.ResponseWriter, r *http.Request, se *store.Session, status int,
	d dataRequestsData) {
	p := pageOf(r.URL.Query(), 50)
	list, more, err := h.dataReqs.List(r.Context(), se.TeamID, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Requests, d.Ready = list, map[uuid.UUID]bool{}
	for _, x := range list {
		d.Ready[x.ID] = datareq.ArchiveReady(x, h.now())
	}
	if len(list) > 0 {
		d.Pager = pagerOf(nil, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, status, "data_requests", view{Title: "Data requests", Nav: "datarequests", Session: se,
		CSRF: se.CSRFToken, Data: d})
}

// createDataRequest queues a request from the form.
func (h *privacyHandler) createDataRequest(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, h.refuseDataRequests(w)) {
		return
	}
	d := dataRequestsData{Email: strings.TrimSpace(r.PostFormValue("email")), Type: r.PostFormValue("type")}
	_, err := h.dataReqs.Create(r.Context(), se.TeamID, d.Type, d.Email, by(r, se))
	switch {
	case errors.Is(err, datareq.ErrInvalidAddress):
		d.Error = "Enter one email address, such as someone@example.com."
	case errors.Is(err, datareq.ErrInvalidType):
		d.Error = "Choose an export or an erasure."
	case errors.Is(err, datareq.ErrNoKeys):
		d.Error = "Data requests are unavailable: the server has no master key (POSTHASTE_MASTER_KEY)."
	case err != nil:
		h.fail(w, r, err)
		return
	default:
		http.Redirect(w, r, "/dashboard/data-requests?done="+d.Type, http.StatusSeeOther)
		return
	}
	h.renderDataRequests(w, r, se, http.StatusUnprocessableEntity, d)
}

// downloadDataRequest streams a finished export's archive to an owner.
func (h *privacyHandler) downloadDataRequest(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if !h.requireOwner(w, r, se, h.refuseDataRequests(w)) {
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ready, err := h.dataReqs.HasArchive(r.Context(), se.TeamID, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !ready {
		http.Error(w, "This archive does not exist or has expired.", http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/zip")
	hd.Set("Content-Disposition", `attachment; filename="data-request-`+id.String()+`.zip"`)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "private, no-store")
	if err := h.dataReqs.WriteArchive(r.Context(), se.TeamID, id, w); err != nil {
		// The status is sent; the browser sees a cut download.
		h.logger.Error("streaming a data request archive", "team_id", se.TeamID, "err", err)
	}
}
