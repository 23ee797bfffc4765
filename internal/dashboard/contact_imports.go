package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/store"
)

// maxUploadBody bounds an upload's request body: the importer's own file
// limit (50 MB by default) plus room for the other fields.
const maxUploadBody = 64 << 20

// importErrorsShown is how many failed rows an import's page lists.
const importErrorsShown = 20

type uploadKey struct{}

// signedInUpload is signedIn for a multipart form read as a stream, so a
// large file is never held in memory or spooled to disk: the form's first
// part must be its csrf field, read here for signedIn's check; next reads
// the remaining parts from mr in the order the form has them.
func (h *audienceHandler) signedInUpload(next func(w http.ResponseWriter, r *http.Request, se *store.Session, mr *multipart.Reader)) http.Handler {
	inner := h.signedIn(func(w http.ResponseWriter, r *http.Request, se *store.Session) {
		next(w, r, se, r.Context().Value(uploadKey{}).(*multipart.Reader))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxUploadBody)
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, "The form must be sent as multipart/form-data.", http.StatusBadRequest)
			return
		}
		var token string
		if p, err := mr.NextPart(); err == nil && p.FormName() == "csrf" {
			b, _ := io.ReadAll(io.LimitReader(p, 256))
			token = string(b)
		}
		// signedIn reads the token from PostForm, which is then not parsed again.
		r.PostForm = url.Values{"csrf": {token}}
		r.Form = r.PostForm
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), uploadKey{}, mr)))
	})
}

// importForm is what the upload form holds, kept when shown again.
type importForm struct {
	OnConflict string
	Segment    string
}

// importRow is an import in a list or on its page.
type importRow struct {
	store.ContactImport
	// Final is true once the import completed or failed.
	Final bool
	Class string // the badge's class
}

func importRowOf(imp store.ContactImport) importRow {
	r := importRow{ContactImport: imp, Class: "wait"}
	switch imp.Status {
	case store.ImportCompleted:
		r.Final, r.Class = true, "ok"
	case store.ImportFailed:
		r.Final, r.Class = true, "bad"
	}
	return r
}

type importsData struct {
	Imports  []importRow
	Segments []store.Segment
	Form     importForm
	Error    formError
}

func (h *audienceHandler) contactImports(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderImports(w, r, se, http.StatusOK, importsData{Form: importForm{OnConflict: store.ImportSkip}})
}

func (h *audienceHandler) renderImports(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d importsData) {
	ctx := r.Context()
	list, _, err := h.imports.Page(ctx, se.TeamID, "", store.Page{Limit: 20})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, imp := range list {
		d.Imports = append(d.Imports, importRowOf(imp))
	}
	if d.Segments, _, err = h.svc.ListSegments(ctx, se.TeamID, store.Page{Limit: 100}); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, status, "contact_imports", view{Title: "Import contacts", Nav: "contacts", Session: se, CSRF: se.CSRFToken, Data: d})
}

// uploadImport streams the uploaded CSV into the importer and opens the
// new import's page. The form sends on_conflict and segment before file.
func (h *audienceHandler) uploadImport(w http.ResponseWriter, r *http.Request, se *store.Session, mr *multipart.Reader) {
	var f importForm
	opts := imports.Options{}
	var file io.Reader
	for file == nil {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		switch p.FormName() {
		case "on_conflict":
			f.OnConflict = readField(p)
		case "segment":
			f.Segment = readField(p)
		case "file":
			if p.FileName() != "" {
				file = p
			}
		}
	}
	opts.OnConflict = f.OnConflict
	fail := func(status int, fe formError) {
		h.renderImports(w, r, se, status, importsData{Form: f, Error: fe})
	}
	if file == nil {
		fail(http.StatusUnprocessableEntity, formError{Field: "file", Message: "Choose a CSV file to import."})
		return
	}
	if f.Segment != "" {
		id, err := uuid.Parse(f.Segment)
		if err != nil {
			fail(http.StatusUnprocessableEntity, formError{Field: "segment", Message: "Choose one of the segments."})
			return
		}
		opts.Segments = []uuid.UUID{id}
	}
	imp, err := h.imports.Create(r.Context(), se.TeamID, file, opts)
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, imports.ErrFileTooLarge), errors.As(err, &mbe):
		fail(http.StatusRequestEntityTooLarge, formError{Field: "file", Message: "The file is too large: split it into smaller files."})
		return
	case errors.Is(err, imports.ErrTooManyRows):
		fail(http.StatusUnprocessableEntity, formError{Field: "file", Message: "The file has too many rows: split it into smaller files."})
		return
	}
	if fe, ok := asFormError(err); ok {
		fail(http.StatusUnprocessableEntity, fe)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("contact import queued", "team_id", se.TeamID, "import_id", imp.ID)
	http.Redirect(w, r, "/dashboard/contact-imports/"+imp.ID.String(), http.StatusSeeOther)
}

// readField reads a small form field.
func readField(p *multipart.Part) string {
	b, _ := io.ReadAll(io.LimitReader(p, 1024))
	return strings.TrimSpace(string(b))
}

type importData struct {
	Import importRow
	Errors []store.ImportRowError
	// Percent is the share of rows processed, 0 to 100.
	Percent int
}

func (h *audienceHandler) loadImport(w http.ResponseWriter, r *http.Request, se *store.Session) (importData, bool) {
	imp, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.ContactImport, error) {
		return h.imports.Get(r.Context(), se.TeamID, id)
	})
	if !ok {
		return importData{}, false
	}
	d := importData{Import: importRowOf(imp)}
	if imp.Counts.Total > 0 {
		d.Percent = min(100, imp.Counts.Processed*100/imp.Counts.Total)
	} else if d.Import.Final {
		d.Percent = 100
	}
	return d, true
}

// contactImport shows an import's progress; while it runs, a script
// (import-progress.js) polls contactImportJSON and reloads the page
// when it is over.
func (h *audienceHandler) contactImport(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := h.loadImport(w, r, se)
	if !ok {
		return
	}
	var err error
	if d.Errors, err = h.imports.Errors(r.Context(), se.TeamID, d.Import.ID, importErrorsShown); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "contact_import", view{Title: "Import " + d.Import.CreatedAt.UTC().Format("2006-01-02 15:04"),
		Nav: "contacts", Session: se, CSRF: se.CSRFToken, Data: d})
}

// contactImportJSON is an import's progress for the page's script.
func (h *audienceHandler) contactImportJSON(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d, ok := h.loadImport(w, r, se)
	if !ok {
		return
	}
	c := d.Import.Counts
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": d.Import.Status, "final": d.Import.Final, "percent": d.Percent,
		"total": c.Total, "processed": c.Processed, "created": c.Created, "updated": c.Updated, "skipped": c.Skipped,
		"failed": c.Failed})
}
