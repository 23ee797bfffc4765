package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/emersion/go-message/mail"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/usage"
)

// overviewHandler serves the pages of sent emails, logs, metrics, API keys
// and getting started (pages.go, quickstart.go, logs.go, metrics.go,
// health.go).
type overviewHandler struct {
	*Handler
	// usage reads the team's request log, email metrics and account
	// health.
	usage *usage.Service
}

// routes adds the pages of sent emails, logs, metrics, API keys
// and getting started.
func (h *overviewHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/emails", h.signedIn(h.emails))
	m.Handle("GET /dashboard/emails/{id}", h.signedIn(h.email))
	m.Handle("GET /dashboard/emails/{id}/raw", h.signedIn(h.emailRaw))
	m.Handle("GET /dashboard/emails/{id}/preview", h.signedIn(h.emailPreview))
	m.Handle("GET /dashboard/metrics", h.signedIn(h.metrics))
	m.Handle("GET /dashboard/logs", h.signedIn(h.logs))
	m.Handle("GET /dashboard/logs/{id}", h.signedIn(h.logEntry))
	m.Handle("GET /dashboard/getting-started", h.signedIn(h.quickstart))
	m.Handle("POST /dashboard/getting-started/key", h.signedIn(h.quickstartKey))
	m.Handle("GET /dashboard/api-keys", h.signedIn(h.apiKeys))
	m.Handle("POST /dashboard/api-keys", h.signedIn(h.createAPIKey))
	m.Handle("POST /dashboard/api-keys/{id}/revoke", h.signedIn(h.revokeAPIKey))
}

// emailStates are the filterable values of last_event.
var emailStates = []string{"scheduled", "queued", "sent", "delivered", "delivery_delayed", "bounced",
	"complained", "opened", "clicked", "failed", "canceled", "suppressed"}

type emailsData struct {
	Emails       []store.Email
	Filter       store.EmailFilter
	Since, Until string
	States       []string
	Domains      []string
	Pager        pager
	FilterQuery  string
}

func (h *overviewHandler) emails(w http.ResponseWriter, r *http.Request, se *store.Session) {
	q := r.URL.Query()
	f := store.EmailFilter{Status: q.Get("status"), Recipient: strings.TrimSpace(q.Get("recipient")), Domain: q.Get("domain")}
	d := emailsData{Filter: f, Since: q.Get("since"), Until: q.Get("until"), States: emailStates}
	if t, err := time.Parse("2006-01-02", d.Since); err == nil {
		f.Since = t
	}
	if t, err := time.Parse("2006-01-02", d.Until); err == nil {
		f.Until = t.Add(24 * time.Hour)
	}
	p := pageOf(q, 50)
	list, more, err := h.cfg.Emails.ListFiltered(r.Context(), se.TeamID, f, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Domains, err = h.cfg.Emails.SenderDomains(r.Context(), se.TeamID); err != nil {
		h.fail(w, r, err)
		return
	}
	if len(list) == 0 && q.Encode() == "" {
		// A team that has sent nothing yet starts with the quick start.
		h.quickstart(w, r, se)
		return
	}
	d.Emails = list
	keep := url.Values{}
	for _, k := range []string{"status", "recipient", "domain", "since", "until"} {
		if v := q.Get(k); v != "" {
			keep.Set(k, v)
		}
	}
	d.FilterQuery = keep.Encode()
	if len(list) > 0 {
		d.Pager = pagerOf(keep, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, http.StatusOK, "emails", view{Title: "Emails", Nav: "emails", Session: se, CSRF: se.CSRFToken, Data: d})
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

type emailData struct {
	Email       store.Email
	Events      []store.Event
	Headers     [][2]string
	SentText    string // the text/plain part as sent (generated from the HTML when the email had no text)
	WorkflowURL string
}

// textPart returns the first text/plain part of a message, "" when it has none.
func textPart(mr *mail.Reader) string {
	for {
		p, err := mr.NextPart()
		if err != nil {
			return ""
		}
		if h, ok := p.Header.(*mail.InlineHeader); ok {
			if ct, _, _ := h.ContentType(); ct == "text/plain" {
				b, err := io.ReadAll(io.LimitReader(p.Body, 1<<20))
				if err != nil {
					return ""
				}
				return string(b)
			}
		}
	}
}

func (h *overviewHandler) loadEmail(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Email, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Email, error) {
		return h.cfg.Emails.Get(r.Context(), se.TeamID, id)
	})
}

func (h *overviewHandler) email(w http.ResponseWriter, r *http.Request, se *store.Session) {
	e, ok := h.loadEmail(w, r, se)
	if !ok {
		return
	}
	evs, raw, err := h.cfg.Emails.History(r.Context(), e)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := emailData{Email: e, Events: evs}
	if raw != nil {
		if mr, err := mail.CreateReader(bytes.NewReader(raw)); err == nil {
			fields := mr.Header.Fields()
			for fields.Next() {
				d.Headers = append(d.Headers, [2]string{fields.Key(), fields.Value()})
			}
			d.SentText = textPart(mr)
		}
	}
	if h.cfg.TemporalUIURL != "" {
		query := url.Values{"query": {fmt.Sprintf("WorkflowId=%q", "email/"+e.ID.String())}}
		d.WorkflowURL = strings.TrimRight(h.cfg.TemporalUIURL, "/") + "/namespaces/" +
			url.PathEscape(h.cfg.Namespace) + "/workflows?" + query.Encode()
	}
	h.render(w, http.StatusOK, "email", view{Title: e.Subject, Nav: "emails", Session: se, CSRF: se.CSRFToken, Data: d})
}

// emailRaw downloads the built MIME message.
func (h *overviewHandler) emailRaw(w http.ResponseWriter, r *http.Request, se *store.Session) {
	e, ok := h.loadEmail(w, r, se)
	if !ok {
		return
	}
	raw, err := h.cfg.Emails.Message(r.Context(), e)
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, "This email has not been built yet.", http.StatusNotFound)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Disposition", `attachment; filename="`+e.ID.String()+`.eml"`)
	_, _ = w.Write(raw)
}

