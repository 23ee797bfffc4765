package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/usage"
)

// emailsAPI serves /emails (sending, batches, reading, rescheduling and canceling
// emails, their metrics), /suppressions and /logs.
type emailsAPI struct {
	*Server
	submit *submit.Service
	emails *submit.Emails // reads and the suppression list
	usage  *usage.Service // the request log, metrics and quota used
}

// readBody reads a request body of at most maxBody bytes; it may be
// chunked (no Content-Length). A body the request log already read is
// not read again. The request log records the body as read.
func readBody(c *gin.Context) ([]byte, error) {
	if b, ok := c.Get(requestBodyKey); ok {
		return b.([]byte), nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	c.Set(requestBodyKey, b)
	return b, err
}

// idempotencyKey reads the Idempotency-Key header: nil when absent, and
// the (possibly empty, then refused by submit) value when present.
func idempotencyKey(c *gin.Context) *string {
	vals, ok := c.Request.Header[http.CanonicalHeaderKey("Idempotency-Key")]
	if !ok || len(vals) == 0 {
		return nil
	}
	return &vals[0]
}

func (s *emailsAPI) sendEmail(c *gin.Context) {
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
	res, err := s.submit.SendWithOptions(c.Request.Context(), s.sender(c), req,
		submit.SendOptions{IdempotencyKey: idempotencyKey(c)})
	if err != nil {
		s.refuseSend(c, err)
		return
	}
	if s.metrics != nil && !res.Replayed {
		s.metrics.EmailsAccepted.WithLabelValues("api").Inc()
	}
	s.quotaHeader(c, res.QuotaUsed)
	c.PureJSON(http.StatusOK, gin.H{"id": res.ID})
}

type batchErrorJSON struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

type idJSON struct {
	ID uuid.UUID `json:"id"`
}

type batchJSON struct {
	Data   []idJSON          `json:"data"`
	Errors *[]batchErrorJSON `json:"errors,omitempty"`
}

func (s *emailsAPI) sendBatch(c *gin.Context) {
	body, err := readBody(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	items, err := submit.DecodeBatch(body)
	if err != nil {
		s.refuseSend(c, err)
		return
	}
	mode := submit.BatchMode(strings.ToLower(strings.TrimSpace(c.GetHeader("X-Batch-Validation"))))
	res, err := s.submit.SendBatch(c.Request.Context(), s.sender(c), items,
		submit.BatchOptions{IdempotencyKey: idempotencyKey(c), Mode: mode})
	if err != nil {
		s.refuseSend(c, err)
		return
	}
	out := batchJSON{Data: make([]idJSON, len(res.Data))}
	for i, r := range res.Data {
		out.Data[i] = idJSON{r.ID}
	}
	if mode == submit.BatchPermissive || len(res.Errors) > 0 {
		errs := make([]batchErrorJSON, len(res.Errors))
		for i, e := range res.Errors {
			errs[i] = batchErrorJSON(e)
		}
		out.Errors = &errs
	}
	if s.metrics != nil && !res.Replayed {
		s.metrics.EmailsAccepted.WithLabelValues("api").Add(float64(len(res.Data)))
	}
	s.quotaHeader(c, res.QuotaUsed)
	c.PureJSON(http.StatusOK, out)
}

// updateEmail reschedules: PATCH /emails/{id} with {"scheduled_at"}. An
// `id` in the body (the Resend SDKs send one) is ignored; the path names
// the email.
func (s *emailsAPI) updateEmail(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	body, err := readBody(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req struct {
		ScheduledAt  *string `json:"scheduled_at"`
		ScheduledAt2 *string `json:"scheduledAt"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The request body must be a JSON object with a string `scheduled_at` field."))
		return
	}
	if req.ScheduledAt == nil {
		req.ScheduledAt = req.ScheduledAt2
	}
	if err := s.submit.Reschedule(c.Request.Context(), s.sender(c), id, req.ScheduledAt); err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "email", "id": id})
}

func (s *emailsAPI) cancelEmail(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if err := s.submit.Cancel(c.Request.Context(), s.sender(c), id); err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"object": "email", "id": id})
}

// quotaHeaderName carries the team's usage of its monthly quota on sending
// responses (API.md).
const quotaHeaderName = "X-Posthaste-Monthly-Quota"

// quotaHeader sets the quota header; a replayed answer (used 0) reads the
// current usage.
func (s *emailsAPI) quotaHeader(c *gin.Context, used int64) {
	if used == 0 {
		var err error
		if used, err = s.usage.QuotaUsed(c.Request.Context(), principal(c).TeamID, time.Now()); err != nil {
			return
		}
	}
	c.Header(quotaHeaderName, strconv.FormatInt(used, 10))
}

// refuseSend answers a refused send, with the team's unchanged usage
// of its monthly quota.
func (s *emailsAPI) refuseSend(c *gin.Context, err error) {
	var qe *store.QuotaExceededError
	if errors.As(err, &qe) {
		c.Header(quotaHeaderName, strconv.FormatInt(qe.Used, 10))
	} else if used, qerr := s.usage.QuotaUsed(c.Request.Context(), principal(c).TeamID, time.Now()); qerr == nil {
		c.Header(quotaHeaderName, strconv.FormatInt(used, 10))
	}
	s.respondError(c, err)
}

type tagJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// recipientJSON is one recipient's state (our extension); a bounced
// recipient carries Resend's bounce object, as the email.bounced webhook
// does.
type recipientJSON struct {
	Email  string      `json:"email"`
	Status string      `json:"status"`
	Bounce *bounceJSON `json:"bounce,omitempty"`
}

type bounceJSON struct {
	Type           string   `json:"type"`
	SubType        string   `json:"subType"`
	Message        string   `json:"message"`
	DiagnosticCode []string `json:"diagnosticCode"`
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
// are always present (null when absent), topic_id (as Resend's SDK types
// it: the topic the email was sent with, null when none), broadcast_id
// (our extension): the broadcast the email belongs to, null for others; and
// insights, the deliverability findings computed at acceptance (an empty
// array when there are none).
type emailDetailJSON struct {
	emailJSON
	HTML        *string         `json:"html"`
	Text        *string         `json:"text"`
	TopicID     *string         `json:"topic_id"`
	BroadcastID *string         `json:"broadcast_id"`
	Insights    []store.Insight `json:"insights"`
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

func (s *emailsAPI) getEmail(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	e, bounces, err := s.emails.GetWithBounces(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	j := renderEmail(e)
	addBounces(j.Recipients, bounces)
	insights := e.Insights
	if insights == nil {
		insights = []store.Insight{}
	}
	c.PureJSON(http.StatusOK, emailDetailJSON{emailJSON: j, HTML: e.HTML, Text: e.Text, TopicID: uuidPtr(e.TopicID),
		BroadcastID: uuidPtr(e.BroadcastID),
		Insights:    insights})
}

// addBounces gives the bounced recipients (rendered as rcpts) their
// bounce objects.
func addBounces(rcpts []recipientJSON, bounces map[string]store.Bounce) {
	for i, r := range rcpts {
		if b, ok := bounces[r.Email]; ok && r.Status == store.EventBounced {
			bj := bounceJSON(b)
			rcpts[i].Bounce = &bj
		}
	}
}

func (s *emailsAPI) listEmails(c *gin.Context) {
	respondList(s.Server, c, paged, s.emails.List, renderEmail)
}
