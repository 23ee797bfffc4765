package api

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// readBody reads a request body of at most maxBody bytes; it may be
// chunked (no Content-Length).
// The request log records the body as read.
func readBody(c *gin.Context) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	c.Set(requestBodyKey, b)
	return b, err
}

func (s *Server) sendEmail(c *gin.Context) {
	body, err := readBody(c)
	if err != nil {
		s.refuseSend(c, err)
		return
	}
	req, err := submit.DecodeSendRequest(body)
	if err != nil {
		s.refuseSend(c, err)
		return
	}
	p := principal(c)
	acc, err := s.submit.Send(c.Request.Context(), submit.Sender{TeamID: p.TeamID, KeyID: p.KeyID, DomainID: p.DomainID}, req)
	if err != nil {
		s.refuseSend(c, err)
		return
	}
	c.Header(quotaHeader, strconv.FormatInt(acc.QuotaUsed, 10))
	if s.metrics != nil {
		s.metrics.EmailsAccepted.WithLabelValues("api").Inc()
	}
	c.PureJSON(http.StatusOK, gin.H{"id": acc.ID})
}

// quotaHeader carries the team's usage of its monthly quota on sending
// responses (API.md).
const quotaHeader = "X-Posthaste-Monthly-Quota"

// refuseSend answers a refused send, with the team's unchanged usage
// of its monthly quota.
func (s *Server) refuseSend(c *gin.Context, err error) {
	var qe *store.QuotaExceededError
	if errors.As(err, &qe) {
		c.Header(quotaHeader, strconv.FormatInt(qe.Used, 10))
	} else if used, qerr := s.store.QuotaUsed(c.Request.Context(), principal(c).TeamID, time.Now()); qerr == nil {
		c.Header(quotaHeader, strconv.FormatInt(used, 10))
	}
	s.respondError(c, err)
}

type tagJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type recipientJSON struct {
	Email  string `json:"email"`
	Status string `json:"status"`
}

type emailJSON struct {
	Object      string          `json:"object"`
	ID          string          `json:"id"`
	From        string          `json:"from"`
	To          []string        `json:"to"`
	Cc          []string        `json:"cc"`
	Bcc         []string        `json:"bcc"`
	ReplyTo     []string        `json:"reply_to"`
	Subject     string          `json:"subject"`
	CreatedAt   string          `json:"created_at"`
	ScheduledAt *string         `json:"scheduled_at"`
	LastEvent   string          `json:"last_event"`
	Tags        []tagJSON       `json:"tags"`
	MessageID   *string         `json:"message_id"`
	Recipients  []recipientJSON `json:"recipients,omitempty"`
}

// emailDetailJSON is one email: the list form plus html and text, which
// are always present (null when absent).
type emailDetailJSON struct {
	emailJSON
	HTML *string `json:"html"`
	Text *string `json:"text"`
}

func renderEmail(e store.Email) emailJSON {
	j := emailJSON{
		Object: "email", ID: e.ID.String(), From: e.From,
		To: nonNil(e.To), Cc: nonNil(e.Cc), Bcc: nonNil(e.Bcc), ReplyTo: nonNil(e.ReplyTo),
		Subject: e.Subject, CreatedAt: formatTime(e.CreatedAt), ScheduledAt: formatTimePtr(e.ScheduledAt),
		LastEvent: e.LastEvent, Tags: []tagJSON{},
	}
	for _, t := range e.Tags {
		j.Tags = append(j.Tags, tagJSON(t))
	}
	if e.MessageID != "" {
		mid := "<" + e.MessageID + ">"
		j.MessageID = &mid
	}
	for _, r := range e.Recipients {
		j.Recipients = append(j.Recipients, recipientJSON{Email: r.Address, Status: r.Status})
	}
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) getEmail(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	e, err := s.store.GetEmail(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, emailDetailJSON{emailJSON: renderEmail(e), HTML: e.HTML, Text: e.Text})
}

func (s *Server) listEmails(c *gin.Context) {
	p, err := page(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	emails, more, err := s.store.ListEmails(c.Request.Context(), principal(c).TeamID, p)
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]emailJSON, len(emails))
	for i, e := range emails {
		out[i] = renderEmail(e)
	}
	c.PureJSON(http.StatusOK, list(out, more))
}
