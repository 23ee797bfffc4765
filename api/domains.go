package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

// domainsAPI serves /domains through the use case shared with the
// dashboard.
type domainsAPI struct {
	*Server
	domainSvc *domains.Service
	// records is the operator's side of the DNS records shown with each
	// domain.
	records records.Config
}

type createDomainRequest struct {
	Name             *string              `json:"name"`
	Region           *string              `json:"region"`
	CustomReturnPath *string              `json:"custom_return_path"`
	OpenTracking     *bool                `json:"open_tracking"`
	ClickTracking    *bool                `json:"click_tracking"`
	TLS              *string              `json:"tls"`
	Capabilities     *capabilitiesRequest `json:"capabilities"`
	// TrackingSubdomain labels the domain's tracking subdomain (issue 19).
	TrackingSubdomain *string `json:"tracking_subdomain"`
}

// capabilitiesRequest is Resend's capabilities object of a domain
// request; sending can only be enabled.
type capabilitiesRequest struct {
	Sending   *string `json:"sending"`
	Receiving *string `json:"receiving"`
}

// receiving checks c and returns its receiving capability (nil when
// unchanged); the domains service checks the value.
func (c *capabilitiesRequest) receiving() (*string, error) {
	if c == nil {
		return nil, nil
	}
	if c.Sending != nil && *c.Sending != "enabled" {
		return nil, validation("The `capabilities.sending` field must be enabled: sending cannot be disabled.")
	}
	return c.Receiving, nil
}

// decodeJSON reads the body into v; a body that is not a JSON object, or a
// field of the wrong type, is a 422 naming the field.
func decodeJSON(c *gin.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errorf(http.StatusUnprocessableEntity, nameValidation,
				fmt.Sprintf("The `%s` field must be a %s.", te.Field, jsonKind(te.Type.Kind().String())))
		}
		return errorf(http.StatusUnprocessableEntity, nameValidation, "The request body must be a JSON object.")
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "bool":
		return "boolean"
	case "ptr":
		return "value of the documented type"
	}
	return k
}

func validation(format string, args ...any) error {
	return errorf(http.StatusUnprocessableEntity, nameValidation, fmt.Sprintf(format, args...))
}

func (s *domainsAPI) createDomain(c *gin.Context) {
	var req createDomainRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if req.Name == nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `name` field."))
		return
	}
	receiving, err := req.Capabilities.receiving()
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.domainSvc.Add(c.Request.Context(), principal(c).TeamID, domains.Request{Name: *req.Name,
		Region: req.Region, ReturnPath: req.CustomReturnPath, OpenTracking: req.OpenTracking,
		ClickTracking: req.ClickTracking, TLS: req.TLS, Receiving: receiving,
		TrackingSubdomain: req.TrackingSubdomain}, s.actor(c))
	if errors.Is(err, domains.ErrNoMasterKey) {
		err = errorf(http.StatusInternalServerError, nameApplicationError,
			"Domains cannot be added: the server has no master key (POSTHASTE_MASTER_KEY) to protect their DKIM keys.")
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	s.logger.Info("domain created", "team_id", d.TeamID, "domain", d.Name, "request_id", requestID(c))
	c.JSON(http.StatusCreated, s.renderDomain(d, true))
}

type domainJSON struct {
	Object            string               `json:"object"`
	ID                string               `json:"id"`
	Name              string               `json:"name"`
	Status            string               `json:"status"`
	CreatedAt         string               `json:"created_at"`
	Region            string               `json:"region"`
	CustomReturnPath  string               `json:"custom_return_path"`
	OpenTracking      bool                 `json:"open_tracking"`
	ClickTracking     bool                 `json:"click_tracking"`
	TrackingSubdomain string               `json:"tracking_subdomain"`
	TLS               string               `json:"tls"`
	Capabilities      capabilities         `json:"capabilities"`
	Records           []domains.RecordJSON `json:"records,omitempty"`
	// TrackingWarning (Posthaste's) says why the domain's mail is sent
	// untracked although tracking is on (domains.TrackingWarning).
	TrackingWarning string `json:"tracking_warning,omitempty"`
}

// capabilities are Resend's capabilities of a domain: sending is always
// enabled in Posthaste; receiving is the domain's (issue 16 point 4).
type capabilities struct {
	Sending   string `json:"sending"`
	Receiving string `json:"receiving"`
}

func (s *domainsAPI) renderDomain(d store.Domain, withRecords bool) domainJSON {
	j := domainJSON{Object: "domain", ID: d.ID.String(), Name: d.Name, Status: d.Status,
		CreatedAt: formatTime(d.CreatedAt), Region: d.Region, CustomReturnPath: d.ReturnPath,
		OpenTracking: d.OpenTracking, ClickTracking: d.ClickTracking, TrackingSubdomain: d.TrackingSubdomain,
		TLS: d.TLS, Capabilities: capabilities{Sending: "enabled", Receiving: d.Receiving},
		TrackingWarning: domains.TrackingWarning(s.records, d)}
	if j.Capabilities.Receiving == "" {
		j.Capabilities.Receiving = store.ReceivingDisabled
	}
	if !withRecords {
		return j
	}
	j.Records = domains.RecordsJSON(s.records, d)
	return j
}

func (s *domainsAPI) getDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.domainSvc.Get(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, s.renderDomain(d, true))
}

func (s *domainsAPI) listDomains(c *gin.Context) {
	respondList(s.Server, c, listAll, s.domainSvc.List, func(d store.Domain) domainJSON { return s.renderDomain(d, false) })
}

type updateDomainRequest struct {
	OpenTracking  *bool                `json:"open_tracking"`
	ClickTracking *bool                `json:"click_tracking"`
	TLS           *string              `json:"tls"`
	Capabilities  *capabilitiesRequest `json:"capabilities"`
	// TrackingSubdomain labels the domain's tracking subdomain (issue 19).
	TrackingSubdomain *string `json:"tracking_subdomain"`
}

func (s *domainsAPI) updateDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req updateDomainRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	receiving, err := req.Capabilities.receiving()
	if err != nil {
		s.respondError(c, err)
		return
	}
	if _, err := s.domainSvc.Update(c.Request.Context(), principal(c).TeamID, id, domains.Settings{
		OpenTracking: req.OpenTracking, ClickTracking: req.ClickTracking, TLS: req.TLS, Receiving: receiving,
		TrackingSubdomain: req.TrackingSubdomain,
	}, s.actor(c)); err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "domain", "id": id})
}

func (s *domainsAPI) verifyDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.domainSvc.Verify(c.Request.Context(), principal(c).TeamID, id, s.actor(c))
	if errors.Is(err, domains.ErrVerificationUnavailable) {
		s.respondError(c, errorf(http.StatusServiceUnavailable, nameServiceUnavailable,
			"The verification could not be started; retry later."))
		s.logger.Warn("starting domain verification", "domain", d.Name, "request_id", requestID(c), "err", err)
		return
	}
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "domain", "id": id})
}

func (s *domainsAPI) deleteDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	p := principal(c)
	if _, err := s.domainSvc.Delete(c.Request.Context(), p.TeamID, p.CreatedBy, id, s.actor(c)); err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "domain", "id": id, "deleted": true})
}
