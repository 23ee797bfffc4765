package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/store"
)

// maxImportErrors is how many failed rows GET /contacts/imports/:id shows.
const maxImportErrors = 100

// maxImportField bounds the form fields of an upload other than the file.
const maxImportField = 64 << 10

// contactImportJSON is an import as Resend renders it, plus Posthaste's
// `counts.processed`, `errors` (the first failed rows, on GET of one
// import) and `error` (why a failed import failed).
type contactImportJSON struct {
	Object      string                 `json:"object"`
	ID          string                 `json:"id"`
	Status      string                 `json:"status"`
	CreatedAt   string                 `json:"created_at"`
	CompletedAt *string                `json:"completed_at"`
	Counts      contactImportCounts    `json:"counts"`
	Errors      []store.ImportRowError `json:"errors,omitempty"`
	Error       string                 `json:"error,omitempty"`
}

type contactImportCounts struct {
	Total     int `json:"total"`
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Skipped   int `json:"skipped"`
	Failed    int `json:"failed"`
	Processed int `json:"processed"`
}

func renderContactImport(ci store.ContactImport) contactImportJSON {
	return contactImportJSON{Object: "contact_import", ID: ci.ID.String(), Status: ci.Status,
		CreatedAt: formatTime(ci.CreatedAt), CompletedAt: formatTimePtr(ci.CompletedAt),
		Counts: contactImportCounts{Total: ci.Counts.Total, Created: ci.Counts.Created, Updated: ci.Counts.Updated,
			Skipped: ci.Counts.Skipped, Failed: ci.Counts.Failed, Processed: ci.Counts.Processed},
		Error: ci.Error}
}

// importError maps the import service's limits to the API's errors.
func (s *audienceAPI) importError(err error) error {
	maxBytes, maxRows := s.imports.Limits()
	switch {
	case errors.Is(err, imports.ErrFileTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, nameValidation,
			fmt.Sprintf("The `file` is larger than the limit of %d MB.", maxBytes>>20))
	case errors.Is(err, imports.ErrTooManyRows):
		return errorf(http.StatusUnprocessableEntity, nameValidation,
			fmt.Sprintf("The `file` has more than %d rows, the most one import may have.", maxRows))
	}
	return err
}

// createContactImport answers POST /contacts/imports: a multipart form
// with the CSV as `file` and the optional `column_map`, `on_conflict`,
// `segments` and `topics` as JSON text. The parts may come in any order,
// so the file is spooled to a temporary file (never held in memory)
// until the other fields are read.
func (s *audienceAPI) createContactImport(c *gin.Context) {
	ctx := c.Request.Context()
	mr, err := c.Request.MultipartReader()
	if err != nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The request must be multipart/form-data with the CSV in a `file` field."))
		return
	}
	maxBytes, _ := s.imports.Limits()
	var (
		file   *os.File
		fields = map[string]string{}
	)
	defer func() {
		if file != nil {
			file.Close()
			os.Remove(file.Name())
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.respondError(c, s.uploadError(&bodyError{err}))
			return
		}
		name := part.FormName()
		switch name {
		case "file":
			if file != nil {
				s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation, "Send one `file` only."))
				return
			}
			if file, err = spool(part, maxBytes); err != nil {
				s.respondError(c, s.importError(s.uploadError(err)))
				return
			}
		case "column_map", "on_conflict", "segments", "topics":
			b, err := io.ReadAll(io.LimitReader(bodyReader{part}, maxImportField+1))
			if err != nil {
				s.respondError(c, s.uploadError(err))
				return
			}
			if len(b) > maxImportField {
				s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
					"The `"+name+"` field is too long."))
				return
			}
			fields[name] = string(b)
		default: // unknown fields are ignored, as unknown JSON fields are
			if _, err := io.Copy(io.Discard, bodyReader{part}); err != nil {
				s.respondError(c, s.uploadError(err))
				return
			}
		}
	}
	if file == nil {
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `file` field."))
		return
	}
	var opts imports.Options
	if opts.ColumnMap, err = imports.ParseColumnMap(fields["column_map"]); err != nil {
		s.respondError(c, err)
		return
	}
	opts.OnConflict = fields["on_conflict"]
	if opts.Segments, err = imports.ParseSegments(fields["segments"]); err != nil {
		s.respondError(c, err)
		return
	}
	if opts.Topics, err = imports.ParseTopics(fields["topics"]); err != nil {
		s.respondError(c, err)
		return
	}
	imp, err := s.imports.Create(ctx, principal(c).TeamID, bufio.NewReaderSize(file, 64<<10), opts)
	if err != nil {
		s.respondError(c, s.importError(err))
		return
	}
	c.PureJSON(http.StatusCreated, gin.H{"object": "contact_import", "id": imp.ID.String()})
}

// spool copies the file part to a temporary file, at most maxBytes, and
// rewinds it. The caller closes and removes the file.
func spool(part *multipart.Part, maxBytes int64) (*os.File, error) {
	f, err := os.CreateTemp("", "posthaste-import-*.csv")
	if err != nil {
		return nil, fmt.Errorf("spooling the upload: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(bodyReader{part}, maxBytes+1))
	if err == nil && n > maxBytes {
		err = imports.ErrFileTooLarge
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// bodyError is a failure to read the request body: a malformed multipart
// body or a client gone midway.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the upload: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// bodyReader marks the read errors of r as *bodyError.
type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err}
	}
	return n, err
}

// uploadError turns a body that could not be read into a 422; the
// limits and local failures (the temporary file) pass as they are.
func (s *audienceAPI) uploadError(err error) error {
	var be *bodyError
	if errors.As(err, &be) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errorf(http.StatusUnprocessableEntity, nameValidation, "The multipart/form-data body is malformed.")
	}
	return err
}

func (s *audienceAPI) getContactImport(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	team := principal(c).TeamID
	imp, err := s.imports.Get(c.Request.Context(), team, id)
	if err != nil {
		s.respondError(c, notFound(err, "Contact import not found."))
		return
	}
	out := renderContactImport(imp)
	if imp.Counts.Failed > 0 {
		if out.Errors, err = s.imports.Errors(c.Request.Context(), team, id, maxImportErrors); err != nil {
			s.respondError(c, err)
			return
		}
	}
	c.PureJSON(http.StatusOK, out)
}

// listContactImports answers GET /contacts/imports, with Resend's
// `status` filter.
func (s *audienceAPI) listContactImports(c *gin.Context) {
	status := c.Query("status")
	switch status {
	case "", store.ImportQueued, store.ImportInProgress, store.ImportCompleted, store.ImportFailed:
	default:
		s.respondError(c, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The `status` parameter must be queued, in_progress, completed or failed."))
		return
	}
	respondList(s.Server, c, paged, func(ctx context.Context, team uuid.UUID, p store.Page) ([]store.ContactImport, bool, error) {
		return s.imports.Page(ctx, team, status, p)
	}, renderContactImport)
}
