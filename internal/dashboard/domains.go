package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/webhook"
)

// domainsHandler serves the pages of domains, suppressions and IP pools
// (domains.go, ippools.go).
type domainsHandler struct{ *Handler }

// routes adds the pages of domains, suppressions and IP pools.
func (h *domainsHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/domains", h.signedIn(h.domains))
	m.Handle("POST /dashboard/domains", h.signedIn(h.addDomain))
	m.Handle("GET /dashboard/domains/{id}", h.signedIn(h.domain))
	m.Handle("POST /dashboard/domains/{id}/verify", h.signedIn(h.verifyDomain))
	m.Handle("POST /dashboard/domains/{id}/settings", h.signedIn(h.domainSettings))
	m.Handle("GET /dashboard/domains/{id}/delete", h.signedIn(h.deleteDomainPage))
	m.Handle("POST /dashboard/domains/{id}/delete", h.signedIn(h.deleteDomain))
	m.Handle("GET /dashboard/ip-pools", h.signedIn(h.ipPools))
	m.Handle("GET /dashboard/suppressions", h.signedIn(h.suppressions))
	m.Handle("POST /dashboard/suppressions/{id}/remove", h.signedIn(h.removeSuppression))
}

// domainForm is what the Add a domain form holds, kept when it is shown
// again with an error.
type domainForm struct {
	Name, Region, ReturnPath string
}

type domainsData struct {
	Domains []store.Domain
	Regions []string
	Form    domainForm
	Error   formError
}

// formError is a problem with a form's input, shown above the form.
type formError struct {
	Message string
	Field   string // the API name of the offending field, "" when none
}

// asFormError returns the form error of err, false when err is neither
// one a person can fix by changing the form nor a limit of the server
// they should read next to it.
func asFormError(err error) (formError, bool) {
	var ie *invalid.Error
	var le *store.LimitError
	switch {
	case errors.As(err, &ie):
		return formError{Message: ie.Message, Field: ie.Field}, true
	case errors.As(err, &le):
		return formError{Message: fmt.Sprintf("Your team already has %d %s, the most allowed: delete one first.", le.Max, le.What)}, true
	case errors.Is(err, domains.ErrNoMasterKey), errors.Is(err, webhook.ErrNoMasterKey):
		return formError{Message: "This server has no master key (POSTHASTE_MASTER_KEY) to protect the DKIM keys and " +
			"signing secrets it would make. Ask its operator to set one."}, true
	}
	return formError{}, false
}

func (h *domainsHandler) domains(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderDomains(w, r, se, http.StatusOK, domainsData{Form: domainForm{ReturnPath: domains.DefaultReturnPath}})
}

func (h *domainsHandler) renderDomains(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d domainsData) {
	list, _, err := h.domainSvc.List(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Domains, d.Regions = list, domains.Regions
	h.render(w, status, "domains", view{Title: "Domains", Nav: "domains", Session: se, CSRF: se.CSRFToken, Data: d})
}

// addDomain adds a domain and opens its page with the records to publish.
func (h *domainsHandler) addDomain(w http.ResponseWriter, r *http.Request, se *store.Session) {
	f := domainForm{Name: strings.TrimSpace(r.PostFormValue("name")), Region: r.PostFormValue("region"),
		ReturnPath: strings.TrimSpace(r.PostFormValue("custom_return_path"))}
	req := domains.Request{Name: f.Name, Region: &f.Region, ReturnPath: &f.ReturnPath}
	if f.Region == "" {
		req.Region = nil
	}
	if f.ReturnPath == "" {
		req.ReturnPath = nil
	}
	d, err := h.domainSvc.Add(r.Context(), se.TeamID, req, by(r, se))
	if fe, ok := asFormError(err); ok {
		h.renderDomains(w, r, se, http.StatusUnprocessableEntity, domainsData{Form: f, Error: fe})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("domain created", "team_id", se.TeamID, "domain", d.Name)
	http.Redirect(w, r, "/dashboard/domains/"+d.ID.String()+"?done=added", http.StatusSeeOther)
}

type domainData struct {
	Domain   store.Domain
	Records  []domains.Record
	TLSModes []string
	Notice   string
	Error    formError
	Confirm  string // what was typed on the delete page
	// CanVerify is false when the server cannot start verifications.
	CanVerify bool
	// TrackingWarning says why the domain's mail is sent untracked
	// although tracking is on (domains.TrackingWarning).
	TrackingWarning string
}

// loadDomain loads the {id} domain of the session's team.
func (h *domainsHandler) loadDomain(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Domain, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Domain, error) {
		return h.domainSvc.Get(r.Context(), se.TeamID, id)
	})
}

// domainNotices are the messages a redirect back to a domain's page may ask for.
var domainNotices = map[string]string{
	"added":    "Domain added. Publish the records below at your DNS provider, then verify.",
	"verify":   "Checking the records now; the statuses below update as the checks finish. DNS changes can take a while to be visible.",
	"settings": "Settings saved.",
}

