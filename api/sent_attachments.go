package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// The attachments of sent emails, as Resend serves them:
// GET /emails/{id}/attachments[/{attachment_id}], for emails sent over the
// API and over SMTP alike (submit.Emails.Attachments). Like received
// emails' attachments (receiving.go), each comes with a download_url
// signed for the team's one attachment that works without the API key
// until expires_at, served by GET /emails/{id}/attachments/{attachment_id}/download.

// sentAttachmentKind is the kind signed into the download URLs of sent
// emails' attachments, so that no other signed URL opens one.
const sentAttachmentKind = "sent_attachment"

func (s *emailsAPI) renderSentAttachment(c *gin.Context, team, email uuid.UUID, a submit.SentAttachment) (attachmentDataJSON, bool) {
	exp := time.Now().Add(downloadTTL).Truncate(time.Second)
	u, ok := s.signedDownloadURL(s.baseURL(c)+"/emails/"+email.String()+"/attachments/"+a.ID.String()+"/download",
		sentAttachmentKind, team, email, a.ID, exp)
	if !ok {
		return attachmentDataJSON{}, false
	}
	return attachmentDataJSON{ID: a.ID.String(), Filename: optional(a.Filename), Size: len(a.Content),
		ContentType: a.ContentType, ContentDisposition: a.ContentDisposition, ContentID: optional(a.ContentID),
		DownloadURL: u, ExpiresAt: formatTime(exp)}, true
}

// noDownloads answers a request for download URLs on a server that cannot
// sign them.
func (s *Server) noDownloads(c *gin.Context) {
	s.respondError(c, errorf(http.StatusInternalServerError, nameApplicationError,
		"Downloads are unavailable: the server has no master key (POSTHASTE_MASTER_KEY)."))
}

// listSentAttachments answers every attachment, as Resend does: an email
// has few, and they are read together.
func (s *emailsAPI) listSentAttachments(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	p, err := page(c, listAll)
	if err != nil {
		s.respondError(c, err)
		return
	}
	team := principal(c).TeamID
	atts, err := s.emails.Attachments(c.Request.Context(), team, id)
	if err != nil {
		s.respondError(c, notFound(err, "Email not found."))
		return
	}
	out := make([]attachmentDataJSON, 0, len(atts))
	for _, a := range atts {
		j, ok := s.renderSentAttachment(c, team, id, a)
		if !ok {
			s.noDownloads(c)
			return
		}
		out = append(out, j)
	}
	out, more := pageSlice(out, func(j attachmentDataJSON) string { return j.ID }, p)
	c.PureJSON(http.StatusOK, list(out, more))
}

// pageSlice is the page p of items, which are all there are, in order:
// those after p.After (or before p.Before), at most p.Limit, and whether
// more follow (or precede). A cursor that names no item gives an empty
// page.
func pageSlice[T any](items []T, id func(T) string, p store.Page) ([]T, bool) {
	find := func(cursor uuid.UUID) int {
		for i, it := range items {
			if id(it) == cursor.String() {
				return i
			}
		}
		return -1
	}
	switch {
	case p.After != nil:
		i := find(*p.After)
		if i < 0 {
			return nil, false
		}
		items = items[i+1:]
	case p.Before != nil:
		i := find(*p.Before)
		if i < 0 {
			return nil, false
		}
		items = items[:i]
		if len(items) > p.Limit {
			return items[len(items)-p.Limit:], true
		}
		return items, false
	}
	if len(items) > p.Limit {
		return items[:p.Limit], true
	}
	return items, false
}

func (s *emailsAPI) getSentAttachment(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	aid, err := uuid.Parse(c.Param("attachment_id"))
	if err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameInvalidParameter, "The id must be a valid UUID."))
		return
	}
	team := principal(c).TeamID
	a, err := s.emails.Attachment(c.Request.Context(), team, id, aid)
	if err != nil {
		s.respondError(c, notFound(err, "Attachment not found."))
		return
	}
	j, ok := s.renderSentAttachment(c, team, id, a)
	if !ok {
		s.noDownloads(c)
		return
	}
	j.Object = "attachment"
	c.PureJSON(http.StatusOK, j)
}

// downloadSentAttachment serves an attachment of a sent email to the
// holder of its signed URL.
func (s *emailsAPI) downloadSentAttachment(c *gin.Context) {
	email, err1 := uuid.Parse(c.Param("id"))
	aid, err2 := uuid.Parse(c.Param("attachment_id"))
	if err1 != nil || err2 != nil {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "The requested resource was not found."))
		return
	}
	team, ok := s.checkDownload(c, sentAttachmentKind, email, aid)
	if !ok {
		return
	}
	a, err := s.emails.Attachment(c.Request.Context(), team, email, aid)
	if err != nil {
		s.respondError(c, notFound(err, "Attachment not found."))
		return
	}
	serveDownload(c, a.ContentType, a.Filename, a.Content)
}
