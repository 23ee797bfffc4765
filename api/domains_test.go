package api_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
)

func (e *env) createDomain(key string, body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/domains", key, body)
	require.Equal(e.t, 201, r.status, string(r.raw))
	return r.body
}

func (e *env) setStatus(id, status string) {
	e.t.Helper()
	require.NoError(e.t, e.store.Domains.SetDomainStatus(context.Background(), uuid.MustParse(id), status, nil))
}

func TestDomainCreateAndRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.createDomain(e.keyA, map[string]any{"name": "Example.TEST", "region": "eu-west-1",
		"custom_return_path": "mail", "click_tracking": true, "tls": "enforced"})
	require.Equal(t, "domain", d["object"])
	require.Equal(t, "example.test", d["name"])
	require.Equal(t, "not_started", d["status"])
	require.Equal(t, "eu-west-1", d["region"])
	require.Equal(t, "mail", d["custom_return_path"])
	require.Equal(t, true, d["click_tracking"])
	require.Equal(t, false, d["open_tracking"])
	require.Equal(t, "enforced", d["tls"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, d["created_at"])

	recs := d["records"].([]any)
	require.Len(t, recs, 5, "click tracking adds the Tracking record")
	dkimRec := recs[0].(map[string]any)
	require.Equal(t, "DKIM", dkimRec["record"])
	require.Equal(t, "TXT", dkimRec["type"])
	require.Equal(t, "posthaste._domainkey", dkimRec["name"])
	require.Equal(t, "Auto", dkimRec["ttl"])
	require.Equal(t, "not_started", dkimRec["status"])
	value := dkimRec["value"].(string)
	require.True(t, strings.HasPrefix(value, "v=DKIM1; k=rsa; p="), value)
	require.NotContains(t, value, `"`, "whole and unquoted")
	require.NotContains(t, dkimRec, "priority")
	pub, err := x509.ParsePKIXPublicKey(mustBase64(t, strings.TrimPrefix(value, "v=DKIM1; k=rsa; p=")))
	require.NoError(t, err)
	require.Equal(t, 2048, pubBits(pub))

	require.Equal(t, map[string]any{"record": "SPF", "type": "MX", "name": "mail", "ttl": "Auto",
		"status": "not_started", "value": "bounce.posthaste.example", "priority": float64(10)}, recs[1])
	require.Equal(t, map[string]any{"record": "SPF", "type": "TXT", "name": "mail", "ttl": "Auto",
		"status": "not_started", "value": "v=spf1 include:_spf.posthaste.example ~all"}, recs[2])
	require.Equal(t, map[string]any{"record": "DMARC", "type": "TXT", "name": "_dmarc", "ttl": "Auto",
		"status": "not_started", "value": "v=DMARC1; p=none;"}, recs[3])
	require.Equal(t, map[string]any{"record": "Tracking", "type": "CNAME", "name": "links", "ttl": "Auto",
		"status": "not_started", "value": "track.posthaste.example"}, recs[4])
	require.Equal(t, "links", d["tracking_subdomain"])

	// The private key is sealed at rest.
	row, err := e.store.Domains.GetDomain(context.Background(), e.teamA, uuid.MustParse(d["id"].(string)))
	require.NoError(t, err)
	_, err = x509.ParsePKCS8PrivateKey(row.DKIMPrivateKey)
	require.Error(t, err, "the stored key is not plaintext PKCS #8")

	// Defaults.
	d2 := e.createDomain(e.keyA, map[string]any{"name": "bücher.test"})
	require.Equal(t, "xn--bcher-kva.test", d2["name"], "IDN names are stored in punycode")
	require.Equal(t, "us-east-1", d2["region"])
	require.Equal(t, "send", d2["custom_return_path"])
	require.Equal(t, "opportunistic", d2["tls"])
}

func TestDomainValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createDomain(e.keyA, map[string]any{"name": "example.test"})
	for name, tc := range map[string]struct {
		body   any
		status int
		err    string
	}{
		"no body":         {"", 422, "missing_required_field"},
		"not json":        {"{", 422, "validation_error"},
		"no name":         {map[string]any{"region": "eu-west-1"}, 422, "missing_required_field"},
		"empty name":      {map[string]any{"name": " "}, 422, "missing_required_field"},
		"name not string": {map[string]any{"name": 7}, 422, "validation_error"},
		"one label":       {map[string]any{"name": "localhost"}, 422, "validation_error"},
		"address":         {map[string]any{"name": "a@example.test"}, 422, "validation_error"},
		"bad label":       {map[string]any{"name": "exa_mple..test"}, 422, "validation_error"},
		"sandbox":         {map[string]any{"name": "posthaste.test"}, 422, "validation_error"},
		"region":          {map[string]any{"name": "b.test", "region": "mars-1"}, 422, "validation_error"},
		"tls":             {map[string]any{"name": "b.test", "tls": "required"}, 422, "validation_error"},
		"return path":     {map[string]any{"name": "b.test", "custom_return_path": "a.b"}, 422, "validation_error"},
		"tracking type":   {map[string]any{"name": "b.test", "open_tracking": "yes"}, 422, "validation_error"},
		"duplicate":       {map[string]any{"name": "EXAMPLE.test"}, 422, "validation_error"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do("POST", "/domains", e.keyA, tc.body)
			requireError(t, r, tc.status, tc.err)
		})
	}
	r := e.do("POST", "/domains", e.keyA, map[string]any{"name": "b.test", "region": "mars-1"})
	require.Contains(t, r.body["message"], "`region`")
	r = e.do("POST", "/domains", e.keyA, map[string]any{"name": "b.test", "open_tracking": "yes"})
	require.Contains(t, r.body["message"], "`open_tracking`")
	// Another team may add the same name (only one of them can publish its key).
	e.createDomain(e.keyB, map[string]any{"name": "example.test"})
}

func TestDomainReadUpdateVerifyDeleteAndIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.createDomain(e.keyA, map[string]any{"name": "example.test"})
	id := d["id"].(string)
	e.createDomain(e.keyB, map[string]any{"name": "other.test"})

	g := e.do("GET", "/domains/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status)
	require.Len(t, g.body["records"], 4)
	l := e.do("GET", "/domains", e.keyA, nil)
	require.Equal(t, 200, l.status)
	data := l.body["data"].([]any)
	require.Len(t, data, 1, "only the team's own domains")
	require.Equal(t, id, data[0].(map[string]any)["id"])
	require.NotContains(t, data[0], "records", "lists leave records out")
	requireError(t, e.do("GET", "/domains?limit=0", e.keyA, nil), 422, "validation_error")

	// Another team sees nothing of it.
	for _, m := range []struct{ method, path string }{
		{"GET", "/domains/" + id}, {"PATCH", "/domains/" + id}, {"POST", "/domains/" + id + "/verify"}, {"DELETE", "/domains/" + id},
	} {
		requireError(t, e.do(m.method, m.path, e.keyB, map[string]any{}), 404, "not_found")
		requireError(t, e.do(m.method, strings.Replace(m.path, id, "nope", 1), e.keyA, map[string]any{}), 422, "invalid_parameter")
	}

	p := e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"open_tracking": true, "tls": "enforced"})
	require.Equal(t, 200, p.status, string(p.raw))
	require.Equal(t, map[string]any{"object": "domain", "id": id}, p.body)
	g = e.do("GET", "/domains/"+id, e.keyA, nil)
	require.Equal(t, true, g.body["open_tracking"])
	require.Equal(t, false, g.body["click_tracking"])
	require.Equal(t, "enforced", g.body["tls"])
	requireError(t, e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"tls": "none"}), 422, "validation_error")
	requireError(t, e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"click_tracking": 1}), 422, "validation_error")

	v := e.do("POST", "/domains/"+id+"/verify", e.keyA, nil)
	require.Equal(t, 200, v.status, string(v.raw))
	require.Equal(t, map[string]any{"object": "domain", "id": id}, v.body)
	require.Equal(t, []string{id}, e.verify.verified)
	g = e.do("GET", "/domains/"+id, e.keyA, nil)
	require.Equal(t, "pending", g.body["status"], "a requested check shows at once")
	require.Equal(t, "pending", g.body["records"].([]any)[0].(map[string]any)["status"])

	del := e.do("DELETE", "/domains/"+id, e.keyA, nil)
	require.Equal(t, 200, del.status)
	require.Equal(t, map[string]any{"object": "domain", "id": id, "deleted": true}, del.body)
	require.Equal(t, []string{id}, e.verify.forgot)
	requireError(t, e.do("GET", "/domains/"+id, e.keyA, nil), 404, "not_found")
	requireError(t, e.do("DELETE", "/domains/"+id, e.keyA, nil), 404, "not_found")

	// Sending-only keys cannot manage domains.
	token, _, err := account.NewKey(context.Background(), e.store, e.teamA, nil, "send", store.PermissionSendingAccess)
	require.NoError(t, err)
	requireError(t, e.do("GET", "/domains", token, nil), 401, "restricted_api_key")
	requireError(t, e.do("POST", "/domains", token, map[string]any{"name": "x.test"}), 401, "restricted_api_key")
}

