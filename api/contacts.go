package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/store"
)

// audienceAPI serves the audience: /contacts (contacts.go), /contacts/imports
// (contact_imports.go), /contact-properties (contact_properties.go),
// /segments (segments.go), /topics (topics.go) and the legacy /audiences
// (audiences.go).
type audienceAPI struct {
	*Server
	svc     *audience.Service
	imports *imports.Service
}

type contactJSON struct {
	Object       string         `json:"object"`
	ID           string         `json:"id"`
	Email        string         `json:"email"`
	FirstName    string         `json:"first_name"`
	LastName     string         `json:"last_name"`
	CreatedAt    string         `json:"created_at"`
	Unsubscribed bool           `json:"unsubscribed"`
	Properties   map[string]any `json:"properties"`
}

func renderContact(ct store.Contact) contactJSON {
	return contactJSON{Object: "contact", ID: ct.ID.String(), Email: ct.Email, FirstName: ct.FirstName,
		LastName: ct.LastName, CreatedAt: formatTime(ct.CreatedAt), Unsubscribed: ct.Unsubscribed,
		Properties: ct.Properties}
}

// topicChoiceJSON is one entry of a contact's `topics`.
type topicChoiceJSON struct {
	ID           string `json:"id"`
	Subscription string `json:"subscription"`
}

// contactRequest is the body of create and update. Segments are ids, as
// Resend's reference documents, or `{"id"}` objects, as its SDKs send.
type contactRequest struct {
	Email        *string           `json:"email"`
	FirstName    *string           `json:"first_name"`
	LastName     *string           `json:"last_name"`
	Unsubscribed *bool             `json:"unsubscribed"`
	Properties   map[string]any    `json:"properties"`
	Segments     []json.RawMessage `json:"segments"`
	Topics       []topicChoiceJSON `json:"topics"`
}

// contactRef reads the :id path parameter, a contact's id or address.
func contactRef(c *gin.Context) (store.ContactRef, error) {
	return parseContactRef(c.Param("id"))
}

// parseContactRef reads a path parameter that is a contact's id or address.
func parseContactRef(ref string) (store.ContactRef, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return store.ContactRef{ID: &id}, nil
	}
	if strings.Contains(ref, "@") {
		if addr, err := audience.ContactAddress(ref); err == nil {
			return store.ContactRef{Email: addr}, nil
		}
	}
	return store.ContactRef{}, errorf(http.StatusUnprocessableEntity, nameInvalidParameter,
		"The path must name a contact by its id or its email address.")
}

// segmentIDs reads `segments`: ids or {"id"} objects (the service checks
// that each is an id).
func segmentIDs(raw []json.RawMessage) ([]string, error) {
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			var obj struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(r, &obj); err != nil {
				return nil, validation("The `segments` field must be a list of segment ids.")
			}
			s = obj.ID
		}
		out = append(out, s)
	}
	return out, nil
}

// topicChoices reads `topics` (the service checks them).
func topicChoices(in []topicChoiceJSON) []audience.TopicChoice {
	out := make([]audience.TopicChoice, len(in))
	for i, t := range in {
		out[i] = audience.TopicChoice{ID: t.ID, Subscription: t.Subscription}
	}
	return out
}

// refError turns a *store.RefError (a segment or topic of the body that
// the team does not have) into a 404 naming it.
func refError(err error) error {
	var re *store.RefError
	if errors.As(err, &re) {
		what := strings.ToUpper(re.What[:1]) + re.What[1:]
		return errorf(http.StatusNotFound, nameNotFound, what+" "+re.ID.String()+" not found.")
	}
	return err
}

// addressTaken is the 409 of a contact write whose address another
// contact has; other errors pass unchanged.
func addressTaken(err error, message func(email string) string) error {
	var at *audience.AddressTakenError
	if errors.As(err, &at) {
		return errorf(http.StatusConflict, nameConflict, message(at.Email))
	}
	return err
}

// contactInput is the service's input of a create or update body.
func (req contactRequest) contactInput() (audience.ContactInput, error) {
	segments, err := segmentIDs(req.Segments)
	if err != nil {
		return audience.ContactInput{}, err
	}
	return audience.ContactInput{Email: req.Email, FirstName: req.FirstName, LastName: req.LastName,
		Unsubscribed: req.Unsubscribed, Properties: req.Properties, Segments: segments,
		Topics: topicChoices(req.Topics)}, nil
}

