package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// broadcastsAPI serves /broadcasts.
type broadcastsAPI struct {
	*Server
	broadcastSvc *broadcast.Service
}

// broadcastRequest is the body of POST /broadcasts and PATCH
// /broadcasts/:id. Absent (or null) fields are left as they are by an
// update, which is what Resend's Node SDK sends for the fields it was not
// given; an empty segment_id or topic_id clears it. Components (a
// component document, internal/components) and template_id (one of the
// team's published templates, by id or alias) are Posthaste's
// extensions; send and scheduled_at apply to a create only.
type broadcastRequest struct {
	Name        *string         `json:"name"`
	SegmentID   *string         `json:"segment_id"`
	AudienceID  *string         `json:"audience_id"`
	TopicID     *string         `json:"topic_id"`
	From        *string         `json:"from"`
	Subject     *string         `json:"subject"`
	ReplyTo     json.RawMessage `json:"reply_to"`
	PreviewText *string         `json:"preview_text"`
	HTML        *string         `json:"html"`
	Text        *string         `json:"text"`
	Components  json.RawMessage `json:"components"`
	TemplateID  *string         `json:"template_id"`
	Send        bool            `json:"send"`
	ScheduledAt *string         `json:"scheduled_at"`
}

// broadcastEdit turns the request into a broadcast.Edit; the service
// copies in the template it names.
func broadcastEdit(r broadcastRequest) (broadcast.Edit, error) {
	e := broadcast.Edit{Name: r.Name, From: r.From, Subject: r.Subject, PreviewText: r.PreviewText, HTML: r.HTML,
		Text: r.Text, TopicID: r.TopicID, SegmentID: r.SegmentID, Components: r.Components, TemplateID: r.TemplateID}
	if e.SegmentID == nil {
		e.SegmentID = r.AudienceID // Resend's deprecated name
	}
	if raw := bytes.TrimSpace(r.ReplyTo); len(raw) > 0 && string(raw) != "null" {
		var list submit.AddressList
		if err := json.Unmarshal(raw, &list); err != nil {
			return e, validation("The `reply_to` field must be an email address or a list of them.")
		}
		e.ReplyTo = append([]string{}, list...)
	}
	return e, nil
}

// broadcastError names a segment or topic of the body that the team does
// not have, and a missing broadcast; other errors pass unchanged.
func broadcastError(err error) error {
	var re *store.RefError
	if errors.As(err, &re) {
		return refError(err)
	}
	return notFound(err, "Broadcast not found.")
}

// respondBroadcastRef answers a change of a broadcast with Resend's
// reference to it ({"id", "object"}) and status, or with err.
func (s *broadcastsAPI) respondBroadcastRef(c *gin.Context, status int, b store.Broadcast, err error) {
	if err != nil {
		s.respondError(c, broadcastError(err))
		return
	}
	c.PureJSON(status, gin.H{"id": b.ID.String(), "object": "broadcast"})
}

// broadcastStateMessage explains a *store.BroadcastStateError.
func broadcastStateMessage(e *store.BroadcastStateError) string {
	msg := "The broadcast is " + e.Status + " and cannot be " + e.Action + ": "
	if e.Action == "canceled" {
		return msg + "only a scheduled broadcast or one being sent can be canceled."
	}
	return msg + "only a draft can be " + e.Action + "."
}

func (s *broadcastsAPI) createBroadcast(c *gin.Context) {
	var req broadcastRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	e, err := broadcastEdit(req)
	if err != nil {
		s.respondError(c, err)
		return
	}
	scheduledAt := ""
	if req.ScheduledAt != nil {
		scheduledAt = *req.ScheduledAt
	}
	b, err := s.broadcastSvc.Create(c.Request.Context(), s.sender(c), e, req.Send, scheduledAt)
	s.respondBroadcastRef(c, http.StatusCreated, b, err)
}

type broadcastListItemJSON struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	AudienceID  *string `json:"audience_id"`
	SegmentID   *string `json:"segment_id"`
	Status      string  `json:"status"`
	CreatedAt   string  `json:"created_at"`
	ScheduledAt *string `json:"scheduled_at"`
	SentAt      *string `json:"sent_at"`
	TopicID     *string `json:"topic_id"`
}

func uuidPtr(id *uuid.UUID) *string {
	if id == nil {
		return nil
	}
	s := id.String()
	return &s
}

func renderBroadcastListItem(b store.Broadcast) broadcastListItemJSON {
	return broadcastListItemJSON{ID: b.ID.String(), Name: b.Name, AudienceID: uuidPtr(b.SegmentID),
		SegmentID: uuidPtr(b.SegmentID), Status: b.Status, CreatedAt: formatTime(b.CreatedAt),
		ScheduledAt: formatTimePtr(b.ScheduledAt), SentAt: formatTimePtr(b.SentAt), TopicID: uuidPtr(b.TopicID)}
}

