package api

import (
	"mime"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/store"
)

// Received emails (issue 16 point 4), as Resend serves them:
// GET /emails/receiving, GET /emails/receiving/{id} and the attachments
// of one, GET /emails/receiving/{id}/attachments[/{attachment_id}]. The
// contents (each attachment, and the raw message) are fetched from the
// download_url these return: a URL signed for one team's one object
// (HMAC-SHA256 under a key derived from the master key) that expires
// after downloadTTL, so it works without the API key, like Resend's, yet
// cannot be guessed or reused for long. The signature travels in the
// query string, which the request log does not record.

// receivingAPI serves /emails/receiving: received emails, their
// attachments and their downloads.
type receivingAPI struct {
	*Server
	received *receiving.Service
}

type receivedAttachmentJSON struct {
	ID                 string  `json:"id"`
	Filename           *string `json:"filename"`
	Size               int     `json:"size"`
	ContentType        string  `json:"content_type"`
	ContentID          *string `json:"content_id"`
	ContentDisposition *string `json:"content_disposition"`
}

type receivedListJSON struct {
	ID          string                   `json:"id"`
	To          []string                 `json:"to"`
	From        string                   `json:"from"`
	CreatedAt   string                   `json:"created_at"`
	Subject     string                   `json:"subject"`
	Bcc         []string                 `json:"bcc"`
	Cc          []string                 `json:"cc"`
	ReplyTo     []string                 `json:"reply_to"`
	ReceivedFor []string                 `json:"received_for"`
	MessageID   string                   `json:"message_id"`
	Attachments []receivedAttachmentJSON `json:"attachments"`
}

type downloadJSON struct {
	DownloadURL string `json:"download_url"`
	ExpiresAt   string `json:"expires_at"`
}

type receivedJSON struct {
	Object string `json:"object"`
	receivedListJSON
	HTML    *string           `json:"html"`
	Text    *string           `json:"text"`
	Headers map[string]string `json:"headers"`
	Raw     *downloadJSON     `json:"raw"`
}

