package client

import (
	"context"
	"net/http"
)

// APIKeysService manages API keys.
type APIKeysService struct{ c *Client }

// API key permissions.
const (
	FullAccess    = "full_access"
	SendingAccess = "sending_access"
)

// CreateAPIKeyRequest creates a key. Name is required (at most 50
// characters); DomainID only goes with SendingAccess.
type CreateAPIKeyRequest struct {
	Name       string `json:"name"`
	Permission string `json:"permission,omitempty"`
	DomainID   string `json:"domain_id,omitempty"`
}

// CreatedAPIKey holds the new key's token, shown this once.
type CreatedAPIKey struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// APIKey is a listed key (never its token).
type APIKey struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Permission string  `json:"permission"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
}

// Create makes a key.
func (s *APIKeysService) Create(ctx context.Context, req *CreateAPIKeyRequest) (*CreatedAPIKey, error) {
	var out CreatedAPIKey
	if err := s.c.do(ctx, http.MethodPost, "/api-keys", nil, req, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns a page of keys.
func (s *APIKeysService) List(ctx context.Context, opts *ListOptions) (*List[APIKey], error) {
	var out List[APIKey]
	if err := s.c.do(ctx, http.MethodGet, "/api-keys", opts.query(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete revokes a key at once.
func (s *APIKeysService) Delete(ctx context.Context, id string) (*Deleted, error) {
	var out Deleted
	if err := s.c.do(ctx, http.MethodDelete, "/api-keys/"+escape(id), nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
