package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/sandbox"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/unsubscribe"
)

// broadcastsHandler serves the Broadcasts pages (broadcasts.go,
// broadcast_sending.go).
type broadcastsHandler struct{ *Handler }

// routes adds the Broadcasts pages when the dashboard has a
// broadcast service. Every write goes through signedIn (session and CSRF
// token) and broadcast.Service, the API's use cases.
func (h *broadcastsHandler) routes(m *http.ServeMux) {
	if h.cfg.Broadcasts == nil {
		return
	}
	m.Handle("GET /dashboard/broadcasts", h.signedIn(h.broadcasts))
	m.Handle("POST /dashboard/broadcasts", h.signedIn(h.addBroadcast))
	m.Handle("GET /dashboard/broadcasts/{id}", h.signedIn(h.broadcast))
	m.Handle("POST /dashboard/broadcasts/{id}", h.signedIn(h.saveBroadcast))
	m.Handle("GET /dashboard/broadcasts/{id}/preview", h.signedIn(h.broadcastPreview))
	m.Handle("GET /dashboard/broadcasts/{id}/progress", h.signedIn(h.broadcastProgress))
	m.Handle("POST /dashboard/broadcasts/{id}/test", h.signedIn(h.testBroadcast))
	m.Handle("POST /dashboard/broadcasts/{id}/send", h.signedIn(h.sendBroadcast))
	m.Handle("POST /dashboard/broadcasts/{id}/cancel", h.signedIn(h.cancelBroadcast))
	m.Handle("POST /dashboard/broadcasts/{id}/duplicate", h.signedIn(h.duplicateBroadcast))
}

// broadcastRow is a broadcast of the list with its counts.
type broadcastRow struct {
	store.Broadcast
	Counts      store.BroadcastCounts
	SegmentName string
}

// broadcastBadge is the CSS class of a broadcast status's badge.
func broadcastBadge(status string) string {
	switch status {
	case store.BroadcastSent:
		return "ok"
	case store.BroadcastPaused:
		return "bad"
	case store.BroadcastScheduled, store.BroadcastQueued, store.BroadcastSending:
		return "wait"
	}
	return "neutral"
}

// Badge is the CSS class of the row's status badge.
func (r broadcastRow) Badge() string { return broadcastBadge(r.Status) }

type broadcastsData struct {
	Broadcasts  []broadcastRow
	HasSegments bool
	Pager       pager
	Error       formError
}

func (h *broadcastsHandler) broadcasts(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderBroadcasts(w, r, se, http.StatusOK, broadcastsData{})
}

