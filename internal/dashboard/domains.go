package dashboard

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

// Verifier makes a domain's verification check its records at once.
type Verifier interface {
	Verify(ctx context.Context, domainID string) error
}

type domainView struct {
	Domain  store.Domain
	Records []recordView
}

type recordView struct {
	records.Record
	Status string
}

type domainsData struct {
	Domains []domainView
}

func (h *Handler) domains(w http.ResponseWriter, r *http.Request, se *store.Session) {
	list, _, err := h.store.ListDomains(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var d domainsData
	for _, dom := range list {
		v := domainView{Domain: dom}
		for _, rec := range records.For(h.cfg.Records, records.Domain{Name: dom.Name, ReturnPath: dom.ReturnPath,
			DKIMSelector: dom.DKIMSelector, DKIMPublicKey: dom.DKIMPublicKey}) {
			status := dom.RecordStatus[rec.Key]
			if status == "" {
				status = store.DomainNotStarted
			}
			v.Records = append(v.Records, recordView{Record: rec, Status: status})
		}
		d.Domains = append(d.Domains, v)
	}
	h.render(w, http.StatusOK, "domains", view{Title: "Domains", Nav: "domains", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *Handler) verifyDomain(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := byPathID(h, w, r, func(id uuid.UUID) (store.Domain, error) {
		return h.store.MarkDomainPending(r.Context(), se.TeamID, id)
	})
	if !ok {
		return
	}
	if h.cfg.Verifier == nil {
		http.Error(w, "Domain verification is not available on this server.", http.StatusServiceUnavailable)
		return
	}
	if err := h.cfg.Verifier.Verify(r.Context(), d.ID.String()); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/domains", http.StatusSeeOther)
}

type suppressionsData struct {
	Suppressions []store.Suppression
}

func (h *Handler) suppressions(w http.ResponseWriter, r *http.Request, se *store.Session) {
	list, _, err := h.store.ListSuppressions(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "suppressions", view{Title: "Suppressions", Nav: "suppressions", Session: se,
		CSRF: se.CSRFToken, Data: suppressionsData{Suppressions: list}})
}

func (h *Handler) removeSuppression(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if _, ok := byPathID(h, w, r, func(id uuid.UUID) (store.Suppression, error) {
		return h.store.DeleteSuppression(r.Context(), se.TeamID, &id, "")
	}); !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/suppressions", http.StatusSeeOther)
}
