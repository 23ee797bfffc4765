package dashboard

import (
	"errors"
	"html/template"
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
}

func (h *audienceHandler) contacts(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderContacts(w, r, se, http.StatusOK, contactsData{})
}

func (h *audienceHandler) renderContacts(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d contactsData) {
	q := r.URL.Query()
	d.Query = strings.TrimSpace(q.Get("q"))
	p := pageOf(q, 50)
	list, more, err := h.svc.ListContacts(r.Context(), se.TeamID, store.ContactFilter{Search: d.Query}, p)
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
	ct, err := h.svc.CreateContact(r.Context(), se.TeamID, audience.ContactInput{Email: &f.Email, FirstName: &f.FirstName,
		LastName: &f.LastName})
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
		return h.svc.Contact(r.Context(), se.TeamID, store.ContactRef{ID: &id})
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
		defs, err := h.svc.PropertiesByKey(ctx, se.TeamID)
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
		segs, _, err := h.svc.ListSegments(ctx, se.TeamID, store.Page{Limit: 100})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, sg := range segs {
			d.Segments = append(d.Segments, contactSegmentChoice{ID: sg.ID, Name: sg.Name,
				Member: slices.Contains(d.Contact.SegmentIDs, sg.ID)})
		}
		if d.Topics == nil {
			if d.Topics, _, err = h.svc.ContactTopics(ctx, se.TeamID, d.Contact.ID, store.Page{Limit: 100}); err != nil {
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

// editContact saves a contact's page (audience.Service.SaveContactPage):
// names, unsubscribed, property values (an empty field removes the
// value), segment memberships and topic subscriptions. A rejected save
// shows the page again as typed.
func (h *audienceHandler) editContact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	// PostFormValue parses the form: r.PostForm holds it below.
	in := audience.ContactPage{Email: r.PostFormValue("email"), FirstName: r.PostFormValue("first_name"),
		LastName: r.PostFormValue("last_name"), Unsubscribed: r.PostFormValue("unsubscribed") == "on",
		Properties: map[string]string{}, Topics: map[string]string{}}
	for name, vs := range r.PostForm {
		if len(vs) == 0 {
			continue
		}
		if key, ok := strings.CutPrefix(name, "prop."); ok {
			in.Properties[key] = vs[0]
		} else if id, ok := strings.CutPrefix(name, "topic."); ok {
			in.Topics[id] = vs[0]
		}
	}
	for _, s := range r.PostForm["segment"] {
		if id, err := uuid.Parse(s); err == nil {
			in.Segments = append(in.Segments, id)
		}
	}
	shown, err := h.svc.SaveContactPage(r.Context(), se.TeamID, ct, in)
	if fe, ok := contactError(err, shown.Contact.Email); ok {
		h.renderContact(w, r, se, http.StatusUnprocessableEntity, "contact", contactData{Contact: shown.Contact, Topics: shown.Topics, Error: fe})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/contacts/"+ct.ID.String()+"?done=saved", http.StatusSeeOther)
}

// fieldError is the form error of a rejection by the audience checks (an
// *invalid.Error).
func fieldError(err error) (formError, bool) {
	var ie *invalid.Error
	if errors.As(err, &ie) {
		return formError{Message: ie.Message, Field: ie.Field}, true
	}
	return formError{}, false
}

// unsubscribeContact unsubscribes a contact from everything.
func (h *audienceHandler) unsubscribeContact(w http.ResponseWriter, r *http.Request, se *store.Session) {
	ct, ok := h.loadContact(w, r, se)
	if !ok {
		return
	}
	yes := true
	_, err := h.svc.UpdateContact(r.Context(), se.TeamID, store.ContactRef{ID: &ct.ID}, audience.ContactInput{Unsubscribed: &yes})
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
	if _, err := h.svc.DeleteContact(r.Context(), se.TeamID, store.ContactRef{ID: &ct.ID}); err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/contacts", http.StatusSeeOther)
}
