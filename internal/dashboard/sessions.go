package dashboard

import (
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

// sessionRow is one of the user's sessions on the account page. ID names
// it in the revoke form: the base64url of the hash of its cookie, from
// which the cookie cannot be recovered.
type sessionRow struct {
	store.Session
	ID      string
	Current bool
}

// userSessions lists the live sessions of se's user, se's own marked.
func (h *teamHandler) userSessions(r *http.Request, se *store.Session) ([]sessionRow, error) {
	list, err := h.store.Sessions.UserSessions(r.Context(), se.UserID, h.now(), h.cfg.SessionIdleTimeout)
	if err != nil {
		return nil, err
	}
	rows := make([]sessionRow, len(list))
	for i, s := range list {
		rows[i] = sessionRow{Session: s, ID: base64URL(s.IDHash), Current: string(s.IDHash) == string(se.IDHash)}
	}
	return rows, nil
}

// revokeSession ends one session of the signed-in user; another user's
// session is not found. Ending the current one signs out.
func (h *teamHandler) revokeSession(w http.ResponseWriter, r *http.Request, se *store.Session) {
	hash, err := base64URLDecode(r.PostFormValue("session"))
	if err != nil {
		err = store.ErrNotFound
	} else {
		err = h.store.Sessions.RevokeUserSession(r.Context(), se.UserID, hash)
	}
	if errors.Is(err, store.ErrNotFound) {
		h.renderAccount(w, r, se, http.StatusNotFound, accountData{Error: "That session has already ended."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.audited(w, r, se, audit.SessionRevoke, "user", se.UserID.String(),
		map[string]any{"current": string(hash) == string(se.IDHash)}) {
		return
	}
	if string(hash) == string(se.IDHash) {
		http.SetCookie(w, h.cookie(sessionCookie, "", -time.Second))
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/dashboard/account#sessions", http.StatusSeeOther)
}

// revokeOtherSessions ends every session of the user but this one.
func (h *teamHandler) revokeOtherSessions(w http.ResponseWriter, r *http.Request, se *store.Session) {
	n, err := h.store.Sessions.RevokeOtherSessions(r.Context(), se.UserID, se.IDHash)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.audited(w, r, se, audit.SessionRevoke, "user", se.UserID.String(), map[string]any{"others": n}) {
		return
	}
	http.Redirect(w, r, "/dashboard/account#sessions", http.StatusSeeOther)
}

// maxUserAgent bounds the user agent a session keeps.
const maxUserAgent = 300

// clipUserAgent cuts a user agent to maxUserAgent bytes at a rune boundary.
func clipUserAgent(ua string) string {
	if len(ua) <= maxUserAgent {
		return ua
	}
	ua = ua[:maxUserAgent]
	for !utf8.ValidString(ua) {
		ua = ua[:len(ua)-1]
	}
	return ua
}