func TestSendRequiresVerifiedDomain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.createDomain(e.keyA, map[string]any{"name": "example.test"})
	id := d["id"].(string)
	send := func(key, from string) resp {
		return e.do("POST", "/emails", key, map[string]any{"from": from, "to": "someone@elsewhere.test",
			"subject": "hi", "text": "hi"})
	}
	r := send(e.keyA, "Shop <hello@example.test>")
	requireError(t, r, 403, "validation_error")
	require.Contains(t, r.body["message"], "example.test")
	r = send(e.keyA, "hello@unknown.test")
	requireError(t, r, 403, "validation_error")
	require.Contains(t, r.body["message"], "unknown.test")

	for status, ok := range map[string]bool{"pending": false, "partially_verified": false, "failed": false,
		"verified": true, "temporary_failure": true} {
		e.setStatus(id, status)
		r := send(e.keyA, "Shop <hello@example.test>")
		if ok {
			require.Equal(t, 200, r.status, "%s: %s", status, r.raw)
		} else {
			requireError(t, r, 403, "validation_error")
		}
	}
	e.setStatus(id, "verified")
	requireError(t, send(e.keyA, "hello@news.example.test"), 403, "validation_error") // a subdomain is its own domain
	requireError(t, send(e.keyB, "hello@example.test"), 403, "validation_error")      // another team's domain

	// A key limited to a domain sends only from it.
	other := e.createDomain(e.keyA, map[string]any{"name": "other.test"})
	e.setStatus(other["id"].(string), "verified")
	requireError(t, e.do("POST", "/api-keys", e.keyB, map[string]any{"name": "k", "permission": "sending_access",
		"domain_id": id}), 404, "not_found")
	k := e.do("POST", "/api-keys", e.keyA, map[string]any{"name": "k", "permission": "sending_access", "domain_id": id})
	require.Equal(t, 201, k.status, string(k.raw))
	scoped := k.body["token"].(string)
	require.Equal(t, 200, send(scoped, "hello@example.test").status)
	requireError(t, send(scoped, "hello@other.test"), 403, "validation_error")
	requireError(t, send(scoped, "onboarding@posthaste.test"), 403, "validation_error")
	require.Equal(t, 200, send(e.keyA, "hello@other.test").status)

	// Deleting the domain stops further sends from it.
	require.Equal(t, 200, e.do("DELETE", "/domains/"+id, e.keyA, nil).status)
	requireError(t, send(e.keyA, "hello@example.test"), 403, "validation_error")
	requireError(t, send(scoped, "hello@example.test"), 403, "validation_error")
}