func (h *broadcastsHandler) renderBroadcasts(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d broadcastsData) {
	ctx := r.Context()
	p := pageOf(r.URL.Query(), 50)
	list, more, err := h.cfg.Broadcasts.List(ctx, se.TeamID, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	names, err := h.segmentNames(ctx, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.HasSegments = len(names) > 0
	for _, b := range list {
		row := broadcastRow{Broadcast: b, SegmentName: segmentName(names, b.SegmentID)}
		if b.Status != store.BroadcastDraft {
			if row.Counts, err = h.cfg.Broadcasts.Counts(ctx, se.TeamID, b.ID); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		d.Broadcasts = append(d.Broadcasts, row)
	}
	if len(list) > 0 {
		d.Pager = pagerOf(url.Values{}, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	h.render(w, status, "broadcasts", view{Title: "Broadcasts", Nav: "broadcasts", Session: se, CSRF: se.CSRFToken, Data: d})
}

// maxSegments bounds the segments offered by the editor.
const maxSegments = 100

// segmentNames maps the team's segments to their names.
func (h *broadcastsHandler) segmentNames(ctx context.Context, team uuid.UUID) (map[uuid.UUID]string, error) {
	list, _, err := h.cfg.Audience.ListSegments(ctx, team, store.Page{Limit: maxSegments})
	if err != nil {
		return nil, err
	}
	names := make(map[uuid.UUID]string, len(list))
	for _, sg := range list {
		names[sg.ID] = sg.Name
	}
	return names, nil
}

func segmentName(names map[uuid.UUID]string, id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	if n, ok := names[*id]; ok {
		return n
	}
	return "(another segment)"
}

// starterDocument is the body of a broadcast made on the Broadcasts page: a
// heading, a greeting with a fallback, and the footer with its unsubscribe
// link and the team's name as the first line of its postal address.
func starterDocument(team string) json.RawMessage {
	type run struct {
		Text string `json:"text"`
	}
	type block struct {
		Type    string   `json:"type"`
		Level   int      `json:"level,omitempty"`
		Text    string   `json:"text,omitempty"`
		Runs    []run    `json:"runs,omitempty"`
		Address []string `json:"address,omitempty"`
	}
	if strings.TrimSpace(team) == "" {
		team = "Your company"
	}
	doc, _ := json.MarshalIndent(struct {
		Version int     `json:"version"`
		Blocks  []block `json:"blocks"`
	}{1, []block{
		{Type: "heading", Level: 1, Text: "Our latest news"},
		{Type: "text", Runs: []run{{Text: "Hi {{{FIRST_NAME|there}}}, here is what is new this month."}}},
		{Type: "footer", Address: []string{team, "Postal address"}},
	}}, "", "  ")
	return doc
}

// defaultFrom is the sender of a new broadcast: an address of the team's
// first verified domain, else the sandbox sender.
func (h *broadcastsHandler) defaultFrom(ctx context.Context, team uuid.UUID) (string, error) {
	list, _, err := h.cfg.Domains.List(ctx, team, store.Page{Limit: 100})
	if err != nil {
		return "", err
	}
	for _, d := range list {
		if d.Status == store.DomainVerified && d.DeletedAt == nil {
			return "hello@" + d.Name, nil
		}
	}
	return sandbox.Sender, nil
}

// memberSender is the signed-in member as the send path's sender.
func memberSender(se *store.Session) submit.Sender { return submit.Sender{TeamID: se.TeamID} }

// addBroadcast makes a draft to the team's newest segment with a starter
// body and opens its editor.
func (h *broadcastsHandler) addBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ctx := r.Context()
	segs, _, err := h.cfg.Audience.ListSegments(ctx, se.TeamID, store.Page{Limit: 1})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(segs) == 0 {
		h.renderBroadcasts(w, r, se, http.StatusUnprocessableEntity, broadcastsData{Error: formError{
			Message: "A broadcast goes to the contacts of a segment: add a segment first."}})
		return
	}
	from, err := h.defaultFrom(ctx, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	name, subject, seg := "Untitled broadcast", "Our latest news", segs[0].ID.String()
	b, err := h.cfg.Broadcasts.Create(ctx, memberSender(se), broadcast.Edit{Name: &name, Subject: &subject, From: &from,
		SegmentID: &seg, Components: starterDocument(se.TeamName)}, false, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/broadcasts/"+b.ID.String(), http.StatusSeeOther)
}

// broadcastForm is what the editor holds.
type broadcastForm struct {
	Name, SegmentID, TopicID, From, ReplyTo, Subject, PreviewText string
	Format                                                        string // formatHTML or formatComponents
	Components, HTML, Text                                        string
}

// formOfBroadcast is the editor's form showing b.
func formOfBroadcast(b store.Broadcast) broadcastForm {
	f := broadcastForm{Name: b.Name, From: b.From, ReplyTo: strings.Join(b.ReplyTo, ", "), Subject: b.Subject,
		PreviewText: b.PreviewText, Format: formatComponents}
	if b.SegmentID != nil {
		f.SegmentID = b.SegmentID.String()
	}
	if b.TopicID != nil {
		f.TopicID = b.TopicID.String()
	}
	switch {
	case b.Components != nil:
		f.Components = string(b.Components)
		if f.PreviewText == "" {
			f.PreviewText = documentPreviewText(b.Components)
		}
	case b.HTML != nil || b.Text != nil:
		f.Format = formatHTML
		if b.HTML != nil {
			f.HTML = *b.HTML
		}
		if b.Text != nil {
			f.Text = *b.Text
		}
	}
	return f
}

// broadcastFormOf reads the editor's form.
func broadcastFormOf(r *http.Request) broadcastForm {
	v := func(k string) string { return r.PostFormValue(k) }
	f := broadcastForm{Name: v("name"), SegmentID: v("segment_id"), TopicID: v("topic_id"),
		From: strings.TrimSpace(v("from")), ReplyTo: v("reply_to"), Subject: v("subject"),
		PreviewText: v("preview_text"), Format: v("format"), Components: v("components"), HTML: v("html"), Text: v("text")}
	if f.Format != formatHTML {
		f.Format = formatComponents
	}
	return f
}

// hasBroadcastForm says whether r posts the editor's fields (the action
// buttons of the editor do; the confirmation's form does not).
func hasBroadcastForm(r *http.Request) bool { _, ok := r.PostForm["subject"]; return ok }

// edit is the form as a broadcast.Edit, the API's rules. The preview text
// of a component document is its settings.preview_text, which the form's
// field sets.
func (f broadcastForm) edit() broadcast.Edit {
	e := broadcast.Edit{Name: &f.Name, SegmentID: &f.SegmentID, TopicID: &f.TopicID, From: &f.From,
		Subject: &f.Subject, PreviewText: &f.PreviewText, ReplyTo: []string{}, Form: true}
	for _, a := range strings.Split(f.ReplyTo, ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.ReplyTo = append(e.ReplyTo, a)
		}
	}
	if f.Format == formatComponents {
		e.Components = withPreviewText(json.RawMessage(f.Components), f.PreviewText)
		if strings.TrimSpace(f.Components) == "" {
			e.Components = json.RawMessage("{}") // refused by the parser, with its reason
		}
	} else {
		e.HTML, e.Text = &f.HTML, &f.Text
	}
	return e
}

// withPreviewText sets the settings.preview_text of a component document
// (removing it when text is empty); a document that is not a JSON object
// is returned as it is, for the parser to refuse.
func withPreviewText(doc json.RawMessage, text string) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(doc, &top) != nil || top == nil {
		return doc
	}
	settings := map[string]json.RawMessage{}
	if raw, ok := top["settings"]; ok && json.Unmarshal(raw, &settings) != nil {
		return doc
	}
	if text == "" {
		delete(settings, "preview_text")
	} else {
		settings["preview_text"], _ = json.Marshal(text)
	}
	if len(settings) == 0 {
		delete(top, "settings")
	} else {
		top["settings"], _ = json.Marshal(settings)
	}
	out, err := json.Marshal(top)
	if err != nil {
		return doc
	}
	return out
}

// documentPreviewText is the settings.preview_text of a component
// document, "" when it has none.
func documentPreviewText(doc json.RawMessage) string {
	var d struct {
		Settings struct {
			PreviewText string `json:"preview_text"`
		} `json:"settings"`
	}
	_ = json.Unmarshal(doc, &d)
	return d.Settings.PreviewText
}

// broadcastError is the form error of a broadcast write or send.
func broadcastError(err error) (formError, bool) {
	var se *submit.Error
	var re *store.RefError
	var be *store.BroadcastStateError
	switch {
	case errors.As(err, &se):
		return formError{Message: se.Message, Field: se.Field}, true
	case errors.As(err, &re):
		return formError{Field: re.What + "_id", Message: "That " + re.What + " no longer exists: choose another one."}, true
	case errors.As(err, &be):
		return formError{Message: "This broadcast is " + be.Status + ": it can no longer be edited or sent. Reload the page."}, true
	}
	return asFormError(err)
}

// saveForm applies the posted form to one of the team's drafts (an empty
// name refused: edit sets Form).
func (h *broadcastsHandler) saveForm(ctx context.Context, se *store.Session, id uuid.UUID, f broadcastForm) (store.Broadcast, error) {
	return h.cfg.Broadcasts.Update(ctx, se.TeamID, id, f.edit())
}

// segmentOption is a segment of the editor's select.
type segmentOption struct {
	ID       string
	Name     string
	Contacts int64
}

// broadcastData is what the broadcast page shows: the editor of a draft,
// or the report of a broadcast that was sent.
type broadcastData struct {
	Broadcast store.Broadcast
	Form      broadcastForm
	Segments  []segmentOption
	Topics    []store.Topic
	// Variables is the JSON array the block editor offers.
	Variables string
	// Sample is the address the preview is rendered for.
	Sample      string
	Subject     string // the subject rendered for Sample
	Notice      string
	TestEmailID string
	Error       formError
	Schedule    string // typed into the schedule field
	Confirm     *broadcastConfirm
	// The report of a broadcast that is not a draft.
	SegmentName, TopicName string
	Counts                 store.BroadcastCounts
	Recipients             []store.BroadcastRecipient
	Kind                   string
	Kinds                  []string
	Pager                  pager
	// Settled: the report can no longer change (see broadcastProgress).
	Settled bool
}

// Badge is the CSS class of the broadcast's status badge.
func (d broadcastData) Badge() string { return broadcastBadge(d.Broadcast.Status) }

var broadcastNotices = map[string]string{
	"saved":      "Draft saved.",
	"duplicated": "This is a copy, a draft of its own.",
	"sent":       "Sending: the broadcast is on its way to the segment's contacts.",
	"scheduled":  "Scheduled.",
	"canceled":   "Canceled: no more emails of this broadcast will be handed to the send path.",
}

func (h *broadcastsHandler) loadBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Broadcast, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Broadcast, error) {
		return h.cfg.Broadcasts.Get(r.Context(), se.TeamID, id)
	})
}

// broadcast shows a draft's editor, or the report of a broadcast that was
// sent.
func (h *broadcastsHandler) broadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	h.renderBroadcast(w, r, se, http.StatusOK, broadcastData{Broadcast: b, Form: formOfBroadcast(b),
		Notice: broadcastNotices[r.URL.Query().Get("done")]})
}