type attachmentDataJSON struct {
	Object             string  `json:"object,omitempty"`
	ID                 string  `json:"id"`
	Filename           *string `json:"filename,omitempty"`
	Size               int     `json:"size"`
	ContentType        string  `json:"content_type"`
	ContentDisposition string  `json:"content_disposition"`
	ContentID          *string `json:"content_id,omitempty"`
	DownloadURL        string  `json:"download_url"`
	ExpiresAt          string  `json:"expires_at"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func renderReceivedList(e store.ReceivedEmail) receivedListJSON {
	j := receivedListJSON{ID: e.ID.String(), To: e.To, From: e.From, CreatedAt: formatTime(e.CreatedAt),
		Subject: e.Subject, Bcc: e.Bcc, Cc: e.Cc, ReplyTo: e.ReplyTo, ReceivedFor: e.ReceivedFor,
		MessageID: e.MessageID, Attachments: []receivedAttachmentJSON{}}
	for _, a := range e.Attachments {
		j.Attachments = append(j.Attachments, receivedAttachmentJSON{ID: a.ID.String(), Filename: optional(a.Filename),
			Size: a.Size, ContentType: a.ContentType, ContentID: optional(a.ContentID),
			ContentDisposition: optional(a.ContentDisposition)})
	}
	return j
}

func (s *receivingAPI) listReceivedEmails(c *gin.Context) {
	respondList(s.Server, c, listAll, s.received.List, renderReceivedList)
}

// receivedPath loads the team's received email of the :id parameter; it
// has answered the request when ok is false.
func (s *receivingAPI) receivedPath(c *gin.Context) (store.ReceivedEmail, bool) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return store.ReceivedEmail{}, false
	}
	e, err := s.received.Get(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, notFound(err, "Email not found."))
		return store.ReceivedEmail{}, false
	}
	return e, true
}

func (s *receivingAPI) getReceivedEmail(c *gin.Context) {
	format := c.DefaultQuery("html_format", "data_uri")
	if format != "data_uri" && format != "cid" {
		s.respondError(c, validation("The `html_format` parameter must be `data_uri` or `cid`."))
		return
	}
	e, ok := s.receivedPath(c)
	if !ok {
		return
	}
	j := receivedJSON{Object: "email", receivedListJSON: renderReceivedList(e), HTML: e.HTML, Text: e.Text,
		Headers: e.Headers}
	if format == "data_uri" && e.HTML != nil {
		html, err := s.received.InlineImages(c.Request.Context(), e, receiving.InlineOptions{})
		if err != nil {
			s.respondError(c, err)
			return
		}
		j.HTML = &html
	}
	if u, exp, ok := s.downloadURL(c, "raw", e.TeamID, e.ID, uuid.Nil); ok {
		j.Raw = &downloadJSON{DownloadURL: u, ExpiresAt: formatTime(exp)}
	}
	c.PureJSON(http.StatusOK, j)
}

func (s *receivingAPI) renderAttachmentData(c *gin.Context, e store.ReceivedEmail, a store.ReceivedAttachment) (attachmentDataJSON, bool) {
	u, exp, ok := s.downloadURL(c, "attachment", e.TeamID, e.ID, a.ID)
	if !ok {
		return attachmentDataJSON{}, false
	}
	disp := a.ContentDisposition
	if disp != "inline" {
		disp = "attachment"
	}
	return attachmentDataJSON{ID: a.ID.String(), Filename: optional(a.Filename), Size: a.Size,
		ContentType: a.ContentType, ContentDisposition: disp, ContentID: optional(a.ContentID),
		DownloadURL: u, ExpiresAt: formatTime(exp)}, true
}

func (s *receivingAPI) listReceivedAttachments(c *gin.Context) {
	e, ok := s.receivedPath(c)
	if !ok {
		return
	}
	out := make([]attachmentDataJSON, 0, len(e.Attachments))
	for _, a := range e.Attachments {
		j, ok := s.renderAttachmentData(c, e, a)
		if !ok {
			s.noDownloads(c)
			return
		}
		out = append(out, j)
	}
	c.PureJSON(http.StatusOK, list(out, false))
}

func (s *receivingAPI) getReceivedAttachment(c *gin.Context) {
	aid, err := uuid.Parse(c.Param("attachment_id"))
	if err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameInvalidParameter, "The id must be a valid UUID."))
		return
	}
	e, ok := s.receivedPath(c)
	if !ok {
		return
	}
	for _, a := range e.Attachments {
		if a.ID != aid {
			continue
		}
		j, ok := s.renderAttachmentData(c, e, a)
		if !ok {
			s.noDownloads(c)
			return
		}
		j.Object = "attachment"
		c.PureJSON(http.StatusOK, j)
		return
	}
	s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "Attachment not found."))
}

// downloadURL is the signed URL of a received email's raw message (kind
// "raw") or attachment, on the public URL when configured, else on the
// host the request came to; ok is false without a master key.
func (s *receivingAPI) downloadURL(c *gin.Context, kind string, team, email, att uuid.UUID) (string, time.Time, bool) {
	exp := time.Now().Add(downloadTTL).Truncate(time.Second)
	path := "/emails/receiving/" + email.String() + "/raw"
	if kind == "attachment" {
		path = "/emails/receiving/" + email.String() + "/attachments/" + att.String() + "/download"
	}
	u, ok := s.signedDownloadURL(s.baseURL(c)+path, kind, team, email, att, exp)
	return u, exp, ok
}

// serveDownload sends content so that no browser renders it on our origin
// (it comes from strangers): as an attachment, sniffing off, sandboxed.
func serveDownload(c *gin.Context, contentType, filename string, content []byte) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, no-store")
	disp := "attachment"
	if filename != "" {
		if v := mime.FormatMediaType("attachment", map[string]string{"filename": filename}); v != "" {
			disp = v
		}
	}
	h.Set("Content-Disposition", disp)
	if _, _, err := mime.ParseMediaType(contentType); err != nil || contentType == "" {
		contentType = "application/octet-stream"
	}
	c.Data(http.StatusOK, contentType, content)
}

func (s *receivingAPI) downloadReceivedAttachment(c *gin.Context) {
	email, err1 := uuid.Parse(c.Param("id"))
	aid, err2 := uuid.Parse(c.Param("attachment_id"))
	if err1 != nil || err2 != nil {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "The requested resource was not found."))
		return
	}
	team, ok := s.checkDownload(c, "attachment", email, aid)
	if !ok {
		return
	}
	a, err := s.received.Attachment(c.Request.Context(), team, email, aid)
	if err != nil {
		s.respondError(c, notFound(err, "Attachment not found."))
		return
	}
	serveDownload(c, a.ContentType, a.Filename, a.Content)
}

func (s *receivingAPI) downloadReceivedRaw(c *gin.Context) {
	email, err := uuid.Parse(c.Param("id"))
	if err != nil {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound, "The requested resource was not found."))
		return
	}
	team, ok := s.checkDownload(c, "raw", email, uuid.Nil)
	if !ok {
		return
	}
	raw, err := s.received.Raw(c.Request.Context(), team, email)
	if err != nil {
		s.respondError(c, notFound(err, "Email not found."))
		return
	}
	serveDownload(c, "message/rfc822", email.String()+".eml", raw)
}