func TestSuppressions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/suppressions", e.keyA, map[string]any{"email": "Gone@Example.test"})
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "suppression", r.body["object"])
	require.Equal(t, "gone@example.test", r.body["email"])
	require.Equal(t, "manual", r.body["reason"])
	require.Nil(t, r.body["email_id"])
	id := r.body["id"].(string)
	r2 := e.do("POST", "/suppressions", e.keyA, map[string]any{"email": "other@example.test"})
	require.Equal(t, 201, r2.status)

	requireError(t, e.do("POST", "/suppressions", e.keyA, map[string]any{}), 422, "missing_required_field")
	requireError(t, e.do("POST", "/suppressions", e.keyA, map[string]any{"email": "not an address"}), 422, "validation_error")
	requireError(t, e.do("POST", "/suppressions", e.keyA, map[string]any{"email": "A <a@example.test>"}), 422, "validation_error")
	requireError(t, e.do("POST", "/suppressions", e.keyA, map[string]any{"email": "bounced@posthaste.test"}), 422, "validation_error")
	requireError(t, e.do("POST", "/suppressions", e.keyA, map[string]any{"email": 5}), 422, "validation_error")

	l := e.do("GET", "/suppressions", e.keyA, nil)
	require.Equal(t, 200, l.status)
	require.Len(t, l.body["data"], 2)
	require.Equal(t, "other@example.test", l.body["data"].([]any)[0].(map[string]any)["email"], "newest first")
	l = e.do("GET", "/suppressions", e.keyB, nil)
	require.Len(t, l.body["data"], 0, "lists are per team")
	requireError(t, e.do("DELETE", "/suppressions/"+id, e.keyB, nil), 404, "not_found")
	requireError(t, e.do("DELETE", "/suppressions/gone@example.test", e.keyB, nil), 404, "not_found")
	requireError(t, e.do("DELETE", "/suppressions/garbage", e.keyA, nil), 422, "invalid_parameter")

	d := e.do("DELETE", "/suppressions/GONE@example.test", e.keyA, nil)
	require.Equal(t, 200, d.status, string(d.raw))
	require.Equal(t, true, d.body["deleted"])
	require.Equal(t, id, d.body["id"])
	requireError(t, e.do("DELETE", "/suppressions/"+id, e.keyA, nil), 404, "not_found")
	d = e.do("DELETE", "/suppressions/"+r2.body["id"].(string), e.keyA, nil)
	require.Equal(t, 200, d.status)
}

func mustBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

func pubBits(k any) int {
	if r, ok := k.(*rsa.PublicKey); ok {
		return r.N.BitLen()
	}
	return 0
}

// A server without a tracking host says, on a domain with tracking on,
// that its mail goes untracked (tracking_warning); with one, or with
// tracking off, nothing is said. Another team's domain is not shown.
func TestDomainTrackingWarning(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{records: &records.Config{BounceHost: "bounce.posthaste.example",
		SPFInclude: "_spf.posthaste.example"}})
	d := e.createDomain(e.keyA, map[string]any{"name": "tracked.test", "open_tracking": true})
	require.Equal(t, domains.NoTrackingHostWarning, d["tracking_warning"])
	for _, r := range d["records"].([]any) {
		require.NotEqual(t, "Tracking", r.(map[string]any)["record"], "no tracking host: no Tracking record")
	}
	id := d["id"].(string)
	g := e.do("GET", "/domains/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	require.Equal(t, domains.NoTrackingHostWarning, g.body["tracking_warning"])
	l := e.do("GET", "/domains", e.keyA, nil)
	require.Equal(t, 200, l.status, string(l.raw))
	require.Equal(t, domains.NoTrackingHostWarning, l.body["data"].([]any)[0].(map[string]any)["tracking_warning"])

	plain := e.createDomain(e.keyA, map[string]any{"name": "plain.test"})
	require.NotContains(t, plain, "tracking_warning")
	p := e.do("PATCH", "/domains/"+plain["id"].(string), e.keyA, map[string]any{"click_tracking": true})
	require.Equal(t, 200, p.status, string(p.raw))
	g = e.do("GET", "/domains/"+plain["id"].(string), e.keyA, nil)
	require.Equal(t, domains.NoTrackingHostWarning, g.body["tracking_warning"])
	p = e.do("PATCH", "/domains/"+id, e.keyA, map[string]any{"open_tracking": false})
	require.Equal(t, 200, p.status, string(p.raw))
	g = e.do("GET", "/domains/"+id, e.keyA, nil)
	require.NotContains(t, g.body, "tracking_warning", "tracking off")
	requireError(t, e.do("GET", "/domains/"+plain["id"].(string), e.keyB, nil), 404, "not_found")

	// With a tracking host (newEnv's), no warning.
	e2 := newEnv(t)
	d = e2.createDomain(e2.keyA, map[string]any{"name": "tracked.test", "open_tracking": true, "click_tracking": true})
	require.NotContains(t, d, "tracking_warning")
}
