package client

import (
	"context"
	"net/http"
)

// DomainsService manages sending domains.
type DomainsService struct{ c *Client }

// CreateDomainRequest adds a domain. Name is required; the others default
// on the server (region us-east-1, return path "send", TLS opportunistic).
type CreateDomainRequest struct {
	Name             string `json:"name"`
	Region           string `json:"region,omitempty"`
	CustomReturnPath string `json:"custom_return_path,omitempty"`
	OpenTracking     *bool  `json:"open_tracking,omitempty"`
	ClickTracking    *bool  `json:"click_tracking,omitempty"`
	TLS              string `json:"tls,omitempty"` // "opportunistic" or "enforced"
}

// DomainRecord is a DNS record to publish for a domain.
type DomainRecord struct {
	Record   string `json:"record"` // DKIM, SPF, DMARC
	Name     string `json:"name"`
	Type     string `json:"type"` // TXT, MX
	TTL      string `json:"ttl"`
	Status   string `json:"status"`
	Value    string `json:"value"`
	Priority *int   `json:"priority,omitempty"`
}

// Domain is a domain object; Records is empty in lists.
type Domain struct {
	Object        string         `json:"object"`
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	Status        string         `json:"status"`
	CreatedAt     string         `json:"created_at"`
	Region        string         `json:"region"`
	OpenTracking  bool           `json:"open_tracking"`
	ClickTracking bool           `json:"click_tracking"`
	TLS           string         `json:"tls"`
	Records       []DomainRecord `json:"records"`
}

// Create adds a domain and returns it with the records to publish.
func (s *DomainsService) Create(ctx context.Context, req *CreateDomainRequest) (*Domain, error) {
	var out Domain
	if err := s.c.do(ctx, http.MethodPost, "/domains", nil, req, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns a page of domains.
func (s *DomainsService) List(ctx context.Context, opts *ListOptions) (*List[Domain], error) {
	var out List[Domain]
	if err := s.c.do(ctx, http.MethodGet, "/domains", opts.query(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Get returns a domain with its records.
func (s *DomainsService) Get(ctx context.Context, id string) (*Domain, error) {
	var out Domain
	if err := s.c.do(ctx, http.MethodGet, "/domains/"+escape(id), nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateDomainRequest changes a domain's settings; nil and "" fields are
// left unchanged.
type UpdateDomainRequest struct {
	OpenTracking  *bool  `json:"open_tracking,omitempty"`
	ClickTracking *bool  `json:"click_tracking,omitempty"`
	TLS           string `json:"tls,omitempty"`
}

// Update changes a domain's settings.
func (s *DomainsService) Update(ctx context.Context, id string, req *UpdateDomainRequest) (*ObjectRef, error) {
	var out ObjectRef
	if err := s.c.do(ctx, http.MethodPatch, "/domains/"+escape(id), nil, req, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Verify starts (or nudges) the verification of a domain's records.
func (s *DomainsService) Verify(ctx context.Context, id string) (*ObjectRef, error) {
	var out ObjectRef
	if err := s.c.do(ctx, http.MethodPost, "/domains/"+escape(id)+"/verify", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete removes a domain.
func (s *DomainsService) Delete(ctx context.Context, id string) (*Deleted, error) {
	var out Deleted
	if err := s.c.do(ctx, http.MethodDelete, "/domains/"+escape(id), nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
