package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/datakey"
)

// Sealer seals mail content at rest with a team's key (*datakey.Keyring).
// ad binds a value to its row and column (datakey.AD).
type Sealer interface {
	Seal(ctx context.Context, teamID uuid.UUID, plaintext, ad []byte) ([]byte, error)
	Open(ctx context.Context, teamID uuid.UUID, sealed, ad []byte) ([]byte, error)
}

var _ Sealer = (*datakey.Keyring)(nil)

// errNoSealer is returned when sealed content is read by a store without
// a sealer (no master key configured).
var errNoSealer = errors.New("content is sealed but no master key is configured")

// sealBytes seals b for the team's row unless the store has no sealer;
// sealed reports which.
func (s *Store) sealBytes(ctx context.Context, teamID uuid.UUID, b, ad []byte) (out []byte, sealed bool, err error) {
	if s.sealer == nil || b == nil {
		return b, false, nil
	}
	out, err = s.sealer.Seal(ctx, teamID, b, ad)
	if err != nil {
		return nil, false, fmt.Errorf("sealing: %w", err)
	}
	return out, true, nil
}

// openBytes returns the plaintext of b, which sealed says is sealed.
func (s *Store) openBytes(ctx context.Context, teamID uuid.UUID, b []byte, sealed bool, ad []byte) ([]byte, error) {
	if !sealed {
		return b, nil
	}
	if s.sealer == nil {
		return nil, errNoSealer
	}
	pt, err := s.sealer.Open(ctx, teamID, b, ad)
	if err != nil {
		return nil, fmt.Errorf("opening: %w", err)
	}
	return pt, nil
}

// sealText seals a text column's value into its *_sealed column; nil when
// the store has no sealer (the text is stored as it is) or t is nil.
func (s *Store) sealText(ctx context.Context, teamID uuid.UUID, t *string, ad []byte) ([]byte, error) {
	if s.sealer == nil || t == nil {
		return nil, nil
	}
	out, _, err := s.sealBytes(ctx, teamID, []byte(*t), ad)
	return out, err
}

// openText returns the text of a column pair: the plaintext column for
// rows written unsealed, else the opened *_sealed column.
func (s *Store) openText(ctx context.Context, teamID uuid.UUID, plain *string, sealed, ad []byte) (*string, error) {
	if sealed == nil {
		return plain, nil
	}
	pt, err := s.openBytes(ctx, teamID, sealed, true, ad)
	if err != nil {
		return nil, err
	}
	t := string(pt)
	return &t, nil
}

// The associated data of each sealed column: its table, column and row.
func adEmailHTML(id uuid.UUID) []byte    { return datakey.AD("email", "html", id) }
func adEmailText(id uuid.UUID) []byte    { return datakey.AD("email", "text_body", id) }
func adMessage(id uuid.UUID) []byte      { return datakey.AD("email_message", "data", id) }
func adSource(id uuid.UUID) []byte       { return datakey.AD("email_source", "data", id) }
func adInbound(id uuid.UUID) []byte      { return datakey.AD("inbound_message", "raw", id) }
func adReceivedHTML(id uuid.UUID) []byte { return datakey.AD("received_email", "html_body", id) }
func adReceivedText(id uuid.UUID) []byte { return datakey.AD("received_email", "text_body", id) }
func adReceivedAtt(id uuid.UUID) []byte  { return datakey.AD("received_attachment", "content", id) }
func adAttachment(id uuid.UUID, pos int) []byte {
	return datakey.AD("attachment", "content", id, pos)
}
func adInboundChunk(id uuid.UUID, seq int) []byte {
	return datakey.AD("inbound_message_chunk", "data", id, seq)
}

