package dashboard

import (
	"mime"
	"net/http"
	"net/url"
	"sort"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/store"
)

// receivingHandler serves the pages of received emails (receiving.go,
// inbound_budget.go).
type receivingHandler struct{ *Handler }

// routes adds the pages of received emails.
func (h *receivingHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/receiving", h.signedIn(h.receiving))
	m.Handle("GET /dashboard/receiving/{id}", h.signedIn(h.received))
	m.Handle("GET /dashboard/receiving/{id}/raw", h.signedIn(h.receivedRaw))
	m.Handle("GET /dashboard/receiving/{id}/preview", h.signedIn(h.receivedPreview))
	m.Handle("GET /dashboard/receiving/{id}/attachments/{attachment}", h.signedIn(h.receivedAttachment))
}

// The Receiving pages (issue 16 point 4): the emails the team's receiving
// domains received, newest first, and one with its bodies, header fields
// and attachments. Everything in them comes from strangers: the HTML is
// shown in the sandboxed preview frame of sent emails (previewHeaders),
// and attachments and the raw message are only ever downloaded, never
// rendered on the dashboard's origin.

type receivingData struct {
	Emails []store.ReceivedEmail
	Pager  pager
	Budget *budgetNotice // inbound_budget.go
}

func (h *receivingHandler) receiving(w http.ResponseWriter, r *http.Request, se *store.Session) {
	q := r.URL.Query()
	p := pageOf(q, 50)
	list, more, err := h.cfg.Received.List(r.Context(), se.TeamID, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := receivingData{Emails: list}
	if d.Budget, err = h.inboundBudget(r.Context(), se.TeamID); err != nil {
		h.fail(w, r, err)
		return
	}
	if len(list) > 0 {
		d.Pager = pagerOf(url.Values{}, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, http.StatusOK, "receiving", view{Title: "Receiving", Nav: "receiving", Session: se, CSRF: se.CSRFToken, Data: d})
}

type receivedData struct {
	Email   store.ReceivedEmail
	Headers [][2]string
}

func (h *receivingHandler) loadReceived(w http.ResponseWriter, r *http.Request, se *store.Session) (store.ReceivedEmail, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.ReceivedEmail, error) {
		return h.cfg.Received.Get(r.Context(), se.TeamID, id)
	})
}

func (h *receivingHandler) received(w http.ResponseWriter, r *http.Request, se *store.Session) {
	e, ok := h.loadReceived(w, r, se)
	if !ok {
		return
	}
	d := receivedData{Email: e}
	for k, v := range e.Headers {
		d.Headers = append(d.Headers, [2]string{k, v})
	}
	sort.Slice(d.Headers, func(i, j int) bool { return d.Headers[i][0] < d.Headers[j][0] })
	title := e.Subject
	if title == "" {
		title = "(no subject)"
	}
	h.render(w, http.StatusOK, "received", view{Title: title, Nav: "receiving", Session: se, CSRF: se.CSRFToken, Data: d})
}

// download sends content as an attachment that no browser renders here.
func download(w http.ResponseWriter, contentType, filename string, content []byte) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	if _, _, err := mime.ParseMediaType(contentType); err != nil || contentType == "" {
		contentType = "application/octet-stream"
	}
	hd.Set("Content-Type", contentType)
	disp := "attachment"
	if filename != "" {
		if v := mime.FormatMediaType("attachment", map[string]string{"filename": filename}); v != "" {
			disp = v
		}
	}
	hd.Set("Content-Disposition", disp)
	_, _ = w.Write(content)
}

func (h *receivingHandler) receivedRaw(w http.ResponseWriter, r *http.Request, se *store.Session) {
	e, ok := h.loadReceived(w, r, se)
	if !ok {
		return
	}
	raw, err := h.cfg.Received.Raw(r.Context(), se.TeamID, e.ID)
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	download(w, "message/rfc822", e.ID.String()+".eml", raw)
}

func (h *receivingHandler) receivedAttachment(w http.ResponseWriter, r *http.Request, se *store.Session) {
	id, err1 := uuid.Parse(r.PathValue("id"))
	aid, err2 := uuid.Parse(r.PathValue("attachment"))
	if err1 != nil || err2 != nil {
		http.NotFound(w, r)
		return
	}
	a, err := h.cfg.Received.Attachment(r.Context(), se.TeamID, id, aid)
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	download(w, a.ContentType, a.Filename, a.Content)
}

// receivedPreview serves the HTML body for the sandboxed preview frame,
// its inline images (cid: references) embedded as data: URIs.
func (h *receivingHandler) receivedPreview(w http.ResponseWriter, r *http.Request, se *store.Session) {
	e, ok := h.loadReceived(w, r, se)
	if !ok {
		return
	}
	previewHeaders(w.Header(), r.URL.Query().Get("remote") == "1")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if e.HTML == nil {
		_, _ = w.Write([]byte("<p style=\"font-family:sans-serif;color:#666\">This email has no HTML part.</p>"))
		return
	}
	html, err := h.cfg.Received.InlineImages(r.Context(), e, receiving.InlineOptions{ImagesOnly: true})
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	_, _ = w.Write([]byte(html))
}
