package dashboard

import (
	"context"
	"errors"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

// pageOf reads the after/before cursor of a list page.
func pageOf(q url.Values, limit int) store.Page {
	p := store.Page{Limit: limit}
	if id, err := uuid.Parse(q.Get("after")); err == nil {
		p.After = &id
	} else if id, err := uuid.Parse(q.Get("before")); err == nil {
		p.Before = &id
	}
	return p
}

// pager is the query strings ("?after=…") of the links to the older and
// newer pages of a list shown with p; keep holds the filters to carry
// along. They are template.URL: html/template would escape the = and &
// of a query string inserted after a '?'.
type pager struct{ Older, Newer template.URL }

func pagerOf(keep url.Values, p store.Page, more bool, first, last uuid.UUID, n int) pager {
	var pg pager
	if n == 0 {
		return pg
	}
	if p.Before != nil || more {
		v := cloneValues(keep)
		v.Set("after", last.String())
		pg.Older = template.URL("?" + v.Encode()) //nolint:gosec // url.Values.Encode escapes every value
	}
	if p.After != nil || (p.Before != nil && more) {
		v := cloneValues(keep)
		v.Set("before", first.String())
		pg.Newer = template.URL("?" + v.Encode()) //nolint:gosec // url.Values.Encode escapes every value
	}
	return pg
}

// contactForm is what the New contact form holds.
type contactForm struct {
	Email, FirstName, LastName string
}

type contactsData struct {
	Contacts []store.Contact
	Query    string
	Pager    pager
	Form     contactForm
	Error    formError
	// CanImport shows the link to the import page.
	CanImport bool
}

func (h *audienceHandler) contacts(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderContacts(w, r, se, http.StatusOK, contactsData{})
}

func (h *audienceHandler) renderContacts(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d contactsData) {
	q := r.URL.Query()
	d.Query = strings.TrimSpace(q.Get("q"))
	p := pageOf(q, 50)
	list, more, err := h.store.Audience.ListContacts(r.Context(), se.TeamID, store.ContactFilter{Search: d.Query}, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Contacts = list
	if len(list) > 0 {
		keep := url.Values{}
		if d.Query != "" {
			keep.Set("q", d.Query)
		}
		d.Pager = pagerOf(keep, p, more, list[0].ID, list[len(list)-1].ID, len(list))
	}
	d.CanImport = h.cfg.Imports != nil
	h.render(w, status, "contacts", view{Title: "Contacts", Nav: "contacts", Session: se, CSRF: se.CSRFToken, Data: d})
}

// contactError is the form error of a write of contacts: a field error,
// an address taken, or a segment or topic gone meanwhile.
func contactError(err error, email string) (formError, bool) {
	var re *store.RefError
	switch {
	case errors.Is(err, store.ErrConflict):
		return formError{Field: "email", Message: "A contact with email " + email + " already exists."}, true
	case errors.As(err, &re):
		return formError{Message: "The " + re.What + " was deleted meanwhile. Reload the page and try again."}, true
	}
	return asFormError(err)
}

func (h *audienceHandler) addContact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	f := contactForm{Email: strings.TrimSpace(r.PostFormValue("email")), FirstName: strings.TrimSpace(r.PostFormValue("first_name")),
		LastName: strings.TrimSpace(r.PostFormValue("last_name"))}
	ct, err := h.createContact(r.Context(), se.TeamID, f)
	if fe, ok := contactError(err, f.Email); ok {
		h.renderContacts(w, r, se, http.StatusUnprocessableEntity, contactsData{Form: f, Error: fe})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/contacts/"+ct.ID.String()+"?done=added", http.StatusSeeOther)
}

func (h *audienceHandler) createContact(ctx context.Context, team uuid.UUID, f contactForm) (store.Contact, error) {
	if f.Email == "" {
		return store.Contact{}, invalid.Missing("email")
	}
	addr, err := audience.ContactAddress(f.Email)
	if err != nil {
		return store.Contact{}, err
	}
	if err := audience.CheckNames(&f.FirstName, &f.LastName); err != nil {
		return store.Contact{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.Contact{}, err
	}
	ct, err := h.store.Audience.CreateContact(ctx, store.Contact{ID: id, TeamID: team, Email: addr, FirstName: f.FirstName,
		LastName: f.LastName}, nil, nil, audience.EventContactCreated)
	if err != nil {
		return store.Contact{}, err
	}
	return ct, nil
}

// contactProperty is a custom property's row on a contact's page.
type contactProperty struct {
	Key, Type, Value string
}

// contactSegmentChoice is a segment's box on a contact's page.
type contactSegmentChoice struct {
	ID     uuid.UUID
	Name   string
	Member bool
}

type contactData struct {
	Contact    store.Contact
	Properties []contactProperty
	Segments   []contactSegmentChoice
	Topics     []store.ContactTopic
	Notice     string
	Error      formError
}

var contactNotices = map[string]string{
	"added":        "Contact added.",
	"saved":        "Contact saved.",
	"unsubscribed": "Unsubscribed from everything: this contact receives no mail sent to a topic or a segment any more.",
}

// loadContact loads the {id} contact of the session's team.
func (h *audienceHandler) loadContact(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Contact, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Contact, error) {
		return h.store.Audience.Contact(r.Context(), se.TeamID, store.ContactRef{ID: &id})
	})
}

func (h *audienceHandler) contact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	h.renderContact(w, r, se, http.StatusOK, "contact", contactData{Contact: ct, Notice: contactNotices[r.URL.Query().Get("done")]})
}

