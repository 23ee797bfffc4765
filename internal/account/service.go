package account

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"

	"github.com/posthaste/posthaste/internal/store"
)

// Config wires the accounts service.
type Config struct {
	Store *store.Store
}

// Service is the accounts area: API keys (Keys), teams, members,
// invitations, users and their passwords (Members), and dashboard sessions
// with their second factor (Sessions). The API and the dashboard change
// and read the area only through it; each operation checks its input
// (*invalid.Error), makes the change and writes its audit entry. Hashing
// passwords, throttling sign-ins and sending emails stay with the callers.
type Service struct {
	Keys     *Keys
	Members  *Members
	Sessions *Sessions
}

// New builds the service; cmd builds it once and hands it to the API and
// the dashboard.
func New(cfg Config) *Service {
	return &Service{Keys: &Keys{st: cfg.Store}, Members: &Members{st: cfg.Store}, Sessions: &Sessions{st: cfg.Store}}
}

// RandomToken returns 32 random bytes, base64url: the secret of a session,
// an invitation link or a password-reset link.
func RandomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// TokenHash is what the store keeps of such a token.
func TokenHash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}
