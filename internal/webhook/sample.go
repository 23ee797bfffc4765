package webhook

import (
	"strings"
	"time"
)

// Sample is the payload of a test event of type typ (one of Types), with
// made-up data shaped like the real event's.
func Sample(typ string, now time.Time) map[string]any {
	at := now.UTC().Format("2006-01-02T15:04:05.000000Z")
	var data map[string]any
	switch {
	case strings.HasPrefix(typ, "domain."):
		data = map[string]any{"id": "00000000-0000-7000-8000-000000000000", "name": "example.com",
			"status": "not_started", "region": "us-east-1", "created_at": at}
	case strings.HasPrefix(typ, "contact."):
		data = map[string]any{"id": "00000000-0000-7000-8000-000000000000", "email": "steve@example.com",
			"first_name": "Steve", "last_name": "Wozniak", "unsubscribed": false, "segment_ids": []string{},
			"created_at": at, "updated_at": at}
		if typ == "contact.topics.updated" {
			data["topics"] = []map[string]string{{"id": "00000000-0000-7000-8000-000000000001", "subscription": "opt_out"}}
		}
	case strings.HasPrefix(typ, "topic."):
		data = map[string]any{"id": "00000000-0000-7000-8000-000000000000", "name": "Product updates",
			"description": "News about the product", "default_subscription": "opt_in", "visibility": "public",
			"created_at": at, "updated_at": at}
	case strings.HasPrefix(typ, "suppression."):
		data = map[string]any{"id": "00000000-0000-7000-8000-000000000000", "email": "steve@example.com",
			"origin": "manual", "source_id": nil, "created_at": at}
	case typ == "email.received":
		// Resend's metadata-only payload: the bodies and attachments are
		// fetched through GET /emails/receiving/{id}.
		data = map[string]any{"email_id": "00000000-0000-7000-8000-000000000000", "created_at": at,
			"from": "Steve <steve@example.org>", "to": []string{"support@example.com"}, "cc": []string{},
			"bcc": []string{}, "received_for": []string{"support@example.com"},
			"message_id": "<111-222-333@mail.example.org>", "subject": "Test event",
			"attachments": []map[string]any{{"id": "00000000-0000-7000-8000-000000000001",
				"filename": "invoice.pdf", "content_type": "application/pdf",
				"content_disposition": "attachment", "content_id": nil}}}
	default:
		data = map[string]any{"email_id": "00000000-0000-7000-8000-000000000000", "created_at": at,
			"from": "Acme <onboarding@posthaste.test>", "to": []string{"delivered@posthaste.test"},
			"subject": "Test event", "message_id": "00000000-0000-7000-8000-000000000000@posthaste.test",
			"tags": map[string]string{"category": "test"}}
		switch typ {
		case "email.bounced":
			data["bounce"] = map[string]any{"type": "Permanent", "subType": "General",
				"message":        "550 5.1.1 The email account does not exist.",
				"diagnosticCode": []string{"550 5.1.1 The email account does not exist."}}
		case "email.failed":
			data["failed"] = map[string]any{"reason": "The message could not be built."}
		case "email.clicked":
			data["click"] = map[string]any{"link": "https://example.com", "timestamp": at,
				"ipAddress": "192.0.2.1", "userAgent": "Mozilla/5.0"}
		}
	}
	return map[string]any{"type": typ, "created_at": at, "data": data}
}
