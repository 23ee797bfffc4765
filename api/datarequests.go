package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/store"
)

// Data subject requests (docs/privacy.md: "Data subject requests"): POST, GET and
// list with a full-access key; the archive of a completed export is
// downloaded through a signed URL like received emails' attachments.

// privacyAPI serves /data-requests (datarequests.go) and /audit-log
// (auditlog.go).
type privacyAPI struct {
	*Server
	dataRequests *datareq.Service
	auditLog     *auditlog.Log // lists the team's entries (/audit-log)
}

// dataRequestDownload is the download kind the URL signature covers.
const dataRequestDownload = "data_request"

type dataRequestJSON struct {
	Object      string         `json:"object"`
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Status      string         `json:"status"`
	CreatedAt   string         `json:"created_at"`
	CompletedAt *string        `json:"completed_at"`
	DownloadURL *string        `json:"download_url"`
	ExpiresAt   *string        `json:"expires_at"`
	Found       map[string]int `json:"found"`
	Error       *string        `json:"error,omitempty"`
}

func (s *privacyAPI) renderDataRequest(c *gin.Context, r store.DataRequest) dataRequestJSON {
	j := dataRequestJSON{Object: "data_request", ID: r.ID.String(), Type: r.Type, Status: r.Status,
		CreatedAt: formatTime(r.CreatedAt), CompletedAt: formatTimePtr(r.CompletedAt),
		ExpiresAt: formatTimePtr(r.ExpiresAt), Found: r.Found, Error: r.Error}
	if j.Found == nil {
		j.Found = map[string]int{}
	}
	if datareq.ArchiveReady(r, time.Now()) {
		if u, ok := s.dataRequestDownloadURL(s.baseURL(c), r); ok {
			j.DownloadURL = &u
		}
	}
	return j
}

// dataRequestDownloadURL is the signed URL of a ready export's archive on
// base, valid for an hour (or until the archive expires, if sooner); ok is
// false without a master key. (The dashboard serves archives to owners
// through their session instead.)
func (s *privacyAPI) dataRequestDownloadURL(base string, r store.DataRequest) (string, bool) {
	exp := time.Now().Add(downloadTTL).Truncate(time.Second)
	if r.ExpiresAt != nil && r.ExpiresAt.Before(exp) {
		exp = r.ExpiresAt.Truncate(time.Second)
	}
	return s.signedDownloadURL(base+"/data-requests/"+r.ID.String()+"/download", dataRequestDownload, r.TeamID, r.ID, uuid.Nil, exp)
}

type createDataRequestRequest struct {
	Email *string `json:"email"`
	Type  *string `json:"type"`
}

func (s *privacyAPI) createDataRequest(c *gin.Context) {
	var req createDataRequestRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	if err := requireEmail(req.Email); err != nil {
		s.respondError(c, err)
		return
	}
	if req.Type == nil || *req.Type == "" {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `type` field."))
		return
	}
	r, err := s.dataRequests.Create(c.Request.Context(), principal(c).TeamID, *req.Type, *req.Email, s.actor(c))
	switch {
	case errors.Is(err, datareq.ErrInvalidType):
		s.respondError(c, validation("The `type` field must be `export` or `erasure`."))
		return
	case errors.Is(err, datareq.ErrInvalidAddress):
		s.respondError(c, validation("The `email` field must be an email address such as someone@example.com."))
		return
	case errors.Is(err, datareq.ErrNoKeys):
		s.respondError(c, errorf(http.StatusInternalServerError, nameApplicationError,
			"Data requests are unavailable: the server has no master key (POSTHASTE_MASTER_KEY)."))
		return
	case err != nil:
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusCreated, gin.H{"object": "data_request", "id": r.ID.String()})
}

func (s *privacyAPI) getDataRequest(c *gin.Context) {
	respondOne(s.Server, c, s.dataRequests.Get, "Data request not found.",
		func(r store.DataRequest) dataRequestJSON { return s.renderDataRequest(c, r) })
}

func (s *privacyAPI) listDataRequests(c *gin.Context) {
	respondList(s.Server, c, paged, s.dataRequests.List, func(r store.DataRequest) dataRequestJSON { return s.renderDataRequest(c, r) })
}

// downloadDataRequest streams an export's archive to the holder of its
// signed URL.
func (s *privacyAPI) downloadDataRequest(c *gin.Context) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "The requested resource was not found."))
		return
	}
	team, ok := s.checkDownload(c, dataRequestDownload, id, uuid.Nil)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	ok, err = s.dataRequests.HasArchive(ctx, team, id)
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	if err != nil {
		s.respondError(c, notFound(err, "The archive does not exist or has expired."))
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", `attachment; filename="data-request-`+id.String()+`.zip"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	c.Status(http.StatusOK)
	if err := s.dataRequests.WriteArchive(ctx, team, id, c.Writer); err != nil {
		// The status is sent; the client sees a cut download.
		s.logger.Error("streaming a data request archive", "team_id", team, "err", err)
	}
}