func (s *audienceAPI) createContact(c *gin.Context) {
	var req contactRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	in, err := req.contactInput()
	if err != nil {
		s.respondError(c, err)
		return
	}
	ct, err := s.svc.CreateContact(c.Request.Context(), principal(c).TeamID, in)
	if err != nil {
		s.respondError(c, contactCreateError(err))
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "contact", "id": ct.ID.String()})
}

// contactCreateError words the errors of a contact's creation.
func contactCreateError(err error) error {
	return refError(addressTaken(err, func(email string) string {
		return "A contact with email " + email + " already exists."
	}))
}

// listContacts lists the team's contacts; `segment_id` narrows to one
// segment and `search` (a Posthaste extension) to contacts whose address
// or name contains it.
func (s *audienceAPI) listContacts(c *gin.Context) {
	var f store.ContactFilter
	f.Search = c.Query("search")
	if v, ok := c.GetQuery("segment_id"); ok {
		id, err := uuid.Parse(v)
		if err != nil {
			s.respondError(c, validation("The `segment_id` parameter must be a valid id."))
			return
		}
		f.SegmentID = &id
	}
	s.respondContacts(c, f)
}

// listSegmentContacts lists the contacts of one of the team's segments.
func (s *audienceAPI) listSegmentContacts(c *gin.Context) { listContactsOf(s, c, "Segment not found.") }

// listContactsOf lists the contacts of the team's segment :id; missing is
// the 404's message when the team has no such segment.
func listContactsOf(s *audienceAPI, c *gin.Context, missing string) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	if _, err := s.svc.Segment(c.Request.Context(), principal(c).TeamID, id); err != nil {
		s.respondError(c, notFound(err, missing))
		return
	}
	s.respondContacts(c, store.ContactFilter{Search: c.Query("search"), SegmentID: &id})
}

func (s *audienceAPI) respondContacts(c *gin.Context, f store.ContactFilter) {
	respondList(s.Server, c, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.Contact, bool, error) {
		return s.svc.ListContacts(ctx, team, f, p)
	}, renderContact)
}

// contactRoute reads the contact a route names: by :id on /contacts, within
// an audience on /audiences/:id/contacts (audiences.go).
type contactRoute func(c *gin.Context) (store.ContactRef, error)

// contactError words the errors of a read or change of the contact a
// route names: a missing audience (a *store.RefError of its segment) or
// contact is a 404.
func contactError(err error) error {
	return notFound(audienceMissing(err), "Contact not found.")
}

func (s *audienceAPI) getContact(c *gin.Context) { getContactAt(s, c, contactRef) }

func getContactAt(s *audienceAPI, c *gin.Context, route contactRoute) {
	ref, err := route(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ct, err := s.svc.Contact(c.Request.Context(), principal(c).TeamID, ref)
	if err != nil {
		s.respondError(c, contactError(err))
		return
	}
	c.PureJSON(http.StatusOK, renderContact(ct))
}

func (s *audienceAPI) updateContact(c *gin.Context) { updateContactAt(s, c, contactRef) }

func updateContactAt(s *audienceAPI, c *gin.Context, route contactRoute) {
	ref, err := route(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var req contactRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	ct, err := s.svc.UpdateContact(c.Request.Context(), principal(c).TeamID, ref, audience.ContactInput{Email: req.Email,
		FirstName: req.FirstName, LastName: req.LastName, Unsubscribed: req.Unsubscribed, Properties: req.Properties})
	if err != nil {
		s.respondError(c, contactError(addressTaken(err, func(email string) string {
			return "Another contact has email " + email + "."
		})))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "contact", "id": ct.ID.String()})
}

func (s *audienceAPI) deleteContact(c *gin.Context) { deleteContactAt(s, c, contactRef) }

func deleteContactAt(s *audienceAPI, c *gin.Context, route contactRoute) {
	ref, err := route(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ct, err := s.svc.DeleteContact(c.Request.Context(), principal(c).TeamID, ref)
	if err != nil {
		s.respondError(c, contactError(err))
		return
	}
	// `contact` is what Resend's older SDKs read; `id` what the reference documents.
	c.JSON(http.StatusOK, gin.H{"object": "contact", "id": ct.ID.String(), "contact": ct.ID.String(), "deleted": true})
}

// contactByRef resolves the :id of a contact sub-resource route.
func (s *audienceAPI) contactByRef(c *gin.Context) (store.Contact, bool) {
	ref, err := contactRef(c)
	if err != nil {
		s.respondError(c, err)
		return store.Contact{}, false
	}
	ct, err := s.svc.Contact(c.Request.Context(), principal(c).TeamID, ref)
	if err != nil {
		s.respondError(c, notFound(err, "Contact not found."))
		return store.Contact{}, false
	}
	return ct, true
}

type contactSegmentJSON struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

func (s *audienceAPI) listContactSegments(c *gin.Context) {
	ct, ok := s.contactByRef(c)
	if !ok {
		return
	}
	respondList(s.Server, c, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.ContactSegment, bool, error) {
		return s.svc.ContactSegments(ctx, team, ct.ID, p)
	}, func(cs store.ContactSegment) contactSegmentJSON {
		return contactSegmentJSON{ID: cs.ID.String(), Object: "segment", Name: cs.Name, CreatedAt: formatTime(cs.AddedAt)}
	})
}

// segmentParam parses :segment_id.
func segmentParam(c *gin.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("segment_id"))
	if err != nil {
		return uuid.Nil, errorf(http.StatusUnprocessableEntity, nameInvalidParameter, "The segment id must be a valid UUID.")
	}
	return id, nil
}