// sealEmails returns copies of emails whose bodies, attachments and
// source are sealed for insertion (the callers' values are left as they
// are); emails themselves when the store has no sealer.
func (s *Store) sealEmails(ctx context.Context, emails []Email) ([]Email, error) {
	if s.sealer == nil {
		return emails, nil
	}
	out := make([]Email, len(emails))
	for i, e := range emails {
		var err error
		if e.htmlSealed, err = s.sealText(ctx, e.TeamID, e.HTML, adEmailHTML(e.ID)); err != nil {
			return nil, fmt.Errorf("html of email %s: %w", e.ID, err)
		}
		if e.textSealed, err = s.sealText(ctx, e.TeamID, e.Text, adEmailText(e.ID)); err != nil {
			return nil, fmt.Errorf("text of email %s: %w", e.ID, err)
		}
		e.HTML, e.Text = nil, nil
		if len(e.Attachments) > 0 {
			atts := make([]Attachment, len(e.Attachments))
			for j, a := range e.Attachments {
				if a.Content, a.sealed, err = s.sealBytes(ctx, e.TeamID, a.Content, adAttachment(e.ID, j)); err != nil {
					return nil, fmt.Errorf("attachment %d of email %s: %w", j, e.ID, err)
				}
				a.Position = j
				atts[j] = a
			}
			e.Attachments = atts
		}
		if e.Source, e.sourceSealed, err = s.sealBytes(ctx, e.TeamID, e.Source, adSource(e.ID)); err != nil {
			return nil, fmt.Errorf("source of email %s: %w", e.ID, err)
		}
		out[i] = e
	}
	return out, nil
}

// openEmail opens in place what was read of e sealed: bodies,
// attachments, source.
func (s *Store) openEmail(ctx context.Context, e *Email) error {
	var err error
	if e.HTML, err = s.openText(ctx, e.TeamID, e.HTML, e.htmlSealed, adEmailHTML(e.ID)); err != nil {
		return fmt.Errorf("html of email %s: %w", e.ID, err)
	}
	if e.Text, err = s.openText(ctx, e.TeamID, e.Text, e.textSealed, adEmailText(e.ID)); err != nil {
		return fmt.Errorf("text of email %s: %w", e.ID, err)
	}
	e.htmlSealed, e.textSealed = nil, nil
	for j := range e.Attachments {
		a := &e.Attachments[j]
		if a.Content, err = s.openBytes(ctx, e.TeamID, a.Content, a.sealed, adAttachment(e.ID, a.Position)); err != nil {
			return fmt.Errorf("attachment %d of email %s: %w", a.Position, e.ID, err)
		}
		a.sealed = false
	}
	if e.Source, err = s.openBytes(ctx, e.TeamID, e.Source, e.sourceSealed, adSource(e.ID)); err != nil {
		return fmt.Errorf("source of email %s: %w", e.ID, err)
	}
	e.sourceSealed = false
	return nil
}

// CurrentDataKey returns the team's current data key; an error wrapping
// datakey.ErrNoKey when it has none.
func (s *Store) CurrentDataKey(ctx context.Context, teamID uuid.UUID) (datakey.Record, error) {
	r := datakey.Record{TeamID: teamID}
	err := s.pool.QueryRow(ctx, `SELECT id, sealed_key FROM team_data_key WHERE team_id = @team AND retired_at IS NULL`,
		pgx.NamedArgs{"team": teamID}).Scan(&r.ID, &r.SealedKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return datakey.Record{}, datakey.ErrNoKey
	}
	return r, mapErr(err)
}

// AddDataKey stores candidate as its team's current data key unless the
// team has one already, and returns the team's current key.
func (s *Store) AddDataKey(ctx context.Context, candidate datakey.Record) (datakey.Record, error) {
	_, err := s.pool.Exec(ctx, `INSERT INTO team_data_key (id, team_id, sealed_key) VALUES (@id, @team, @key)
		ON CONFLICT (team_id) WHERE retired_at IS NULL DO NOTHING`,
		pgx.NamedArgs{"id": candidate.ID, "team": candidate.TeamID, "key": candidate.SealedKey})
	if err != nil {
		return datakey.Record{}, fmt.Errorf("adding data key: %w", mapErr(err))
	}
	// Read in a statement of its own: it sees the key of a concurrent
	// insert that won, which the insert's own snapshot may not.
	return s.CurrentDataKey(ctx, candidate.TeamID)
}

// DataKey returns a data key by id, current or retired.
func (s *Store) DataKey(ctx context.Context, id uuid.UUID) (datakey.Record, error) {
	r := datakey.Record{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT team_id, sealed_key FROM team_data_key WHERE id = @id`,
		pgx.NamedArgs{"id": id}).Scan(&r.TeamID, &r.SealedKey)
	return r, mapErr(err)
}

var _ datakey.Store = (*Store)(nil)
