package account

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// Keys creates, lists, renames and revokes a team's API keys.
type Keys struct{ st *store.Store }

// KeyInput is a new API key.
type KeyInput struct {
	TeamID uuid.UUID
	// CreatedBy is the user the key belongs to: a full_access key needs
	// an owner (store.ErrOwnersOnly otherwise); nil for none.
	CreatedBy *uuid.UUID
	// Name is required, at most 50 characters; it is stored trimmed.
	Name string
	// Permission is full_access ("" too) or sending_access.
	Permission string
	// DomainID, a UUID, limits a sending_access key to one of the team's
	// domains; nil for none.
	DomainID *string
	// AllowedIPs are the client addresses or ranges the key may be used
	// from (auth.ParseAllowedIPs); none means any.
	AllowedIPs []string
	// Form words the problems as the dashboard's API keys page does
	// ("Give the key a name of 1 to 50 characters.", "Allowed addresses:
	// …") rather than as the API does.
	Form bool
}

// ErrInvalidDomainID is the error of a domain_id that is not a UUID (the
// API answers it as invalid_parameter).
var ErrInvalidDomainID = invalid.Errorf("domain_id", "The `domain_id` field must be a valid UUID.")

// keyName checks a key's name (required, at most 50 characters) and
// returns it trimmed; form words the problem as the dashboard does.
func keyName(name string, form bool) (string, error) {
	trimmed := strings.TrimSpace(name)
	bad := func(ie *invalid.Error) error {
		if form {
			return invalid.Errorf("name", "Give the key a name of 1 to 50 characters.")
		}
		return ie
	}
	if trimmed == "" {
		return "", bad(invalid.Missing("name"))
	}
	if utf8.RuneCountInString(name) > 50 {
		return "", bad(invalid.Errorf("name", "The `name` field must be at most 50 characters."))
	}
	return trimmed, nil
}

// NewAPIKey is a created key: Token is shown once.
type NewAPIKey struct {
	ID         uuid.UUID
	Token      string
	Permission string
}

// Create checks in and creates the key, writing its audit entry (by is the
// actor). Errors: *invalid.Error for bad input (ErrInvalidDomainID among
// them), store.ErrNotFound when the domain is not the team's,
// store.ErrOwnersOnly for a full_access key of a non-owner.
func (k *Keys) Create(ctx context.Context, in KeyInput, by audit.Entry) (NewAPIKey, error) {
	name, err := keyName(in.Name, in.Form)
	if err != nil {
		return NewAPIKey{}, err
	}
	perm := in.Permission
	switch perm {
	case "":
		perm = store.PermissionFullAccess
	case store.PermissionFullAccess, store.PermissionSendingAccess:
	default:
		return NewAPIKey{}, invalid.Errorf("permission", "The `permission` field must be full_access or sending_access.")
	}
	var domainID *uuid.UUID
	if in.DomainID != nil {
		if perm != store.PermissionSendingAccess {
			return NewAPIKey{}, invalid.Errorf("domain_id",
				"The `domain_id` field can only be used with sending_access permission.")
		}
		did, err := uuid.Parse(*in.DomainID)
		if err != nil {
			return NewAPIKey{}, ErrInvalidDomainID
		}
		if _, err := k.st.Domains.GetDomain(ctx, in.TeamID, did); err != nil {
			return NewAPIKey{}, err
		}
		domainID = &did
	}
	allowed, err := auth.ParseAllowedIPs(in.AllowedIPs)
	if err != nil {
		if in.Form {
			return NewAPIKey{}, invalid.Errorf("allowed_ips", "Allowed addresses: %s.", err.Error())
		}
		return NewAPIKey{}, invalid.Errorf("allowed_ips", "The `allowed_ips` field: %s.", err.Error())
	}
	token, prefix, hash, err := auth.NewToken()
	if err != nil {
		return NewAPIKey{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return NewAPIKey{}, err
	}
	// The new key is its maker's: a full_access key only when its creator
	// owns the team (store.CreateAPIKey keeps the rule).
	e, err := audit.Succeeded(by, audit.APIKeyCreate, "api_key", id.String(), map[string]any{"permission": perm})
	if err != nil {
		return NewAPIKey{}, err
	}
	if err := k.st.Accounts.CreateAPIKeyBy(ctx, store.APIKey{ID: id, TeamID: in.TeamID, Name: name, Prefix: prefix,
		Hash: hash, Permission: perm, DomainID: domainID, AllowedIPs: allowed, CreatedBy: in.CreatedBy}, e); err != nil {
		return NewAPIKey{}, err
	}
	return NewAPIKey{ID: id, Token: token, Permission: perm}, nil
}

// List lists the team's live keys, newest first.
func (k *Keys) List(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.APIKey, bool, error) {
	return k.st.Accounts.ListAPIKeys(ctx, teamID, p)
}

// Rename renames a live key of the team to name (checked as Create's,
// stored trimmed) and writes its audit entry in the same transaction (by is
// the actor). *invalid.Error for a bad name; store.ErrNotFound when the
// team has no such live key.
func (k *Keys) Rename(ctx context.Context, teamID, id uuid.UUID, name string, by audit.Entry) error {
	name, err := keyName(name, false)
	if err != nil {
		return err
	}
	e, err := audit.Succeeded(by, audit.APIKeyRename, "api_key", id.String(), nil)
	if err != nil {
		return err
	}
	return k.st.Accounts.RenameAPIKeyBy(ctx, teamID, id, name, e)
}

// Revoke revokes a key of the team and writes its audit entry. It returns
// the key's hash, for the caller to drop from its key cache; the key and
// its entry are written in one transaction, so an error means the key is
// still live. store.ErrNotFound when the team has no such live key.
func (k *Keys) Revoke(ctx context.Context, teamID, id uuid.UUID, by audit.Entry) ([]byte, error) {
	e, err := audit.Succeeded(by, audit.APIKeyRevoke, "api_key", id.String(), nil)
	if err != nil {
		return nil, err
	}
	return k.st.Accounts.RevokeAPIKeyBy(ctx, teamID, id, e)
}
