package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// Error names of the API contract.
const (
	nameMissingAPIKey      = "missing_api_key"
	nameRestrictedAPIKey   = "restricted_api_key"
	nameInvalidAPIKey      = "invalid_api_key"
	nameValidation         = "validation_error"
	nameMissingField       = "missing_required_field"
	nameInvalidParameter   = "invalid_parameter"
	nameInvalidAttachment  = "invalid_attachment"
	nameNotFound           = "not_found"
	nameMethodNotAllowed   = "method_not_allowed"
	nameRateLimitExceeded  = "rate_limit_exceeded"
	nameQuotaExceeded      = "monthly_quota_exceeded"
	nameApplicationError   = "application_error"
	nameServiceUnavailable = "service_unavailable"
	// nameConflict: the resource already exists (a contact's address, a
	// contact property's key); Posthaste's, Resend documents none.
	nameConflict = "conflict"

	nameInvalidIdempotencyKey     = "invalid_idempotency_key"
	nameInvalidIdempotentRequest  = "invalid_idempotent_request"
	nameConcurrentIdempotentRequs = "concurrent_idempotent_requests"
)

// apiError is an error with its place in the contract.
type apiError struct {
	Status  int
	Name    string
	Message string
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, name, message string) *apiError {
	return &apiError{Status: status, Name: name, Message: message}
}

// errorBody is the error body of the contract.
type errorBody struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Name       string `json:"name"`
}

// respondError is the one translator from errors to HTTP responses.
// Unexpected errors become a 500 whose message carries an error id that is
// logged with the error; their text never reaches the caller.
func (s *Server) respondError(c *gin.Context, err error) {
	ae := s.classify(c, err)
	c.AbortWithStatusPureJSON(ae.Status, errorBody{StatusCode: ae.Status, Message: ae.Message, Name: ae.Name})
}

func (s *Server) classify(c *gin.Context, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ie *invalid.Error
	if errors.As(err, &ie) {
		if ie.Missing {
			return errorf(http.StatusUnprocessableEntity, nameMissingField, ie.Message)
		}
		return errorf(http.StatusUnprocessableEntity, nameValidation, ie.Message)
	}
	var se *submit.Error
	if errors.As(err, &se) {
		switch se.Kind {
		case submit.KindMissingField:
			return errorf(http.StatusUnprocessableEntity, nameMissingField, se.Message)
		case submit.KindInvalidParameter:
			return errorf(http.StatusUnprocessableEntity, nameInvalidParameter, se.Message)
		case submit.KindInvalidAttachment:
			return errorf(http.StatusUnprocessableEntity, nameInvalidAttachment, se.Message)
		case submit.KindForbidden:
			return errorf(http.StatusForbidden, nameValidation, se.Message)
		case submit.KindInvalidIdempotencyKey:
			return errorf(http.StatusBadRequest, nameInvalidIdempotencyKey, se.Message)
		case submit.KindIdempotencyMismatch:
			return errorf(http.StatusConflict, nameInvalidIdempotentRequest, se.Message)
		case submit.KindIdempotencyInFlight:
			return errorf(http.StatusConflict, nameConcurrentIdempotentRequs, se.Message)
		default:
			return errorf(http.StatusUnprocessableEntity, nameValidation, se.Message)
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, nameValidation,
			"The request body is larger than the limit of 64 MB.")
	}
	if errors.Is(err, store.ErrQuotaExceeded) {
		return errorf(http.StatusTooManyRequests, nameQuotaExceeded,
			"You have reached your monthly email quota. Upgrade your plan to send more this month.")
	}
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nameNotFound, "The requested resource was not found.")
	}
	if errors.Is(err, store.ErrOwnersOnly) {
		return errOwnersOnly
	}
	var bse *store.BroadcastStateError
	if errors.As(err, &bse) {
		return errorf(http.StatusUnprocessableEntity, nameValidation, broadcastStateMessage(bse))
	}
	var le *store.LimitError
	if errors.As(err, &le) {
		return errorf(http.StatusForbidden, nameValidation,
			fmt.Sprintf("This team already has %d %s, the most allowed. Delete one before adding another.", le.Max, le.What))
	}
	id := newErrorID()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) ||
		errors.Is(err, submit.ErrUnavailable) {
		s.logger.Warn("dependency unavailable", "error_id", id, "request_id", requestID(c), "err", err)
		return errorf(http.StatusServiceUnavailable, nameServiceUnavailable,
			"A dependency is unavailable; retry later (error id "+id+").")
	}
	s.logger.Error("request failed", "error_id", id, "request_id", requestID(c),
		"method", c.Request.Method, "route", c.FullPath(), "err", err)
	return errorf(http.StatusInternalServerError, nameApplicationError,
		"An unexpected error occurred (error id "+id+").")
}

func newErrorID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
