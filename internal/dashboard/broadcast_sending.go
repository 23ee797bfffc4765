package dashboard

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// broadcastConfirm is the question asked before a broadcast is sent.
type broadcastConfirm struct {
	Mode        string // "now" or "schedule"
	ScheduledAt string // RFC 3339, when scheduled
	When        time.Time
	Contacts    int64 // who would get it now
}

// Cancelable says whether the broadcast may be canceled.
func (d broadcastData) Cancelable() bool {
	return slices.Contains([]string{store.BroadcastScheduled, store.BroadcastQueued, store.BroadcastSending,
		store.BroadcastPaused}, d.Broadcast.Status)
}

// broadcastReport fills the counts and a page of the recipients; false
// when it answered an error.
func (h *broadcastsHandler) broadcastReport(w http.ResponseWriter, r *http.Request, se *store.Session, d *broadcastData) bool {
	ctx := r.Context()
	var err error
	if d.Counts, err = h.cfg.Broadcasts.Counts(ctx, se.TeamID, d.Broadcast.ID); err != nil {
		h.fail(w, r, err)
		return false
	}
	d.Settled = settled(d.Broadcast, d.Counts)
	q := r.URL.Query()
	d.Kinds = store.BroadcastRecipientKinds()
	if k := q.Get("kind"); slices.Contains(d.Kinds, k) {
		d.Kind = k
	}
	p := pageOf(q, 50)
	var more bool
	if d.Recipients, more, err = h.cfg.Broadcasts.Recipients(ctx, se.TeamID, d.Broadcast.ID,
		broadcast.RecipientFilter{Kind: d.Kind}, p); err != nil {
		h.fail(w, r, err)
		return false
	}
	if n := len(d.Recipients); n > 0 {
		keep := url.Values{}
		if d.Kind != "" {
			keep.Set("kind", d.Kind)
		}
		d.Pager = pagerOf(keep, p, more, d.Recipients[0].EmailID, d.Recipients[n-1].EmailID, n)
	}
	return true
}

// saveThen saves the posted form, if any, before an action on the draft;
// ok is false when it answered (a form error shown in the editor, or a
// failure).
func (h *broadcastsHandler) saveThen(w http.ResponseWriter, r *http.Request, se *store.Session, b store.Broadcast) (store.Broadcast, bool) {
	if !hasBroadcastForm(r) {
		return b, true
	}
	f := broadcastFormOf(r)
	saved, err := h.saveForm(r.Context(), se, b.ID, f)
	if fe, ok := broadcastError(err); ok {
		h.renderBroadcast(w, r, se, http.StatusUnprocessableEntity, broadcastData{Broadcast: b, Form: f, Error: fe,
			Schedule: r.PostFormValue("scheduled_at")})
		return b, false
	}
	if err != nil {
		h.failOr404(w, r, err)
		return b, false
	}
	return saved, true
}

// testBroadcast saves the form and sends one email of the draft to the
// signed-in member.
func (h *broadcastsHandler) testBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	if b, ok = h.saveThen(w, r, se, b); !ok {
		return
	}
	d := broadcastData{Broadcast: b, Form: formOfBroadcast(b), Schedule: r.PostFormValue("scheduled_at")}
	id, err := h.cfg.Broadcasts.SendTest(r.Context(), memberSender(se), b, se.UserEmail)
	if fe, ok := broadcastError(err); ok {
		d.Error = fe
		h.renderBroadcast(w, r, se, http.StatusUnprocessableEntity, d)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.TestEmailID = id.String()
	h.renderBroadcast(w, r, se, http.StatusOK, d)
}

// sendBroadcast sends the draft now (mode=now) or at scheduled_at
// (mode=schedule). The editor's buttons post the form: it is saved, checked
// and a confirmation naming the segment and its number of contacts is
// shown; the confirmation posts confirm=1, which sends.
func (h *broadcastsHandler) sendBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	if b, ok = h.saveThen(w, r, se, b); !ok {
		return
	}
	ctx := r.Context()
	mode, at := r.PostFormValue("mode"), strings.TrimSpace(r.PostFormValue("scheduled_at"))
	if mode != "schedule" {
		mode, at = "now", ""
	}
	d := broadcastData{Broadcast: b, Form: formOfBroadcast(b), Schedule: r.PostFormValue("scheduled_at")}
	refuse := func(err error) {
		fe, ok := broadcastError(err)
		if !ok {
			h.failOr404(w, r, err)
			return
		}
		d.Error = fe
		h.renderBroadcast(w, r, se, http.StatusUnprocessableEntity, d)
	}
	if mode == "schedule" && at == "" {
		refuse(invalid.Errorf("scheduled_at", "Say when to send it, such as `tomorrow at 9am` or `2026-12-01T09:00:00Z`."))
		return
	}
	if r.PostFormValue("confirm") != "1" {
		plan, err := h.cfg.Broadcasts.PlanSend(ctx, b, at)
		if err != nil {
			refuse(err)
			return
		}
		c := &broadcastConfirm{Mode: mode, Contacts: plan.Contacts}
		if plan.At != nil {
			c.When, c.ScheduledAt = *plan.At, plan.At.Format(time.RFC3339)
		}
		d.Confirm = c
		h.renderBroadcast(w, r, se, http.StatusOK, d)
		return
	}
	sent, err := h.cfg.Broadcasts.Send(ctx, memberSender(se), b.ID, at)
	if err != nil {
		refuse(err)
		return
	}
	done := "sent"
	if sent.Status == store.BroadcastScheduled {
		done = "scheduled"
	}
	http.Redirect(w, r, "/dashboard/broadcasts/"+b.ID.String()+"?done="+done, http.StatusSeeOther)
}

