// Package datareq implements data subject requests: for one email address
// in one team, an export of everything Posthaste holds about it (a zip
// archive, stored sealed in PostgreSQL until it expires) or its erasure.
// The API and the dashboard create, list, read and download requests
// through Service; the DataRequest workflow's activities (Activities)
// build exports (Service.BuildExport) and erase (store.EraseSubject and a
// SubjectEraser for Temporal histories). The activities of the Retention
// workflow (Retention), which delete what is past its retention, are here
// too: both are data deletion.
//
// The request keeps its address sealed with the master key (associated
// data: the request id), and a completed erasure clears it.
package datareq

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
)

// Errors of Create; the API maps them to validation errors.
var (
	ErrInvalidAddress = errors.New("invalid address")
	ErrInvalidType    = errors.New("invalid type")
	// ErrNoKeys: the process has no master key, so it can neither seal an
	// address nor open an archive.
	ErrNoKeys = errors.New("no master key")
)

// DefaultArchiveTTL is how long an export's archive can be downloaded.
const DefaultArchiveTTL = 7 * 24 * time.Hour

// chunkSize is the most plaintext in one sealed archive chunk.
const chunkSize = 1 << 20

// Notifier wakes the outbox dispatcher after a request was queued.
type Notifier interface{ Notify() }

// Config wires a Service.
type Config struct {
	// Keys seals addresses and archives; nil refuses new requests and
	// downloads (ErrNoKeys).
	Keys *seal.Box
	// Outbox, when set, is notified after a request was stored.
	Outbox Notifier
	// ArchiveTTL is how long archives are kept; 0 → DefaultArchiveTTL.
	ArchiveTTL time.Duration
}

// Service creates, reads and builds data requests.
type Service struct {
	cfg   Config
	store *store.Store
}

// New returns a Service.
func New(cfg Config, st *store.Store) *Service {
	if cfg.ArchiveTTL <= 0 {
		cfg.ArchiveTTL = DefaultArchiveTTL
	}
	return &Service{cfg: cfg, store: st}
}

// ParseAddress checks an address a request names and returns it
// lower-cased: a bare addr-spec, no display name.
func ParseAddress(raw string) (string, error) {
	a, err := address.ParseBare(raw)
	if err != nil {
		return "", ErrInvalidAddress
	}
	return address.Normalize(a.Addr()), nil
}

// Create queues a request of type typ (store.DataRequestExport or
// store.DataRequestErasure) for address in the team and records actor
// (an audit entry with the actor and client filled in) as
// data_request.create in the same transaction.
func (s *Service) Create(ctx context.Context, teamID uuid.UUID, typ, address string, actor audit.Entry) (store.DataRequest, error) {
	if typ != store.DataRequestExport && typ != store.DataRequestErasure {
		return store.DataRequest{}, ErrInvalidType
	}
	addr, err := ParseAddress(address)
	if err != nil {
		return store.DataRequest{}, err
	}
	if s.cfg.Keys == nil {
		return store.DataRequest{}, ErrNoKeys
	}
	id, err := uuid.NewV7()
	if err != nil {
		return store.DataRequest{}, err
	}
	sealed, err := s.cfg.Keys.Seal([]byte(addr), id[:])
	if err != nil {
		return store.DataRequest{}, fmt.Errorf("sealing address: %w", err)
	}
	r := store.DataRequest{ID: id, TeamID: teamID, Type: typ, Status: store.DataRequestQueued, Address: sealed}
	actor.Action, actor.Outcome = audit.DataRequestCreate, audit.Success
	detail, _ := json.Marshal(map[string]string{"type": typ})
	actor.Detail = string(detail)
	if err := s.store.Privacy.CreateDataRequest(ctx, r, actor); err != nil {
		return store.DataRequest{}, err
	}
	if s.cfg.Outbox != nil {
		s.cfg.Outbox.Notify()
	}
	return s.store.Privacy.DataRequest(ctx, teamID, id)
}

// Get returns the team's request id.
func (s *Service) Get(ctx context.Context, teamID, id uuid.UUID) (store.DataRequest, error) {
	return s.store.Privacy.DataRequest(ctx, teamID, id)
}

// List returns a page of the team's requests, newest first.
func (s *Service) List(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.DataRequest, bool, error) {
	return s.store.Privacy.ListDataRequests(ctx, teamID, p)
}

// HasArchive reports whether the team's request id has an archive to
// download (WriteArchive then writes it).
func (s *Service) HasArchive(ctx context.Context, teamID, id uuid.UUID) (bool, error) {
	n, err := s.store.Privacy.DataRequestArchiveChunks(ctx, teamID, id)
	return n > 0, err
}

// Address opens the sealed address of a request; "" once an erasure
// cleared it.
func (s *Service) Address(r store.DataRequest) (string, error) {
	if r.Address == nil {
		return "", nil
	}
	if s.cfg.Keys == nil {
		return "", ErrNoKeys
	}
	b, err := s.cfg.Keys.Open(r.Address, r.ID[:])
	if err != nil {
		return "", fmt.Errorf("opening address of data request %s: %w", r.ID, err)
	}
	return string(b), nil
}