// emailPreview serves the HTML body for the sandboxed preview frame: no
// scripts, no forms, no plugins, and nothing remote (tracking pixels,
// stylesheets, fonts) unless the viewer asked for it (?remote=1, see
// previewPolicy).
func (h *overviewHandler) emailPreview(w http.ResponseWriter, r *http.Request, se *store.Session) {
	e, ok := h.loadEmail(w, r, se)
	if !ok {
		return
	}
	previewHeaders(w.Header(), r.URL.Query().Get("remote") == "1")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if e.HTML == nil {
		_, _ = w.Write([]byte("<p style=\"font-family:sans-serif;color:#666\">This email has no HTML part.</p>"))
		return
	}
	_, _ = w.Write([]byte(*e.HTML))
}

type apiKeysData struct {
	Keys []store.APIKey
	// Owner: the signed-in user owns the team and may create full_access
	// keys; members create sending_access keys only.
	Owner    bool
	NewToken string
	NewName  string
	Error    string
}

func (h *overviewHandler) apiKeys(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderAPIKeys(w, r, se, http.StatusOK, apiKeysData{})
}

func (h *overviewHandler) renderAPIKeys(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d apiKeysData) {
	keys, _, err := h.accounts.Keys.List(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Keys = keys
	role, err := h.accounts.Sessions.Role(r.Context(), se.TeamID, se.UserID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Owner = role == "owner"
	h.render(w, status, "apikeys", view{Title: "API Keys", Nav: "apikeys", Session: se, CSRF: se.CSRFToken, Data: d})
}

func (h *overviewHandler) createAPIKey(w http.ResponseWriter, r *http.Request, se *store.Session) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	perm := r.PostFormValue("permission")
	if perm != store.PermissionSendingAccess {
		perm = store.PermissionFullAccess
	}
	key, err := h.accounts.Keys.Create(r.Context(), account.KeyInput{TeamID: se.TeamID, CreatedBy: &se.UserID, Name: name,
		Permission: perm, AllowedIPs: strings.FieldsFunc(r.PostFormValue("allowed_ips"), func(c rune) bool {
			return c == ',' || unicode.IsSpace(c)
		}), Form: true}, by(r, se))
	var ie *invalid.Error
	if errors.As(err, &ie) {
		h.renderAPIKeys(w, r, se, http.StatusUnprocessableEntity, apiKeysData{Error: ie.Message})
		return
	}
	if errors.Is(err, store.ErrOwnersOnly) {
		h.renderAPIKeys(w, r, se, http.StatusForbidden, apiKeysData{
			Error: "Only team owners can create full access keys. Create a sending access key instead."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderAPIKeys(w, r, se, http.StatusCreated, apiKeysData{NewToken: key.Token, NewName: name})
}

func (h *overviewHandler) revokeAPIKey(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if _, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (struct{}, error) {
		hash, err := h.accounts.Keys.Revoke(r.Context(), se.TeamID, id, by(r, se))
		// A revoked key stops working in this process at once, even when
		// its audit entry failed.
		if hash != nil && h.cfg.Auth != nil {
			h.cfg.Auth.Forget(hash)
		}
		return struct{}{}, err
	}); !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/api-keys", http.StatusSeeOther)
}
