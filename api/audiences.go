package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/posthaste/posthaste/internal/store"
)

// The legacy audiences: Resend's older API, which its Python SDK and older
// Node SDKs call for audiences and its current Node and Go SDKs still call
// for contacts whenever `audienceId` is passed. An audience is a segment:
// /audiences and /audiences/:id are the segment routes rendered as
// `"object": "audience"`, and /audiences/:id/contacts[/:contact_id] are the
// contact routes confined to the members of that segment. Another team's
// audience is a 404, as its segment is.

// audiencesAPI serves the legacy routes with the audience area's handlers.
type audiencesAPI struct{ *audienceAPI }

const audienceKind segmentKind = "audience"

func (s audiencesAPI) createAudience(c *gin.Context) { createSegmentAs(s.audienceAPI, c, audienceKind) }
func (s audiencesAPI) listAudiences(c *gin.Context)  { listSegmentsAs(s.audienceAPI, c, audienceKind) }
func (s audiencesAPI) getAudience(c *gin.Context)    { getSegmentAs(s.audienceAPI, c, audienceKind) }
func (s audiencesAPI) deleteAudience(c *gin.Context) { deleteSegmentAs(s.audienceAPI, c, audienceKind) }

// listAudienceContacts lists the audience's contacts, as
// GET /segments/:id/contacts does.
func (s audiencesAPI) listAudienceContacts(c *gin.Context) {
	listContactsOf(s.audienceAPI, c, audienceKind.missing())
}

// createAudienceContact creates a contact in the audience: the body of
// POST /contacts without `segments` and `topics`. An address the team
// already has, on a contact outside the audience, adds that contact to it
// (its fields unchanged, 201 with its id); on one already in it, a 409.
func (s audiencesAPI) createAudienceContact(c *gin.Context) {
	audienceID, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
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
	ct, _, err := s.svc.CreateContactIn(c.Request.Context(), principal(c).TeamID, audienceID, in)
	if err != nil {
		s.respondError(c, contactCreateError(audienceMissing(err)))
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "contact", "id": ct.ID.String()})
}

// audienceMissing words the *store.RefError of a segment the team does not
// have, which on these routes is the audience of the path, as a 404; other
// errors pass unchanged.
func audienceMissing(err error) error {
	var re *store.RefError
	if errors.As(err, &re) && re.What == "segment" {
		return errorf(http.StatusNotFound, nameNotFound, audienceKind.missing())
	}
	return err
}

func (s audiencesAPI) getAudienceContact(c *gin.Context) {
	getContactAt(s.audienceAPI, c, audienceContactRef)
}
func (s audiencesAPI) updateAudienceContact(c *gin.Context) {
	updateContactAt(s.audienceAPI, c, audienceContactRef)
}
func (s audiencesAPI) deleteAudienceContact(c *gin.Context) {
	deleteContactAt(s.audienceAPI, c, audienceContactRef)
}

// audienceContactRef reads /audiences/:id/contacts/:contact_id: the
// contact (by id or address) confined to the audience :id.
func audienceContactRef(c *gin.Context) (store.ContactRef, error) {
	audienceID, err := pathID(c)
	if err != nil {
		return store.ContactRef{}, err
	}
	ref, err := parseContactRef(c.Param("contact_id"))
	if err != nil {
		return store.ContactRef{}, err
	}
	ref.Segment = &audienceID
	return ref, nil
}
