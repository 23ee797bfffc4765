// Package account creates teams with their first user and API key, for
// `posthaste admin` and the first run of `posthaste dev`.
package account

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/store"
)

// Credentials are what a new team's owner needs to start.
type Credentials struct {
	APIKey   string `json:"api_key"`
	Email    string `json:"email"`
	Password string `json:"password"`
	TeamID   string `json:"team_id"`
}

// NewTeam creates a team, its owner (a new user, or an existing one with
// that email) and a full-access API key named "Default". Password is empty
// when the user already existed. A new user's address counts as proven
// (store.User.EmailVerifiedAt): the operator created the account, so OAuth
// sign-in with a provider's verified email for it enters it; an existing
// user's is left as it is.
func NewTeam(ctx context.Context, st *store.Store, teamName, email string) (Credentials, error) {
	teamID, err := uuid.NewV7()
	if err != nil {
		return Credentials{}, err
	}
	if err := st.Accounts.CreateTeam(ctx, store.Team{ID: teamID, Name: teamName}); err != nil {
		return Credentials{}, fmt.Errorf("creating team: %w", err)
	}
	creds := Credentials{Email: email, TeamID: teamID.String()}
	u, err := st.Accounts.UserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		creds.Password, err = RandomPassword()
		if err != nil {
			return Credentials{}, err
		}
		hash, err := password.Hash(creds.Password)
		if err != nil {
			return Credentials{}, err
		}
		now := time.Now()
		u = store.User{ID: uuid.New(), Email: email, PasswordHash: hash, EmailVerifiedAt: &now}
		if err := st.Accounts.CreateUser(ctx, u); err != nil {
			return Credentials{}, fmt.Errorf("creating user: %w", err)
		}
	} else if err != nil {
		return Credentials{}, fmt.Errorf("finding user: %w", err)
	}
	if err := st.Accounts.AddMember(ctx, teamID, u.ID, "owner"); err != nil {
		return Credentials{}, fmt.Errorf("adding owner: %w", err)
	}
	creds.APIKey, _, err = NewKey(ctx, st, teamID, &u.ID, "Default", store.PermissionFullAccess)
	return creds, err
}

// NewKey creates an API key for a team, made by the user createdBy, and
// returns its token, shown once. allowed, when given, are the client
// address ranges the key may be used from (masked prefixes, as
// auth.ParseAllowedIPs returns them). A full_access key needs an owner as
// createdBy: store.ErrOwnersOnly otherwise (store.CreateAPIKey).
func NewKey(ctx context.Context, st *store.Store, teamID uuid.UUID, createdBy *uuid.UUID, name, permission string,
	allowed ...netip.Prefix) (string, uuid.UUID, error) {
	token, prefix, hash, err := auth.NewToken()
	if err != nil {
		return "", uuid.Nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return "", uuid.Nil, err
	}
	if err := st.Accounts.CreateAPIKey(ctx, store.APIKey{ID: id, TeamID: teamID, Name: name, Prefix: prefix,
		Hash: hash, Permission: permission, AllowedIPs: allowed, CreatedBy: createdBy}); err != nil {
		return "", uuid.Nil, fmt.Errorf("creating api key: %w", err)
	}
	return token, id, nil
}

// RandomPassword returns 20 random URL-safe characters.
func RandomPassword() (string, error) {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DevPlan is the plan of the team `dev` creates on its first run.
const DevPlan = "2.5m"

// Bootstrap returns the first-run credentials kept at path, creating the
// team, user and key (and the file, mode 0600) when the file does not
// exist yet. The file is written atomically and only after the database
// commit, so a crash in between leaves no file and the next run creates a
// fresh team.
func Bootstrap(ctx context.Context, st *store.Store, path, email string) (creds Credentials, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, &creds); err != nil {
			return Credentials{}, false, fmt.Errorf("reading %s: %w", path, err)
		}
		return creds, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return Credentials{}, false, fmt.Errorf("reading %s: %w", path, err)
	}
	creds, err = NewTeam(ctx, st, "My team", email)
	if err != nil {
		return Credentials{}, false, err
	}
	// The operator's own first team is not held to the free plan.
	if err := st.Accounts.SetPlan(ctx, uuid.MustParse(creds.TeamID), DevPlan); err != nil {
		return Credentials{}, false, fmt.Errorf("setting the first team's plan: %w", err)
	}
	out, err := json.MarshalIndent(creds, "", "  ")
	if err != nil {
		return Credentials{}, false, err
	}
	tmp := filepath.Join(filepath.Dir(path), ".credentials.json.tmp")
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return Credentials{}, false, fmt.Errorf("writing credentials: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return Credentials{}, false, fmt.Errorf("writing credentials: %w", err)
	}
	return creds, true, nil
}