func (h *broadcastsHandler) cancelBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	if _, err := h.cfg.Broadcasts.Cancel(r.Context(), se.TeamID, b.ID); err != nil {
		fe, ok := broadcastError(err)
		if !ok {
			h.failOr404(w, r, err)
			return
		}
		h.renderBroadcast(w, r, se, http.StatusConflict, broadcastData{Broadcast: b, Form: formOfBroadcast(b), Error: fe})
		return
	}
	http.Redirect(w, r, "/dashboard/broadcasts/"+b.ID.String()+"?done=canceled", http.StatusSeeOther)
}

// duplicateBroadcast copies a broadcast, whatever its status, into a new
// draft and opens it.
func (h *broadcastsHandler) duplicateBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	dup, err := h.cfg.Broadcasts.Duplicate(r.Context(), se.TeamID, b.ID, copyName)
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/broadcasts/"+dup.ID.String()+"?done=duplicated", http.StatusSeeOther)
}

// copyName is the editor's name of a copy: "Copy of" the name, or the
// name itself when that would be too long (the API's broadcast.CopyName
// cuts it instead).
func copyName(name string) string {
	if c := "Copy of " + name; len(c) <= broadcast.MaxName {
		return c
	}
	return name
}

// settled says whether a broadcast's report can no longer change: it is
// sent or canceled, and every email handed over has reached a final state
// (none queued, delayed, or sent without an outcome yet).
func settled(b store.Broadcast, c store.BroadcastCounts) bool {
	inFlight := c.Queued + c.DeliveryDelayed + (c.Sent - c.Delivered - c.Bounced - c.DeliveryDelayed)
	return (b.Status == store.BroadcastSent || b.Status == store.BroadcastCanceled) && inFlight == 0
}

// broadcastProgress is the JSON the report polls: status and counts.
type broadcastProgress struct {
	Status       string           `json:"status"`
	StatusReason string           `json:"status_reason"`
	Counts       map[string]int64 `json:"counts"`
	// Settled: nothing will change any more (sent or canceled, and every
	// email handed over has reached a final state).
	Settled bool `json:"settled"`
}

func (h *broadcastsHandler) broadcastProgress(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	c, err := h.cfg.Broadcasts.Counts(r.Context(), se.TeamID, b.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := broadcastProgress{Status: b.Status, Counts: map[string]int64{"total": c.Total, "queued": c.Queued,
		"sent": c.Sent, "delivered": c.Delivered, "delivery_delayed": c.DeliveryDelayed, "bounced": c.Bounced,
		"complained": c.Complained, "suppressed": c.Suppressed, "failed": c.Failed, "canceled": c.Canceled,
		"opened": c.Opened, "clicked": c.Clicked, "unsubscribed": c.Unsubscribed}}
	if b.StatusReason != nil {
		out.StatusReason = *b.StatusReason
	}
	out.Settled = settled(b, c)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// countRow is one count of the report.
type countRow struct {
	Key, Label string
	N          int64
}

// CountRows are the report's counts, in the order shown.
func (d broadcastData) CountRows() []countRow {
	c := d.Counts
	return []countRow{{"total", "Emails", c.Total}, {"queued", "Queued", c.Queued}, {"sent", "Sent", c.Sent},
		{"delivered", "Delivered", c.Delivered}, {"delivery_delayed", "Delayed", c.DeliveryDelayed},
		{"bounced", "Bounced", c.Bounced}, {"complained", "Complained", c.Complained},
		{"unsubscribed", "Unsubscribed", c.Unsubscribed}, {"opened", "Opened", c.Opened},
		{"clicked", "Clicked", c.Clicked}, {"suppressed", "Suppressed", c.Suppressed},
		{"failed", "Failed", c.Failed}, {"canceled", "Canceled", c.Canceled}}
}