// renderBroadcast fills what the page shows besides d's own fields and
// renders it.
func (h *broadcastsHandler) renderBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d broadcastData) {
	ctx := r.Context()
	b := d.Broadcast
	segs, _, err := h.cfg.Audience.ListSegments(ctx, se.TeamID, store.Page{Limit: maxSegments})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	counts, err := h.cfg.Broadcasts.SegmentContacts(ctx, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, sg := range segs {
		d.Segments = append(d.Segments, segmentOption{ID: sg.ID.String(), Name: sg.Name, Contacts: counts[sg.ID]})
		if b.SegmentID != nil && *b.SegmentID == sg.ID {
			d.SegmentName = sg.Name
		}
	}
	if d.Topics, _, err = h.cfg.Audience.ListTopics(ctx, se.TeamID, store.Page{Limit: 100}); err != nil {
		h.fail(w, r, err)
		return
	}
	for _, t := range d.Topics {
		if b.TopicID != nil && *b.TopicID == t.ID {
			d.TopicName = t.Name
		}
	}
	props, err := h.cfg.Broadcasts.Properties(ctx, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	vars := []string{"FIRST_NAME", "LAST_NAME", "EMAIL"}
	for _, p := range props {
		vars = append(vars, p.Key)
	}
	slices.Sort(vars[3:])
	raw, _ := json.Marshal(vars)
	d.Variables = string(raw)
	sample, err := h.sampleContact(ctx, se)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Sample = sample.Email
	if out, err := broadcast.Render(b, sample, props); err == nil {
		d.Subject = out.Subject
	}
	if b.Status != store.BroadcastDraft {
		if !h.broadcastReport(w, r, se, &d) {
			return
		}
	}
	title := b.Name
	if title == "" {
		title = "Untitled broadcast"
	}
	h.render(w, status, "broadcast", view{Title: title, Nav: "broadcasts", Session: se, CSRF: se.CSRFToken, Data: d})
}

// sampleContact is who the preview shows the broadcast to: the signed-in
// member's contact if the team has one, else sample names at the member's
// address.
func (h *broadcastsHandler) sampleContact(ctx context.Context, se *store.Session) (store.BroadcastContact, error) {
	c, err := h.cfg.Audience.Contact(ctx, se.TeamID, store.ContactRef{Email: se.UserEmail})
	if errors.Is(err, store.ErrNotFound) {
		return store.BroadcastContact{Email: se.UserEmail, FirstName: "Jane", LastName: "Doe"}, nil
	}
	if err != nil {
		return store.BroadcastContact{}, err
	}
	return store.BroadcastContact{ID: c.ID, Email: c.Email, FirstName: c.FirstName, LastName: c.LastName,
		Properties: c.Properties}, nil
}

// savedBroadcast is the answer of an autosave.
type savedBroadcast struct {
	SavedAt string `json:"saved_at,omitempty"`
	Subject string `json:"subject,omitempty"` // rendered for the preview's contact
	Error   string `json:"error,omitempty"`
	Field   string `json:"field,omitempty"`
}

// wantsJSON says whether the request comes from the editor's script.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// saveBroadcast saves the editor's draft: as JSON for the autosave of
// assets/broadcast-editor.js (the time saved, or the field error; 200
// either way), else back to the editor.
func (h *broadcastsHandler) saveBroadcast(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	f := broadcastFormOf(r)
	saved, err := h.saveForm(r.Context(), se, b.ID, f)
	fe, isForm := broadcastError(err)
	if err != nil && !isForm {
		h.failOr404(w, r, err)
		return
	}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if isForm {
			// 200 still: a draft being typed is often invalid for a
			// moment, which is not an error of the request.
			_ = json.NewEncoder(w).Encode(savedBroadcast{Error: fe.Message, Field: fe.Field})
			return
		}
		out := savedBroadcast{SavedAt: saved.UpdatedAt.UTC().Format(time.RFC3339)}
		if sample, err := h.sampleContact(r.Context(), se); err == nil {
			if props, err := h.cfg.Broadcasts.Properties(r.Context(), se.TeamID); err == nil {
				if rb, err := broadcast.Render(saved, sample, props); err == nil {
					out.Subject = rb.Subject
				}
			}
		}
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	if isForm {
		h.renderBroadcast(w, r, se, http.StatusUnprocessableEntity, broadcastData{Broadcast: b, Form: f, Error: fe})
		return
	}
	http.Redirect(w, r, "/dashboard/broadcasts/"+b.ID.String()+"?done=saved", http.StatusSeeOther)
}

// broadcastPreview answers the editor's preview frame: the saved
// broadcast as the sample contact gets it, under the email preview's
// sandboxing headers (no scripts, nothing loaded from the network), its
// unsubscribe links leading nowhere; or the reason it does not render.
func (h *broadcastsHandler) broadcastPreview(w http.ResponseWriter, r *http.Request, se *store.Session) {
	b, ok := h.loadBroadcast(w, r, se)
	if !ok {
		return
	}
	ctx := r.Context()
	sample, err := h.sampleContact(ctx, se)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	props, err := h.cfg.Broadcasts.Properties(ctx, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	previewHeaders(w.Header(), false)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	out, err := broadcast.Render(b, sample, props)
	switch {
	case err != nil:
		_ = previewFrame.Execute(w, "This broadcast cannot be shown to "+sample.Email+": "+err.Error()+".")
	case out.HTML != nil:
		_, _ = w.Write([]byte(unsubscribe.ReplacePlaceholders(*out.HTML, "#")))
	case out.Text != nil:
		_ = previewFrame.Execute(w, "This broadcast has a plain-text body only.")
	default:
		_ = previewFrame.Execute(w, "This broadcast has no content yet.")
	}
}