func (s *audienceAPI) addContactSegment(c *gin.Context) {
	segment, err := segmentParam(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ct, ok := s.contactByRef(c)
	if !ok {
		return
	}
	if err := s.svc.AddToSegment(c.Request.Context(), principal(c).TeamID, ct.ID, segment); err != nil {
		s.respondError(c, refError(err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "contact_segment", "id": segment.String(), "contact_id": ct.ID.String(),
		"segment_id": segment.String()})
}

func (s *audienceAPI) removeContactSegment(c *gin.Context) {
	segment, err := segmentParam(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	ct, ok := s.contactByRef(c)
	if !ok {
		return
	}
	if err := s.svc.RemoveFromSegment(c.Request.Context(), principal(c).TeamID, ct.ID, segment); err != nil {
		s.respondError(c, notFound(err, "The contact is not in segment "+segment.String()+"."))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "contact_segment", "id": segment.String(), "contact_id": ct.ID.String(),
		"segment_id": segment.String(), "deleted": true})
}

type contactTopicJSON struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Subscription string `json:"subscription"`
}

func renderContactTopic(ct store.ContactTopic) contactTopicJSON {
	return contactTopicJSON{ID: ct.ID.String(), Name: ct.Name, Description: ct.Description, Subscription: ct.Subscription}
}

// listContactTopics lists every topic of the team with the contact's
// subscription to it (its choice, else the topic's default).
func (s *audienceAPI) listContactTopics(c *gin.Context) {
	ct, ok := s.contactByRef(c)
	if !ok {
		return
	}
	respondList(s.Server, c, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.ContactTopic, bool, error) {
		return s.svc.ContactTopics(ctx, team, ct.ID, p)
	}, renderContactTopic)
}

// updateContactTopics takes `[{"id","subscription"}]` (what Resend's SDKs
// send) or `{"topics": [...]}` (what its reference documents).
func (s *audienceAPI) updateContactTopics(c *gin.Context) {
	ct, ok := s.contactByRef(c)
	if !ok {
		return
	}
	body, err := readBody(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	var entries []topicChoiceJSON
	if err := json.Unmarshal(body, &entries); err != nil {
		var wrapped struct {
			Topics *[]topicChoiceJSON `json:"topics"`
		}
		if err := json.Unmarshal(body, &wrapped); err != nil {
			s.respondError(c, validation("The body must be a list of `{\"id\", \"subscription\"}` or an object with `topics`."))
			return
		}
		if wrapped.Topics == nil {
			s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `topics` field."))
			return
		}
		entries = *wrapped.Topics
	}
	choices, err := s.svc.UpdateContactTopics(c.Request.Context(), principal(c).TeamID, ct.ID, topicChoices(entries))
	if err != nil {
		s.respondError(c, refError(err))
		return
	}
	topics := make([]topicChoiceJSON, len(choices))
	for i, ch := range choices {
		topics[i] = topicChoiceJSON{ID: ch.TopicID.String(), Subscription: ch.Subscription}
	}
	c.JSON(http.StatusOK, gin.H{"object": "contact_topics", "id": ct.ID.String(), "contact_id": ct.ID.String(),
		"topics": topics})
}