// broadcastCountsJSON is store.BroadcastCounts (our extension).
type broadcastCountsJSON struct {
	Recipients      int64 `json:"recipients"`
	Queued          int64 `json:"queued"`
	Sent            int64 `json:"sent"`
	Delivered       int64 `json:"delivered"`
	DeliveryDelayed int64 `json:"delivery_delayed"`
	Bounced         int64 `json:"bounced"`
	Complained      int64 `json:"complained"`
	Suppressed      int64 `json:"suppressed"`
	Failed          int64 `json:"failed"`
	Canceled        int64 `json:"canceled"`
	Opened          int64 `json:"opened"`
	Clicked         int64 `json:"clicked"`
	Unsubscribed    int64 `json:"unsubscribed"`
}

// broadcastJSON is Resend's broadcast object plus status_reason,
// components and counts. Empty from, subject and preview_text are null,
// as Resend's SDK types allow for a draft.
type broadcastJSON struct {
	Object       string              `json:"object"`
	ID           string              `json:"id"`
	Name         string              `json:"name"`
	AudienceID   *string             `json:"audience_id"`
	SegmentID    *string             `json:"segment_id"`
	TopicID      *string             `json:"topic_id"`
	From         *string             `json:"from"`
	Subject      *string             `json:"subject"`
	ReplyTo      []string            `json:"reply_to"`
	PreviewText  *string             `json:"preview_text"`
	Status       string              `json:"status"`
	StatusReason *string             `json:"status_reason"`
	CreatedAt    string              `json:"created_at"`
	ScheduledAt  *string             `json:"scheduled_at"`
	SentAt       *string             `json:"sent_at"`
	HTML         *string             `json:"html"`
	Text         *string             `json:"text"`
	Components   json.RawMessage     `json:"components"`
	Counts       broadcastCountsJSON `json:"counts"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func renderBroadcast(b store.Broadcast, n store.BroadcastCounts) broadcastJSON {
	doc := b.Components
	if len(doc) == 0 {
		doc = json.RawMessage("null")
	}
	var replyTo []string
	if len(b.ReplyTo) > 0 {
		replyTo = b.ReplyTo
	}
	return broadcastJSON{Object: "broadcast", ID: b.ID.String(), Name: b.Name, AudienceID: uuidPtr(b.SegmentID),
		SegmentID: uuidPtr(b.SegmentID), TopicID: uuidPtr(b.TopicID), From: orNull(b.From),
		Subject: orNull(b.Subject), ReplyTo: replyTo, PreviewText: orNull(b.PreviewText), Status: b.Status,
		StatusReason: b.StatusReason, CreatedAt: formatTime(b.CreatedAt), ScheduledAt: formatTimePtr(b.ScheduledAt),
		SentAt: formatTimePtr(b.SentAt), HTML: b.HTML, Text: b.Text, Components: doc,
		Counts: broadcastCountsJSON{Recipients: n.Total, Queued: n.Queued, Sent: n.Sent, Delivered: n.Delivered,
			DeliveryDelayed: n.DeliveryDelayed, Bounced: n.Bounced, Complained: n.Complained,
			Suppressed: n.Suppressed, Failed: n.Failed, Canceled: n.Canceled, Opened: n.Opened, Clicked: n.Clicked,
			Unsubscribed: n.Unsubscribed}}
}

func (s *broadcastsAPI) listBroadcasts(c *gin.Context) {
	respondList(s.Server, c, listAll, s.broadcastSvc.List, renderBroadcastListItem)
}

func (s *broadcastsAPI) getBroadcast(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ctx, team := c.Request.Context(), principal(c).TeamID
	b, err := s.broadcastSvc.Get(ctx, team, id)
	if err != nil {
		s.respondError(c, broadcastError(err))
		return
	}
	n, err := s.broadcastSvc.Counts(ctx, team, id)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, renderBroadcast(b, n))
}

// updateBroadcast edits a draft; send and scheduled_at are ignored (POST
// /broadcasts/:id/send sends).
func (s *broadcastsAPI) updateBroadcast(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req broadcastRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	e, err := broadcastEdit(req)
	if err != nil {
		s.respondError(c, err)
		return
	}
	b, err := s.broadcastSvc.Update(c.Request.Context(), principal(c).TeamID, id, e)
	s.respondBroadcastRef(c, http.StatusOK, b, err)
}

func (s *broadcastsAPI) deleteBroadcast(c *gin.Context) {
	respondOne(s.Server, c, s.broadcastSvc.Delete, "Broadcast not found.", func(b store.Broadcast) gin.H {
		return gin.H{"id": b.ID.String(), "object": "broadcast", "deleted": true}
	})
}

// duplicateBroadcast copies a broadcast, whatever its status, into a new
// draft named "Copy of …" (broadcast.CopyName).
func (s *broadcastsAPI) duplicateBroadcast(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	d, err := s.broadcastSvc.Duplicate(c.Request.Context(), principal(c).TeamID, id, broadcast.CopyName)
	s.respondBroadcastRef(c, http.StatusCreated, d, err)
}

type sendBroadcastRequest struct {
	ScheduledAt *string `json:"scheduled_at"`
}

// sendBroadcast sends a draft now or at scheduled_at. A sender the team
// may not use is refused as POST /emails refuses it.
func (s *broadcastsAPI) sendBroadcast(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req sendBroadcastRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	at := ""
	if req.ScheduledAt != nil {
		at = *req.ScheduledAt
	}
	b, err := s.broadcastSvc.Send(c.Request.Context(), s.sender(c), id, at)
	if err != nil {
		s.respondError(c, broadcastError(err))
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"id": b.ID.String()})
}

func (s *broadcastsAPI) cancelBroadcast(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	b, err := s.broadcastSvc.Cancel(c.Request.Context(), principal(c).TeamID, id)
	s.respondBroadcastRef(c, http.StatusOK, b, err)
}

// broadcastRecipientJSON is Resend's broadcast recipient row (id,
// contact_id, email; count for opened and clicked, clicked_links for
// clicked, bounce_type for bounced) plus object, status and created_at.
type broadcastRecipientJSON struct {
	ID           string             `json:"id"`
	Object       string             `json:"object"`
	ContactID    *string            `json:"contact_id"`
	Email        string             `json:"email"`
	Status       string             `json:"status"`
	CreatedAt    string             `json:"created_at"`
	Count        *int64             `json:"count,omitempty"`
	ClickedLinks []store.LinkClicks `json:"clicked_links,omitempty"`
	BounceType   string             `json:"bounce_type,omitempty"`
}

// renderBroadcastRecipient renders a row of a list of kind.
func renderBroadcastRecipient(kind string) func(store.BroadcastRecipient) broadcastRecipientJSON {
	return func(r store.BroadcastRecipient) broadcastRecipientJSON {
		out := broadcastRecipientJSON{ID: r.EmailID.String(), Object: "broadcast_recipient",
			ContactID: uuidPtr(r.ContactID), Email: r.Email, Status: r.Status, CreatedAt: formatTime(r.CreatedAt),
			BounceType: r.BounceType}
		if kind == "opened" || kind == "clicked" {
			out.Count = &r.Count
		}
		if kind == "clicked" {
			out.ClickedLinks = r.ClickedLinks
			if out.ClickedLinks == nil {
				out.ClickedLinks = []store.LinkClicks{}
			}
		}
		return out
	}
}

// listBroadcastRecipients lists a broadcast's recipients, each by the id
// of its email (the cursor of after and before): all of them, or those of
// one `type` (store.BroadcastRecipientKinds: Resend's, which Resend
// requires, and more), optionally only `email` and, for bounced, one
// `bounce_type`.
func (s *broadcastsAPI) listBroadcastRecipients(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	f := broadcast.RecipientFilter{Kind: c.Query("type"), Email: strings.TrimSpace(c.Query("email")),
		BounceType: c.Query("bounce_type")}
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.BroadcastRecipient, bool, error) {
		rows, more, err := s.broadcastSvc.Recipients(ctx, team, id, f, p)
		return rows, more, broadcastError(err)
	}, renderBroadcastRecipient(f.Kind))
}

// clickedLinkJSON is Resend's clicked link row; id is its cursor.
type clickedLinkJSON struct {
	ID           string `json:"id"`
	URL          string `json:"url"`
	Clicks       int64  `json:"clicks"`
	UniqueClicks int64  `json:"unique_clicks"`
}

// listClickedLinks lists the links clicked in a broadcast's emails, most
// clicked first (GET /broadcasts/:id/clicked-links).
func (s *broadcastsAPI) listClickedLinks(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]broadcast.ClickedLink, bool, error) {
		rows, more, err := s.broadcastSvc.ClickedLinks(ctx, team, id, p)
		return rows, more, broadcastError(err)
	}, func(l broadcast.ClickedLink) clickedLinkJSON {
		return clickedLinkJSON{ID: l.ID.String(), URL: l.URL, Clicks: l.Clicks, UniqueClicks: l.Unique}
	})
}