// domain shows a domain: its records to publish with their statuses, its
// settings, and the way to verify and delete it.
func (h *domainsHandler) domain(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := h.loadDomain(w, r, se)
	if !ok {
		return
	}
	h.renderDomain(w, se, http.StatusOK, "domain", domainData{Domain: d, Notice: domainNotices[r.URL.Query().Get("done")]})
}

func (h *domainsHandler) renderDomain(w http.ResponseWriter, se *store.Session, status int, page string, d domainData) {
	d.Records = domains.Records(h.cfg.Records, d.Domain)
	d.TLSModes = domains.TLSModes
	d.CanVerify = h.domainSvc.CanVerify()
	d.TrackingWarning = domains.TrackingWarning(h.cfg.Records, d.Domain)
	title := d.Domain.Name
	if page == "domain_delete" {
		title = "Delete " + title
	}
	h.render(w, status, page, view{Title: title, Nav: "domains", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *domainsHandler) verifyDomain(w http.ResponseWriter, r *http.Request, se *store.Session) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	d, err := h.domainSvc.Verify(r.Context(), se.TeamID, id, by(r, se))
	if errors.Is(err, domains.ErrVerificationUnavailable) {
		h.logger.Warn("starting domain verification", "team_id", se.TeamID, "domain", d.Name, "err", err)
		h.renderDomain(w, se, http.StatusServiceUnavailable, "domain", domainData{Domain: d,
			Error: formError{Message: "The verification could not be started. Try again in a minute."}})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/domains/"+id.String()+"?done=verify", http.StatusSeeOther)
}

// domainSettings changes a domain's tracking, TLS and receiving
// settings. The form sends every setting: an unchecked box is off.
func (h *domainsHandler) domainSettings(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := h.loadDomain(w, r, se)
	if !ok {
		return
	}
	open, click := r.PostFormValue("open_tracking") == "on", r.PostFormValue("click_tracking") == "on"
	tls := r.PostFormValue("tls")
	receiving := store.ReceivingDisabled
	if r.PostFormValue("receiving") == "on" {
		receiving = store.ReceivingEnabled
	}
	_, err := h.domainSvc.Update(r.Context(), se.TeamID, d.ID, domains.Settings{OpenTracking: &open, ClickTracking: &click,
		TLS: &tls, Receiving: &receiving}, by(r, se))
	if fe, ok := asFormError(err); ok {
		h.renderDomain(w, se, http.StatusUnprocessableEntity, "domain", domainData{Domain: d, Error: fe})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/domains/"+d.ID.String()+"?done=settings", http.StatusSeeOther)
}

// deleteDomainPage asks to confirm a deletion by typing the domain's name.
func (h *domainsHandler) deleteDomainPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := h.loadDomain(w, r, se)
	if !ok {
		return
	}
	h.renderDomain(w, se, http.StatusOK, "domain_delete", domainData{Domain: d})
}

func (h *domainsHandler) deleteDomain(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := h.loadDomain(w, r, se)
	if !ok {
		return
	}
	typed := strings.TrimSpace(r.PostFormValue("confirm"))
	if !strings.EqualFold(strings.TrimSuffix(typed, "."), d.Name) {
		h.renderDomain(w, se, http.StatusUnprocessableEntity, "domain_delete", domainData{Domain: d, Confirm: typed,
			Error: formError{Field: "confirm", Message: "Type the domain name, " + d.Name + ", to confirm."}})
		return
	}
	if _, err := h.domainSvc.Delete(r.Context(), se.TeamID, &se.UserID, d.ID, by(r, se)); err != nil {
		if errors.Is(err, store.ErrOwnersOnly) {
			h.renderDomain(w, se, http.StatusForbidden, "domain_delete", domainData{Domain: d, Confirm: typed,
				Error: formError{Message: "Only team owners can delete domains."}})
			return
		}
		h.failOr404(w, r, err)
		return
	}
	h.logger.Info("domain deleted", "team_id", se.TeamID, "domain", d.Name)
	http.Redirect(w, r, "/dashboard/domains", http.StatusSeeOther)
}

type suppressionsData struct {
	Suppressions []store.Suppression
}

func (h *domainsHandler) suppressions(w http.ResponseWriter, r *http.Request, se *store.Session) {
	list, _, err := h.cfg.Emails.ListSuppressions(r.Context(), se.TeamID, "", store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "suppressions", view{Title: "Suppressions", Nav: "suppressions", Session: se,
		CSRF: se.CSRFToken, Data: suppressionsData{Suppressions: list}})
}

func (h *domainsHandler) removeSuppression(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if _, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Suppression, error) {
		return h.cfg.Emails.DeleteSuppression(r.Context(), se.TeamID, id.String(), by(r, se))
	}); !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/suppressions", http.StatusSeeOther)
}
