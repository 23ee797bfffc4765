package api_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestEmailInsights checks that the insights computed at acceptance come
// back with GET /emails/{id}: an empty array for a clean email, and the
// findings (code, severity, message, fix) of one that has some, including
// those read from the sender domain's stored DMARC policy and tracking.
func TestEmailInsights(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/emails", e.keyA, sandboxSend)
	require.Equal(t, 200, r.status, string(r.raw))
	g := e.do("GET", "/emails/"+r.body["id"].(string), e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Contains(t, string(g.raw), `"insights":[]`)

	d := e.createDomain(e.keyA, map[string]any{"name": "example.test", "click_tracking": true})
	id := d["id"].(string)
	e.setStatus(id, "verified")
	require.NoError(t, e.store.Domains.SetDomainDMARCPolicy(context.Background(), uuid.MustParse(id), "none"))
	r = e.do("POST", "/emails", e.keyA, map[string]any{"from": "no-reply@example.test", "to": "someone@elsewhere.test",
		"subject": "RESET YOUR PASSWORD", "html": `<p>Reset it <a href="https://bit.ly/x1">here</a></p>`, "text": "",
		"attachments": []map[string]any{{"filename": "reset.html", "content": "PHA+aGk8L3A+"}}})
	require.Equal(t, 200, r.status, string(r.raw))
	g = e.do("GET", "/emails/"+r.body["id"].(string), e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	var got []string
	for _, f := range g.body["insights"].([]any) {
		m := f.(map[string]any)
		require.NotEmpty(t, m["message"])
		require.NotEmpty(t, m["fix"])
		require.Contains(t, []any{"info", "warning", "error"}, m["severity"])
		got = append(got, m["code"].(string))
	}
	require.Equal(t, []string{"no_text_alternative", "url_shortener", "tracking_on_sensitive_email",
		"dmarc_policy_none", "no_reply_without_reply_to", "risky_attachment", "all_caps_subject"}, got)

	// The list leaves them out; the domain's policy is reported by the store.
	l := e.do("GET", "/emails", e.keyA, nil)
	require.NotContains(t, l.body["data"].([]any)[0].(map[string]any), "insights")
	sd, err := e.store.Domains.GetDomain(context.Background(), e.teamA, uuid.MustParse(id))
	require.NoError(t, err)
	require.NotNil(t, sd.DMARCPolicy)
	require.Equal(t, "none", *sd.DMARCPolicy)
}
