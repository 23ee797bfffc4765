package dashboard

import (
	"net/http"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/imports"
)

// audienceHandler serves the pages of contacts, contact imports, segments
// and topics (audience.go, contacts.go, contact_imports.go, segments.go,
// topics.go).
type audienceHandler struct {
	*Handler
	// svc reads and changes contacts, segments and topics.
	svc *audience.Service
	// imports queues contact imports and reads them back.
	imports *imports.Service
}

// routes adds the pages of contacts, contact imports, segments and
// topics. Every write goes through signedIn (session and CSRF token) and
// the audience service the API uses (internal/audience).
func (h *audienceHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/contacts", h.signedIn(h.contacts))
	m.Handle("POST /dashboard/contacts", h.signedIn(h.addContact))
	m.Handle("GET /dashboard/contact-imports", h.signedIn(h.contactImports))
	m.Handle("POST /dashboard/contact-imports", h.signedInUpload(h.uploadImport))
	m.Handle("GET /dashboard/contact-imports/{id}", h.signedIn(h.contactImport))
	m.Handle("GET /dashboard/contact-imports/{id}/progress", h.signedIn(h.contactImportJSON))
	m.Handle("GET /dashboard/contacts/{id}", h.signedIn(h.contact))
	m.Handle("POST /dashboard/contacts/{id}", h.signedIn(h.editContact))
	m.Handle("POST /dashboard/contacts/{id}/unsubscribe", h.signedIn(h.unsubscribeContact))
	m.Handle("GET /dashboard/contacts/{id}/delete", h.signedIn(h.deleteContactPage))
	m.Handle("POST /dashboard/contacts/{id}/delete", h.signedIn(h.deleteContact))
	m.Handle("GET /dashboard/segments", h.signedIn(h.segments))
	m.Handle("POST /dashboard/segments", h.signedIn(h.addSegment))
	m.Handle("GET /dashboard/segments/{id}", h.signedIn(h.segment))
	m.Handle("GET /dashboard/segments/{id}/delete", h.signedIn(h.deleteSegmentPage))
	m.Handle("POST /dashboard/segments/{id}/delete", h.signedIn(h.deleteSegment))
	m.Handle("GET /dashboard/topics", h.signedIn(h.topics))
	m.Handle("POST /dashboard/topics", h.signedIn(h.addTopic))
	m.Handle("GET /dashboard/topics/{id}", h.signedIn(h.topic))
	m.Handle("POST /dashboard/topics/{id}", h.signedIn(h.editTopic))
	m.Handle("GET /dashboard/topics/{id}/delete", h.signedIn(h.deleteTopicPage))
	m.Handle("POST /dashboard/topics/{id}/delete", h.signedIn(h.deleteTopic))
}
