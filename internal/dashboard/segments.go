package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

type segmentsData struct {
	Segments []store.Segment
	Name     string // typed into the New segment form
	Error    formError
}

func (h *audienceHandler) segments(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderSegments(w, r, se, http.StatusOK, segmentsData{})
}

func (h *audienceHandler) renderSegments(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d segmentsData) {
	list, _, err := h.svc.ListSegments(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Segments = list
	h.render(w, status, "segments", view{Title: "Segments", Nav: "segments", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *audienceHandler) addSegment(w http.ResponseWriter, r *http.Request, se *store.Session) {
	typed := r.PostFormValue("name")
	sg, err := h.svc.CreateSegment(r.Context(), se.TeamID, &typed)
	if fe, ok := fieldError(err); ok {
		h.renderSegments(w, r, se, http.StatusUnprocessableEntity, segmentsData{Name: typed, Error: fe})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/segments/"+sg.ID.String(), http.StatusSeeOther)
}

type segmentData struct {
	Segment  store.Segment
	Contacts []store.Contact
	Query    string
	Pager    pager
}

func (h *audienceHandler) loadSegment(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Segment, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Segment, error) {
		return h.svc.Segment(r.Context(), se.TeamID, id)
	})
}

// segment shows a segment's contacts, searchable and paged like the
// Contacts page.
func (h *audienceHandler) segment(w http.ResponseWriter, r *http.Request, se *store.Session) {
	sg, ok := h.loadSegment(w, r, se)
	if !ok {
		return
	}
	q := r.URL.Query()
	d := segmentData{Segment: sg, Query: strings.TrimSpace(q.Get("q"))}
	p := pageOf(q, 50)
	list, more, err := h.svc.ListContacts(r.Context(), se.TeamID, store.ContactFilter{Search: d.Query, SegmentID: &sg.ID}, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Contacts = list
	if len(list) > 0 {
		keep := url.Values{}
		if d.Query != "" {
			keep.Set("q", d.Query)
		}
		d.Pager = pagerOf(keep, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, http.StatusOK, "segment", view{Title: sg.Name, Nav: "segments", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *audienceHandler) deleteSegmentPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	sg, ok := h.loadSegment(w, r, se)
	if !ok {
		return
	}
	h.render(w, http.StatusOK, "segment_delete", view{Title: "Delete " + sg.Name, Nav: "segments", Session: se,
		CSRF: se.CSRFToken, Data: segmentData{Segment: sg}})
}

func (h *audienceHandler) deleteSegment(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if _, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Segment, error) {
		return h.svc.DeleteSegment(r.Context(), se.TeamID, id)
	}); !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/segments", http.StatusSeeOther)
}
