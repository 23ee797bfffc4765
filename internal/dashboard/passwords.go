package dashboard

import (
	"net/http"
	"unicode/utf8"
)

// minPassword is the shortest password the dashboard accepts.
const minPassword = 10

// newPassword checks a new password and its repetition and returns its
// hash. When they are unfit it answers with refuse, given what to fix (or
// with a failure), and returns false.
func (h *Handler) newPassword(w http.ResponseWriter, r *http.Request, pw, confirm string, refuse func(problem string)) (string, bool) {
	switch {
	case utf8.RuneCountInString(pw) < minPassword:
		refuse("Choose a password of at least 10 characters.")
		return "", false
	case pw != confirm:
		refuse("The two new passwords differ.")
		return "", false
	}
	hash, err := h.passwords.Hash(r.Context(), pw)
	if err != nil {
		h.fail(w, r, err)
		return "", false
	}
	return hash, true
}