// renderContact shows a contact's page (or its delete page) with the
// team's properties, segments and topics. A form shown again keeps what
// was typed: d.Contact holds it.
func (h *audienceHandler) renderContact(w http.ResponseWriter, r *http.Request, se *store.Session, status int, page string, d contactData) {
	ctx := r.Context()
	if page == "contact" {
		defs, err := h.store.Audience.ContactPropertiesByKey(ctx, se.TeamID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, def := range defs {
			p := contactProperty{Key: def.Key, Type: def.Type}
			switch v := d.Contact.Properties[def.Key].(type) {
			case string:
				p.Value = v
			case float64:
				p.Value = strconv.FormatFloat(v, 'f', -1, 64)
			}
			d.Properties = append(d.Properties, p)
		}
		slices.SortFunc(d.Properties, func(a, b contactProperty) int { return strings.Compare(a.Key, b.Key) })
		segs, _, err := h.store.Audience.ListSegments(ctx, se.TeamID, store.Page{Limit: 100})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, sg := range segs {
			d.Segments = append(d.Segments, contactSegmentChoice{ID: sg.ID, Name: sg.Name,
				Member: slices.Contains(d.Contact.SegmentIDs, sg.ID)})
		}
		if d.Topics == nil {
			if d.Topics, _, err = h.store.Audience.ContactTopics(ctx, se.TeamID, d.Contact.ID, store.Page{Limit: 100}); err != nil {
				h.fail(w, r, err)
				return
			}
		}
	}
	title := d.Contact.Email
	if page == "contact_delete" {
		title = "Delete " + title
	}
	h.render(w, status, page, view{Title: title, Nav: "contacts", Session: se, CSRF: se.CSRFToken, Data: d})
}

// editContact saves a contact's page: names, unsubscribed, property
// values (an empty field removes the value), segment memberships and
// topic subscriptions. Everything is checked before anything is written.
func (h *audienceHandler) editContact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	ctx := r.Context()
	first, last := strings.TrimSpace(r.PostFormValue("first_name")), strings.TrimSpace(r.PostFormValue("last_name"))
	email := strings.TrimSpace(r.PostFormValue("email"))
	unsub := r.PostFormValue("unsubscribed") == "on"
	shown := ct
	shown.Email, shown.FirstName, shown.LastName, shown.Unsubscribed = email, first, last, unsub
	shown.Properties = map[string]any{}
	topics, _, err := h.store.Audience.ContactTopics(ctx, se.TeamID, ct.ID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var choices []store.TopicChoice
	for i, t := range topics {
		v := r.PostFormValue("topic." + t.ID.String())
		if v == "" || v == t.Subscription {
			continue
		}
		if err := audience.Subscription(t.ID.String(), v); err != nil {
			h.renderContact(w, r, se, http.StatusUnprocessableEntity, "contact", contactData{Contact: shown, Topics: topics, Error: formErrorOf(err)})
			return
		}
		choices = append(choices, store.TopicChoice{TopicID: t.ID, Subscription: v})
		topics[i].Subscription = v
	}
	fail := func(err error) {
		if f, ok := contactError(err, email); ok {
			h.renderContact(w, r, se, http.StatusUnprocessableEntity, "contact", contactData{Contact: shown, Topics: topics, Error: f})
			return
		}
		h.failOr404(w, r, err)
	}
	defs, err := h.store.Audience.ContactPropertiesByKey(ctx, se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	in := map[string]any{}
	for key, def := range defs {
		raw := strings.TrimSpace(r.PostFormValue("prop." + key))
		if raw == "" {
			if _, had := ct.Properties[key]; had {
				in[key] = nil
			}
			continue
		}
		shown.Properties[key] = raw
		in[key] = raw
		if def.Type == store.PropertyNumber {
			n, err := strconv.ParseFloat(raw, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				fail(invalid.Errorf("properties", "The contact property `%s` must be a number.", key))
				return
			}
			in[key] = n
		}
	}
	set, remove, err := audience.CheckProperties(defs, in)
	if err != nil {
		fail(err)
		return
	}
	addr, err := audience.ContactAddress(email)
	if err != nil {
		fail(err)
		return
	}
	if err := audience.CheckNames(&first, &last); err != nil {
		fail(err)
		return
	}
	want := map[uuid.UUID]bool{}
	for _, s := range r.PostForm["segment"] {
		if id, err := uuid.Parse(s); err == nil {
			want[id] = true
		}
	}
	for id := range want {
		if !slices.Contains(ct.SegmentIDs, id) {
			if err := h.store.Audience.AddContactToSegment(ctx, se.TeamID, ct.ID, id); err != nil {
				fail(err)
				return
			}
		}
	}
	for _, id := range ct.SegmentIDs {
		if !want[id] {
			if err := h.store.Audience.RemoveContactFromSegment(ctx, se.TeamID, ct.ID, id); err != nil && !errors.Is(err, store.ErrNotFound) {
				fail(err)
				return
			}
		}
	}
	// The fields and topic choices change last, in one transaction with
	// the events that report the contact as saved.
	u := store.ContactUpdate{Email: &addr, FirstName: &first, LastName: &last, Unsubscribed: &unsub,
		SetProperties: set, RemoveProperties: remove, Topics: choices}
	events := []string{audience.EventContactUpdated}
	if len(choices) > 0 {
		events = append(events, audience.EventContactTopicsUpdated)
	}
	if _, err := h.store.Audience.UpdateContact(ctx, se.TeamID, store.ContactRef{ID: &ct.ID}, u, events...); err != nil {
		fail(err)
		return
	}
	http.Redirect(w, r, "/dashboard/contacts/"+ct.ID.String()+"?done=saved", http.StatusSeeOther)
}

// formErrorOf is the form error of err, a field error of the audience
// checks; any other error is shown by its text.
func formErrorOf(err error) formError {
	if f, ok := asFormError(err); ok {
		return f
	}
	return formError{Message: err.Error()}
}

// unsubscribeContact unsubscribes a contact from everything.
func (h *audienceHandler) unsubscribeContact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	yes := true
	_, err := h.store.Audience.UpdateContact(r.Context(), se.TeamID, store.ContactRef{ID: &ct.ID}, store.ContactUpdate{Unsubscribed: &yes},
		audience.EventContactUpdated)
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/contacts/"+ct.ID.String()+"?done=unsubscribed", http.StatusSeeOther)
}

func (h *audienceHandler) deleteContactPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	h.renderContact(w, r, se, http.StatusOK, "contact_delete", contactData{Contact: ct})
}

func (h *audienceHandler) deleteContact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	if _, err := h.store.Audience.DeleteContact(r.Context(), se.TeamID, store.ContactRef{ID: &ct.ID}, audience.EventContactDeleted); err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/contacts", http.StatusSeeOther)
}
