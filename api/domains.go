package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// Regions are the delivery regions a domain can choose; the first is the
// default.
var Regions = []string{"us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"}

// Verifier starts and nudges the verification of domains.
type Verifier interface {
	// Verify makes the domain's verification check its records at once,
	// starting the verification when none is running.
	Verify(ctx context.Context, domainID string) error
	// Forget stops the verification of a deleted domain.
	Forget(ctx context.Context, domainID string) error
}

// DomainConfig is what the domain endpoints need besides the store.
type DomainConfig struct {
	Verifier     Verifier
	Keys         *seal.Box // seals new DKIM keys; nil refuses to create domains
	DKIMSelector string
	Records      records.Config
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

type createDomainRequest struct {
	Name             *string `json:"name"`
	Region           *string `json:"region"`
	CustomReturnPath *string `json:"custom_return_path"`
	OpenTracking     *bool   `json:"open_tracking"`
	ClickTracking    *bool   `json:"click_tracking"`
	TLS              *string `json:"tls"`
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

// domainName checks and normalizes a domain name: lower-case ASCII
// (punycode for internationalized names), at least two labels.
func domainName(name string) (string, error) {
	name = strings.TrimSuffix(strings.TrimSpace(name), ".")
	if name == "" {
		return "", errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `name` field.")
	}
	bad := validation("The `name` field must be a domain name such as example.com, not %q.", name)
	if strings.ContainsAny(name, "@<>\" \t,;") {
		return "", bad
	}
	a, err := submit.ParseAddress("postmaster@" + name)
	if err != nil || !strings.Contains(a.Domain, ".") || strings.HasPrefix(a.Domain, "[") {
		return "", bad
	}
	if sandbox.IsDomain(a.Domain) {
		return "", validation("The `name` field cannot be the sandbox domain %s, which works without verification.", sandbox.Domain)
	}
	return a.Domain, nil
}

func tlsMode(v *string) error {
	if v != nil && *v != store.TLSOpportunistic && *v != store.TLSEnforced {
		return validation("The `tls` field must be opportunistic or enforced.")
	}
	return nil
}

func (s *Server) createDomain(c *gin.Context) {
	var req createDomainRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if req.Name == nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `name` field."))
		return
	}
	name, err := domainName(*req.Name)
	if err != nil {
		s.respondError(c, err)
		return
	}
	region := Regions[0]
	if req.Region != nil {
		if !slices.Contains(Regions, *req.Region) {
			s.respondError(c, validation("The `region` field must be one of %s.", strings.Join(Regions, ", ")))
			return
		}
		region = *req.Region
	}
	rp := "send"
	if req.CustomReturnPath != nil {
		rp = strings.ToLower(strings.TrimSpace(*req.CustomReturnPath))
		if !dnsLabel.MatchString(rp) {
			s.respondError(c, validation("The `custom_return_path` field must be one DNS label of letters, digits and hyphens, such as send."))
			return
		}
	}
	if err := tlsMode(req.TLS); err != nil {
		s.respondError(c, err)
		return
	}
	if s.domains.Keys == nil {
		s.respondError(c, errorf(http.StatusInternalServerError, nameApplicationError,
			"Domains cannot be added: the server has no master key (POSTHASTE_MASTER_KEY) to protect their DKIM keys."))
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	key, err := dkim.GenerateKey()
	if err != nil {
		s.respondError(c, err)
		return
	}
	sealed, err := s.domains.Keys.Seal(key.PrivatePKCS8, id[:])
	if err != nil {
		s.respondError(c, err)
		return
	}
	d := store.Domain{ID: id, TeamID: principal(c).TeamID, Name: name, Region: region,
		Status: store.DomainNotStarted, ReturnPath: rp, TLS: store.TLSOpportunistic,
		DKIMSelector: s.domains.DKIMSelector, DKIMPublicKey: key.PublicBase64, DKIMPrivateKey: sealed,
		RecordStatus: map[string]string{}}
	if req.OpenTracking != nil {
		d.OpenTracking = *req.OpenTracking
	}
	if req.ClickTracking != nil {
		d.ClickTracking = *req.ClickTracking
	}
	if req.TLS != nil {
		d.TLS = *req.TLS
	}
	for _, k := range records.Keys {
		d.RecordStatus[k] = store.DomainNotStarted
	}
	if err := s.store.CreateDomain(c.Request.Context(), d); err != nil {
		if errors.Is(err, store.ErrConflict) {
			err = validation("The domain %s has already been added.", name)
		}
		s.respondError(c, err)
		return
	}
	d, err = s.store.GetDomain(c.Request.Context(), d.TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	s.logger.Info("domain created", "team_id", d.TeamID, "domain", d.Name, "request_id", requestID(c))
	s.emitDomainEvent(c, "domain.created", d)
	c.JSON(http.StatusCreated, s.renderDomain(d, true))
}

type recordJSON struct {
	Record   string `json:"record"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	TTL      string `json:"ttl"`
	Status   string `json:"status"`
	Value    string `json:"value"`
	Priority *int   `json:"priority,omitempty"`
}

type domainJSON struct {
	Object           string       `json:"object"`
	ID               string       `json:"id"`
	Name             string       `json:"name"`
	Status           string       `json:"status"`
	CreatedAt        string       `json:"created_at"`
	Region           string       `json:"region"`
	CustomReturnPath string       `json:"custom_return_path"`
	OpenTracking     bool         `json:"open_tracking"`
	ClickTracking    bool         `json:"click_tracking"`
	TLS              string       `json:"tls"`
	Records          []recordJSON `json:"records,omitempty"`
}

func (s *Server) renderDomain(d store.Domain, withRecords bool) domainJSON {
	j := domainJSON{Object: "domain", ID: d.ID.String(), Name: d.Name, Status: d.Status,
		CreatedAt: formatTime(d.CreatedAt), Region: d.Region, CustomReturnPath: d.ReturnPath,
		OpenTracking: d.OpenTracking, ClickTracking: d.ClickTracking, TLS: d.TLS}
	if !withRecords {
		return j
	}
	j.Records = []recordJSON{}
	for _, r := range records.For(s.domains.Records, records.Domain{Name: d.Name, ReturnPath: d.ReturnPath,
		DKIMSelector: d.DKIMSelector, DKIMPublicKey: d.DKIMPublicKey}) {
		status := d.RecordStatus[r.Key]
		if status == "" {
			status = store.DomainNotStarted
		}
		rj := recordJSON{Record: r.Record, Name: r.Name, Type: r.Type, TTL: "Auto", Status: status, Value: r.Value}
		if r.Type == "MX" {
			p := r.Priority
			rj.Priority = &p
		}
		j.Records = append(j.Records, rj)
	}
	return j
}

func (s *Server) getDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.store.GetDomain(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, s.renderDomain(d, true))
}

func (s *Server) listDomains(c *gin.Context) {
	respondList(s, c, s.store.ListDomains, func(d store.Domain) domainJSON { return s.renderDomain(d, false) })
}

type updateDomainRequest struct {
	OpenTracking  *bool   `json:"open_tracking"`
	ClickTracking *bool   `json:"click_tracking"`
	TLS           *string `json:"tls"`
}

func (s *Server) updateDomain(c *gin.Context) {
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
	if err := tlsMode(req.TLS); err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.store.UpdateDomain(c.Request.Context(), principal(c).TeamID, id, store.DomainUpdate{
		OpenTracking: req.OpenTracking, ClickTracking: req.ClickTracking, TLS: req.TLS,
	}); err != nil {
		s.respondError(c, err)
		return
	}
	if d, err := s.store.GetDomain(c.Request.Context(), principal(c).TeamID, id); err == nil {
		s.emitDomainEvent(c, "domain.updated", d)
	}
	c.JSON(http.StatusOK, gin.H{"object": "domain", "id": id})
}

func (s *Server) verifyDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.store.MarkDomainPending(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.domains.Verifier.Verify(c.Request.Context(), d.ID.String()); err != nil {
		s.respondError(c, errorf(http.StatusServiceUnavailable, nameServiceUnavailable,
			"The verification could not be started; retry later."))
		s.logger.Warn("starting domain verification", "domain", d.Name, "request_id", requestID(c), "err", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "domain", "id": id})
}

func (s *Server) deleteDomain(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.store.GetDomain(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.store.DeleteDomain(c.Request.Context(), principal(c).TeamID, id); err != nil {
		s.respondError(c, err)
		return
	}
	s.emitDomainEvent(c, "domain.deleted", d)
	// The verification also ends by itself at its next check.
	if err := s.domains.Verifier.Forget(c.Request.Context(), id.String()); err != nil {
		s.logger.Warn("stopping domain verification", "domain_id", id, "request_id", requestID(c), "err", err)
	}
	c.JSON(http.StatusOK, gin.H{"object": "domain", "id": id, "deleted": true})
}
