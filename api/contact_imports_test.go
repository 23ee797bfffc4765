package api_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// importForm is a multipart body with the file first, then the fields, as
// Resend's Go SDK sends it.
func importForm(t *testing.T, csv string, fields map[string]string) (*bytes.Buffer, map[string]string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	fw, err := w.CreateFormFile("file", "contacts.csv")
	require.NoError(t, err)
	_, err = fw.Write([]byte(csv))
	require.NoError(t, err)
	for k, v := range fields {
		require.NoError(t, w.WriteField(k, v))
	}
	require.NoError(t, w.Close())
	return &b, map[string]string{"Content-Type": w.FormDataContentType()}
}

func TestContactImportsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	seg := e.do("POST", "/segments", e.keyA, map[string]any{"name": "Imported"})
	require.Equal(t, 201, seg.status, string(seg.raw))

	body, h := importForm(t, "email,first_name\nann@example.com,Ann\nnope,Bob\n", map[string]string{
		"on_conflict": "upsert",
		"segments":    `[{"id":"` + seg.body["id"].(string) + `"}]`,
	})
	before := e.notify.n.Load()
	r := e.doH("POST", "/contacts/imports", e.keyA, body, h)
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "contact_import", r.body["object"])
	id := r.body["id"].(string)
	require.Greater(t, e.notify.n.Load(), before, "the outbox is woken")

	got := e.do("GET", "/contacts/imports/"+id, e.keyA, nil)
	require.Equal(t, 200, got.status, string(got.raw))
	require.Equal(t, "queued", got.body["status"])
	require.Nil(t, got.body["completed_at"])
	require.Equal(t, map[string]any{"total": 2.0, "created": 0.0, "updated": 0.0, "skipped": 0.0, "failed": 0.0,
		"processed": 0.0}, got.body["counts"])

	// The workflow's steps, as the worker runs them.
	_, err := e.store.Audience.ApplyImportChunk(ctx, uuid.MustParse(id), 0)
	require.NoError(t, err)
	_, err = e.store.Audience.FinishContactImport(ctx, uuid.MustParse(id), "")
	require.NoError(t, err)
	got = e.do("GET", "/contacts/imports/"+id, e.keyA, nil)
	require.Equal(t, "completed", got.body["status"])
	require.NotNil(t, got.body["completed_at"])
	require.Equal(t, 1.0, got.body["counts"].(map[string]any)["created"])
	require.Equal(t, []any{map[string]any{"row": 3.0, "email": "nope", "reason": `"nope" is not an email address.`}},
		got.body["errors"])
	ct := e.do("GET", "/contacts/ann@example.com", e.keyA, nil)
	require.Equal(t, 200, ct.status, string(ct.raw))
	require.Equal(t, "Ann", ct.body["first_name"])

	list := e.do("GET", "/contacts/imports?status=completed&limit=10", e.keyA, nil)
	require.Equal(t, 200, list.status, string(list.raw))
	require.Len(t, list.body["data"], 1)
	require.Equal(t, id, list.body["data"].([]any)[0].(map[string]any)["id"])
	requireError(t, e.do("GET", "/contacts/imports?status=done", e.keyA, nil), 422, "validation_error")

	// Team B sees none of it.
	requireError(t, e.do("GET", "/contacts/imports/"+id, e.keyB, nil), 404, "not_found")
	list = e.do("GET", "/contacts/imports", e.keyB, nil)
	require.Equal(t, 200, list.status)
	require.Empty(t, list.body["data"])
}

func TestContactImportsAPIRejectsBadUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	post := func(csv string, fields map[string]string) resp {
		body, h := importForm(t, csv, fields)
		return e.doH("POST", "/contacts/imports", e.keyA, body, h)
	}
	r := post("mail\na@example.com\n", nil)
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], "`email` column")
	requireError(t, post("email\na@example.com\n", map[string]string{"column_map": "{"}), 422, "validation_error")
	requireError(t, post("email\na@example.com\n", map[string]string{"on_conflict": "merge"}), 422, "validation_error")
	r = post("email\na@example.com\n", map[string]string{"segments": `[{"id":"` + uuid.NewString() + `"}]`})
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], "Segment")
	requireError(t, post("email\na@example.com\n", map[string]string{
		"topics": `[{"id":"` + uuid.NewString() + `","subscription":"opt_in"}]`}), 422, "validation_error")
	requireError(t, e.do("POST", "/contacts/imports", e.keyA, map[string]any{"file": "x"}), 422, "validation_error")

	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	require.NoError(t, w.WriteField("on_conflict", "skip"))
	require.NoError(t, w.Close())
	requireError(t, e.doH("POST", "/contacts/imports", e.keyA, &b,
		map[string]string{"Content-Type": w.FormDataContentType()}), 422, "missing_required_field")

	truncated := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.csv\"\r\n\r\nemail\na@example.com\n"
	r = e.doH("POST", "/contacts/imports", e.keyA, truncated, map[string]string{"Content-Type": "multipart/form-data; boundary=b"})
	requireError(t, r, 422, "validation_error")
	require.Contains(t, r.body["message"], "malformed")

	requireError(t, e.do("GET", "/contacts/imports/nope", e.keyA, nil), 422, "invalid_parameter")
	list := e.do("GET", "/contacts/imports", e.keyA, nil)
	require.Empty(t, list.body["data"], "no rejected upload left an import")
}

// TestResendNodeSDKContactImports runs testdata/resend-node/imports.cjs:
// Resend's official Node SDK creates, gets and lists a contact import.
func TestResendNodeSDKContactImports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "imports.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	require.Contains(t, string(out), "ok")
}

// A file over 50 MB is refused with 413 while it streams in, and leaves
// no import.
func TestContactImportsAPIFileTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, pw := io.Pipe()
	w := multipart.NewWriter(pw)
	go func() {
		fw, err := w.CreateFormFile("file", "big.csv")
		if err == nil {
			_, err = io.WriteString(fw, "email,notes\n")
		}
		row := "someone@example.com," + strings.Repeat("x", 1000) + "\n"
		for written := 0; err == nil && written <= 51<<20; written += len(row) {
			_, err = io.WriteString(fw, row)
		}
		if err == nil {
			err = w.Close()
		}
		pw.CloseWithError(err)
	}()
	r := e.doH("POST", "/contacts/imports", e.keyA, pr, map[string]string{"Content-Type": w.FormDataContentType()})
	requireError(t, r, 413, "validation_error")
	require.Contains(t, r.body["message"], "50 MB")
	list := e.do("GET", "/contacts/imports", e.keyA, nil)
	require.Empty(t, list.body["data"])
}
