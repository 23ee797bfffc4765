package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
)

// SMTPSettings is how mail clients reach the SMTP gateway, shown on the
// quick-start page.
type SMTPSettings struct {
	// Host is the gateway's host name; "" means the host of PublicURL.
	Host string
	// STARTTLSPorts and TLSPorts are its ports with STARTTLS and with
	// implicit TLS; both empty hide the SMTP settings.
	STARTTLSPorts []int
	TLSPorts      []int
	// Username is the AUTH user name; the password is an API key.
	Username string
}

type quickstartData struct {
	BaseURL  string // where the API is, for the curl example
	From, To string // a sandbox sender and recipient that work without setup
	SMTP     SMTPSettings
	STARTTLS string // the ports, comma separated
	TLS      string
	// Key is the API key just created, shown once; "" before.
	Key     string
	KeyName string
	Error   string
}

func joinPorts(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// smtpHost is the host of the SMTP settings: the configured one, or the
// host of the public URL.
func (h *overviewHandler) smtpHost() string {
	if h.cfg.SMTP.Host != "" {
		return h.cfg.SMTP.Host
	}
	if u, err := url.Parse(h.cfg.PublicURL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}

// quickstart is the first page of a team that has sent nothing yet: it
// creates an API key and shows how to send with it over the API and SMTP.
// It also stays reachable at /dashboard/getting-started.
func (h *overviewHandler) quickstart(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderQuickstart(w, se, http.StatusOK, quickstartData{})
}

func (h *overviewHandler) renderQuickstart(w http.ResponseWriter, se *store.Session, status int, d quickstartData) {
	d.BaseURL, d.From, d.To = h.cfg.PublicURL, "Acme <"+sandbox.Sender+">", "delivered@"+sandbox.Domain
	d.SMTP = h.cfg.SMTP
	d.SMTP.Host = h.smtpHost()
	d.STARTTLS, d.TLS = joinPorts(d.SMTP.STARTTLSPorts), joinPorts(d.SMTP.TLSPorts)
	h.render(w, status, "quickstart", view{Title: "Get started", Nav: "emails", Session: se, CSRF: se.CSRFToken, Data: d})
}

// quickstartKey creates a sending key and shows the examples with it. The
// key is shown this once: only its hash is stored.
func (h *overviewHandler) quickstartKey(w http.ResponseWriter, r *http.Request, se *store.Session) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	if name == "" {
		name = "Onboarding"
	}
	key, err := h.accounts.Keys.Create(r.Context(), account.KeyInput{TeamID: se.TeamID, CreatedBy: &se.UserID, Name: name,
		Permission: store.PermissionSendingAccess, Form: true}, by(r, se))
	var ie *invalid.Error
	if errors.As(err, &ie) {
		h.renderQuickstart(w, se, http.StatusUnprocessableEntity, quickstartData{KeyName: name, Error: ie.Message})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("api key created", "team_id", se.TeamID)
	h.renderQuickstart(w, se, http.StatusCreated, quickstartData{Key: key.Token, KeyName: name})
}