// ArchiveReady reports whether r has an archive to download at now: a
// completed export whose archive has not expired (the retention sweep
// removes it after that, and an erasure of the same address at once,
// clearing ExpiresAt).
func ArchiveReady(r store.DataRequest, now time.Time) bool {
	return r.Type == store.DataRequestExport && r.Status == store.DataRequestCompleted && r.ExpiresAt != nil &&
		now.Before(*r.ExpiresAt)
}

// WriteArchive writes the team's request's archive to w, one chunk in
// memory at a time. store.ErrNotFound when there is none (any more).
func (s *Service) WriteArchive(ctx context.Context, teamID, id uuid.UUID, w io.Writer) error {
	if s.cfg.Keys == nil {
		return ErrNoKeys
	}
	n, err := s.store.Privacy.DataRequestArchiveChunks(ctx, teamID, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	for seq := range n {
		sealed, err := s.store.Privacy.DataRequestArchiveChunk(ctx, teamID, id, seq)
		if err != nil {
			return err
		}
		b, err := s.cfg.Keys.Open(sealed, chunkAD(id, seq))
		if err != nil {
			return fmt.Errorf("opening archive chunk %d of %s: %w", seq, id, err)
		}
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("writing archive of %s: %w", id, err)
		}
	}
	return nil
}

func chunkAD(id uuid.UUID, seq int) []byte {
	return fmt.Appendf(id[:len(id):len(id)], "/%d", seq)
}

// Export is a built archive.
type Export struct {
	Size      int64
	ExpiresAt time.Time
	Found     map[string]int
}

// BuildExport writes the archive of the export request r for address:
// it replaces any archive a previous attempt left, streams the zip into
// sealed chunks of at most 1 MiB and returns its size and counts. It holds
// one email (with its attachments) in memory at a time.
func (s *Service) BuildExport(ctx context.Context, r store.DataRequest, address string, now time.Time) (Export, error) {
	if s.cfg.Keys == nil {
		return Export{}, ErrNoKeys
	}
	if err := s.store.Privacy.ClearDataRequestArchive(ctx, r.ID); err != nil {
		return Export{}, err
	}
	exp := Export{ExpiresAt: now.Add(s.cfg.ArchiveTTL).Truncate(time.Second)}
	cw := &chunkWriter{ctx: ctx, s: s, id: r.ID, expires: exp.ExpiresAt}
	found, err := WriteZip(ctx, s.store, store.Subject{TeamID: r.TeamID, Address: address},
		Manifest{RequestID: r.ID, TeamID: r.TeamID, Address: address, CreatedAt: now.UTC()}, cw)
	if err != nil {
		return Export{}, err
	}
	if err := cw.flush(); err != nil {
		return Export{}, err
	}
	exp.Size, exp.Found = cw.total, found
	return exp, nil
}

