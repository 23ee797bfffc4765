package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/workflows"
)

// uploadImport posts a CSV to POST /contacts/imports with the form fields
// and returns the import's id.
func (c apiClient) uploadImport(csv string, fields map[string]string) string {
	c.t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		require.NoError(c.t, w.WriteField(k, v))
	}
	fw, err := w.CreateFormFile("file", "contacts.csv")
	require.NoError(c.t, err)
	_, err = io.WriteString(fw, csv)
	require.NoError(c.t, err)
	require.NoError(c.t, w.Close())
	req, err := http.NewRequest("POST", c.base+"/contacts/imports", &b)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", w.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	require.Equal(c.t, 201, res.StatusCode, string(raw))
	var out map[string]any
	require.NoError(c.t, json.Unmarshal(raw, &out))
	return out["id"].(string)
}

// waitImport polls an import until it ends and returns it.
func (c apiClient) waitImport(id string) map[string]any {
	c.t.Helper()
	return c.waitEnded("/contacts/imports/"+id, "import "+id)
}

// waitEnded polls the object at path until its status is completed or
// failed and returns it; what names it in the failure.
func (c apiClient) waitEnded(path, what string) map[string]any {
	c.t.Helper()
	var last map[string]any
	eventually(c.t, 90*time.Second, func() error {
		status, r := c.do("GET", path, nil)
		require.Equal(c.t, 200, status, r)
		last = r
		if r["status"] != "completed" && r["status"] != "failed" {
			return fmt.Errorf("%s did not end; last: %v", what, r)
		}
		return nil
	})
	return last
}

// importCSV is n rows of contacts u<i>@example.com with the first name
// given, and bad addresses on every row i where bad(i).
func importCSV(n int, first string, bad func(int) bool) string {
	var b strings.Builder
	b.WriteString("email,first_name,plan\n")
	for i := range n {
		if bad(i) {
			fmt.Fprintf(&b, "bad-address-%d,%s,pro\n", i, first)
			continue
		}
		fmt.Fprintf(&b, "u%d@example.com,%s,pro\n", i, first)
	}
	return b.String()
}

// TestDevContactImport uploads CSVs through the API of `posthaste dev` and
// lets the real ContactImport workflow apply them: counts, per-row errors
// and contacts as the API shows them; a re-upload with upsert updates;
// and an import whose first chunks were applied by a worker that died
// before the workflow learned of it completes with exact counts after a
// restart.
func TestDevContactImport(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	env := dbDevEnv(t, dbURL)
	// The test makes bursts of requests (uploads, polls, reads) that a
	// fast import can bring above the default 10 a second; the rate limit
	// is not what it tests.
	env["POSTHASTE_DEFAULT_RATE_LIMIT"] = "1000"
	dev := startDev(t, env)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}

	status, body := c.do("POST", "/contact-properties", map[string]any{"key": "plan", "type": "string"})
	require.Equal(t, 201, status, body)
	status, seg := c.do("POST", "/segments", map[string]any{"name": "Imported"})
	require.Equal(t, 201, status, seg)

	const rows = 12_000 // three chunks
	bad := func(i int) bool { return i%1000 == 7 }
	id := c.uploadImport(importCSV(rows, "Ann", bad), map[string]string{"segments": `["` + seg["id"].(string) + `"]`})
	imp := c.waitImport(id)
	require.Equal(t, "completed", imp["status"], imp)
	require.NotNil(t, imp["completed_at"])
	require.Equal(t, map[string]any{"total": float64(rows), "created": float64(rows - 12), "updated": 0.0,
		"skipped": 0.0, "failed": 12.0, "processed": float64(rows)}, imp["counts"])
	errs := imp["errors"].([]any)
	require.Len(t, errs, 12)
	require.Equal(t, map[string]any{"row": 9.0, "email": "bad-address-7",
		"reason": `"bad-address-7" is not an email address.`}, errs[0], "the header is row 1")
	status, ct := c.do("GET", "/contacts/u1@example.com", nil)
	require.Equal(t, 200, status, ct)
	require.Equal(t, "Ann", ct["first_name"])
	require.Equal(t, map[string]any{"plan": "pro"}, ct["properties"])
	status, members := c.do("GET", "/segments/"+seg["id"].(string)+"/contacts?limit=1", nil)
	require.Equal(t, 200, status, members)
	require.Len(t, members["data"], 1)
	require.Equal(t, true, members["has_more"])

	hostPort := "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]
	saveWorkflowHistory(t, hostPort, workflows.ContactImportWorkflowID(id), "contactimport.json", 40)

	// The same file again: skipped by default, updated with upsert.
	again := c.waitImport(c.uploadImport(importCSV(100, "Bea", bad), nil))
	require.Equal(t, 99.0, again["counts"].(map[string]any)["skipped"], again) // and row 9 failed
	up := c.waitImport(c.uploadImport(importCSV(100, "Bea", bad), map[string]string{"on_conflict": "upsert"}))
	require.Equal(t, 99.0, up["counts"].(map[string]any)["updated"], up)
	status, ct = c.do("GET", "/contacts/u1@example.com", nil)
	require.Equal(t, 200, status, ct)
	require.Equal(t, "Bea", ct["first_name"])
	status, list := c.do("GET", "/contacts/imports", nil)
	require.Equal(t, 200, status, list)
	require.Len(t, list["data"], 3)

	// Resumption: with the process down, an import is committed and its
	// first two chunks applied, as by a worker that died before its
	// workflow recorded them. After the restart the workflow applies every
	// chunk; those already done count once.
	dev.stop(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	defer st.Close()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	var team uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT team_id FROM contact_import WHERE id = $1`, id).Scan(&team))
	conn.Close(ctx)
	svc := imports.New(imports.Config{ChunkRows: 1000}, st)
	resumed, err := svc.Create(ctx, team, strings.NewReader(importCSV(5000, "Cy", func(int) bool { return false })),
		imports.Options{OnConflict: store.ImportUpsert})
	require.NoError(t, err)
	for seq := range 2 {
		_, err := st.Audience.ApplyImportChunk(ctx, resumed.ID, seq)
		require.NoError(t, err)
	}
	dev = startDev(t, env)
	defer dev.stop(t)
	c.base = dev.base
	imp = c.waitImport(resumed.ID.String())
	require.Equal(t, "completed", imp["status"], imp)
	// u0 to u4999 exist but for the five bad rows of the first file.
	require.Equal(t, map[string]any{"total": 5000.0, "created": 5.0, "updated": 4995.0,
		"skipped": 0.0, "failed": 0.0, "processed": 5000.0}, imp["counts"])
	status, ct = c.do("GET", "/contacts/u4999@example.com", nil)
	require.Equal(t, 200, status, ct)
	require.Equal(t, "Cy", ct["first_name"])
}