// chunkWriter seals what is written to it into archive chunks.
type chunkWriter struct {
	ctx     context.Context
	s       *Service
	id      uuid.UUID
	expires time.Time
	buf     []byte
	seq     int
	total   int64
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(chunkSize-len(w.buf), len(p))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == chunkSize {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	sealed, err := w.s.cfg.Keys.Seal(w.buf, chunkAD(w.id, w.seq))
	if err != nil {
		return fmt.Errorf("sealing archive chunk: %w", err)
	}
	if err := w.s.store.Privacy.PutDataRequestArchive(w.ctx, w.id, w.seq, sealed, w.expires); err != nil {
		return err
	}
	w.total += int64(len(w.buf))
	w.seq++
	w.buf = w.buf[:0]
	return nil
}

// Manifest is manifest.json at the root of an archive.
type Manifest struct {
	RequestID uuid.UUID      `json:"request_id"`
	TeamID    uuid.UUID      `json:"team_id"`
	Address   string         `json:"email"`
	CreatedAt time.Time      `json:"created_at"`
	Found     map[string]int `json:"found"`
	Contents  []string       `json:"contents"`
}

// Kinds of items an export counts (DataRequest.Found).
const (
	FoundEmails          = "emails"
	FoundContacts        = "contacts"
	FoundSuppressions    = "suppressions"
	FoundReceived        = "received_emails"
	FoundRequestLogs     = "request_logs"
	FoundWebhookMessages = "webhook_messages"
)

// pageSize is how many ids or rows an export reads per query.
const pageSize = 100

// WriteZip writes the zip archive of everything the team holds about the
// subject to w:
//
//	manifest.json                      what this is, counts, the layout below
//	emails/<id>/email.json             the email row with its events
//	emails/<id>/message.eml            the message as sent, when stored
//	emails/<id>/attachments/<n>-<name> its attachments
//	received/<id>/email.json           a received email, parsed
//	received/<id>/raw.eml              as received
//	received/<id>/attachments/<n>-<name>
//	contacts.json                      contacts with topics and segments
//	suppressions.json
//	request_log.jsonl                  request-log entries naming the address
//	webhook_messages.jsonl             events sent to webhooks naming it, with attempts
//
// It returns the counts, which the manifest (written last) also holds.
func WriteZip(ctx context.Context, st *store.Store, sub store.Subject, m Manifest, w io.Writer) (map[string]int, error) {
	z := zip.NewWriter(w)
	found := map[string]int{FoundEmails: 0, FoundReceived: 0}
	put := func(name string, b []byte) error {
		f, err := z.Create(name)
		if err != nil {
			return fmt.Errorf("adding %s to the archive: %w", name, err)
		}
		_, err = f.Write(b)
		return err
	}
	putJSON := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return put(name, b)
	}
	emails := func(prefix, kind string, ids func(uuid.UUID) ([]uuid.UUID, error),
		load func(uuid.UUID) (store.SubjectEmail, error), messageName string) error {
		after := uuid.Nil
		for {
			page, err := ids(after)
			if err != nil {
				return err
			}
			for _, id := range page {
				e, err := load(id)
				if errors.Is(err, store.ErrNotFound) {
					continue // deleted since
				}
				if err != nil {
					return err
				}
				dir := prefix + "/" + id.String() + "/"
				if err := put(dir+"email.json", indentJSON(e.Row)); err != nil {
					return err
				}
				if e.Message != nil {
					if err := put(dir+messageName, e.Message); err != nil {
						return err
					}
				}
				for _, a := range e.Attachments {
					if err := put(dir+"attachments/"+safeName(a.Name), a.Content); err != nil {
						return err
					}
				}
				found[kind]++
			}
			if len(page) < pageSize {
				return nil
			}
			after = page[len(page)-1]
		}
	}
	if err := emails("emails", FoundEmails,
		func(after uuid.UUID) ([]uuid.UUID, error) {
			return st.Privacy.SubjectEmailIDs(ctx, sub, after, pageSize)
		},
		func(id uuid.UUID) (store.SubjectEmail, error) {
			return st.Privacy.SubjectEmailExport(ctx, sub.TeamID, id)
		},
		"message.eml"); err != nil {
		return nil, err
	}
	if err := emails("received", FoundReceived,
		func(after uuid.UUID) ([]uuid.UUID, error) {
			return st.Privacy.SubjectReceivedIDs(ctx, sub, after, pageSize)
		},
		func(id uuid.UUID) (store.SubjectEmail, error) {
			return st.Privacy.SubjectReceivedExport(ctx, sub.TeamID, id)
		},
		"raw.eml"); err != nil {
		return nil, err
	}
	contacts, err := st.Privacy.SubjectContacts(ctx, sub)
	if err != nil {
		return nil, err
	}
	found[FoundContacts] = len(contacts)
	if err := putJSON("contacts.json", nonNil(contacts)); err != nil {
		return nil, err
	}
	sups, err := st.Privacy.SubjectSuppressions(ctx, sub)
	if err != nil {
		return nil, err
	}
	found[FoundSuppressions] = len(sups)
	if err := putJSON("suppressions.json", nonNil(sups)); err != nil {
		return nil, err
	}
	lines := func(name, kind string, page func(uuid.UUID) ([]json.RawMessage, uuid.UUID, error)) error {
		f, err := z.Create(name)
		if err != nil {
			return fmt.Errorf("adding %s to the archive: %w", name, err)
		}
		after := uuid.Nil
		for {
			rows, last, err := page(after)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if _, err := f.Write(append(r, '\n')); err != nil {
					return err
				}
				found[kind]++
			}
			if len(rows) < pageSize {
				return nil
			}
			after = last
		}
	}
	if err := lines("request_log.jsonl", FoundRequestLogs, func(after uuid.UUID) ([]json.RawMessage, uuid.UUID, error) {
		return st.Privacy.SubjectRequestLogs(ctx, sub, after, pageSize)
	}); err != nil {
		return nil, err
	}
	if err := lines("webhook_messages.jsonl", FoundWebhookMessages, func(after uuid.UUID) ([]json.RawMessage, uuid.UUID, error) {
		return st.Privacy.SubjectWebhookMessages(ctx, sub, after, pageSize)
	}); err != nil {
		return nil, err
	}
	m.Found = found
	m.Contents = []string{"emails/<id>/email.json", "emails/<id>/message.eml", "emails/<id>/attachments/",
		"received/<id>/email.json", "received/<id>/raw.eml", "received/<id>/attachments/", "contacts.json",
		"suppressions.json", "request_log.jsonl", "webhook_messages.jsonl"}
	if err := putJSON("manifest.json", m); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, fmt.Errorf("closing the archive: %w", err)
	}
	return found, nil
}

// safeName keeps a stored file name from leaving its folder of the zip:
// separators become underscores.
func safeName(name string) string {
	name = strings.NewReplacer("/", "_", "\\", "_").Replace(name)
	if name == "" || name == "." || name == ".." {
		return "file"
	}
	return name
}

func indentJSON(b json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return b
	}
	return out
}

func nonNil(rows []json.RawMessage) []json.RawMessage {
	if rows == nil {
		return []json.RawMessage{}
	}
	return rows
}
