package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/inmail"
)

// Inbound message statuses.
const (
	InboundAccepted  = "accepted"
	InboundProcessed = "processed"
)

// Inbound commits the mail the inbound MX receives: it is the listener's
// inmail.Acceptor (package inroute routes it). Construct it with
// NewInbound.
type Inbound struct {
	store *Store
	// committed is called after each commit (to wake the outbox
	// dispatcher); may be nil.
	committed func()
	// budget is enforced as each message is counted (SetBudget).
	budget inmail.Budget
	// usageSlot picks the inbound_usage slot of a team without a budget,
	// in turn, so that this process's accepts for it never wait for each
	// other.
	usageSlot atomic.Uint32
	// large and small hold a token per Accept writing to the database: at
	// most DefaultInboundAccepts spooled messages and as many held in
	// memory at once.
	large, small chan struct{}
}

// DefaultInboundAccepts is how many large messages (spooled, over 1 MiB)
// Accept writes at once, each holding a connection of the store's pool
// while it streams the message in, and again how many small ones: a flood
// of large messages waits for these (its clients waiting for their reply,
// the messages in their spool files) and never takes the rest of the pool
// from sending, nor holds back the small messages (bounces, most mail) of
// other senders and teams, which wait only for each other, briefly.
const DefaultInboundAccepts = 4

var _ inmail.Acceptor = (*Inbound)(nil)

// NewInbound returns the Acceptor of the inbound MX. committed, which may
// be nil, is called after every message committed.
func NewInbound(s *Store, committed func()) *Inbound {
	return &Inbound{store: s, committed: committed, large: make(chan struct{}, DefaultInboundAccepts),
		small: make(chan struct{}, DefaultInboundAccepts)}
}

// EmailRoute is what routing an address of an email needs (package
// inroute: its return path, its mailto unsubscribe address): whose it is,
// the return-path host of its domain (<return_path>.<domain name>), how
// many recipients it has, and whether it was created before return paths
// were signed (return_path_signing, migration 00021) or per recipient
// (return_path_recipient, migration 00040).
type EmailRoute struct {
	TeamID, DomainID                  uuid.UUID
	Host                              string
	Recipients                        int
	BeforeSigning, BeforePerRecipient bool
}

// EmailRoute loads the EmailRoute of email id, of any team: routing
// finds the team. ErrNotFound when the email or its domain is gone.
func (s *Received) EmailRoute(ctx context.Context, id uuid.UUID) (EmailRoute, error) {
	var (
		r           EmailRoute
		name, label string
	)
	err := s.pool.QueryRow(ctx, `SELECT e.team_id, d.id, d.name, d.return_path,
			e.created_at < coalesce((SELECT signed_since FROM return_path_signing), '-infinity'),
			e.created_at < coalesce((SELECT per_recipient_since FROM return_path_recipient), '-infinity'),
			cardinality(e.rcpt_addrs)
		FROM email e JOIN domain d ON d.id = e.domain_id AND d.team_id = e.team_id
		WHERE e.id = @id`, pgx.NamedArgs{"id": id}).Scan(&r.TeamID, &r.DomainID, &name, &label,
		&r.BeforeSigning, &r.BeforePerRecipient, &r.Recipients)
	if err != nil {
		return EmailRoute{}, mapErr(err)
	}
	r.Host = label + "." + name
	return r, nil
}

// InboundRecipient is a recipient of an inbound message with its route.
type InboundRecipient struct {
	Address  string           `json:"address"`
	Kind     inmail.RouteKind `json:"kind"`
	DomainID uuid.UUID        `json:"domain_id"`
	EmailID  *uuid.UUID       `json:"email_id,omitempty"`
}

// InboundMessage is a message the inbound MX accepted, as one team sees
// it: only its recipients of that team.
type InboundMessage struct {
	ID         uuid.UUID
	TeamID     uuid.UUID
	MessageID  uuid.UUID // the listener's id of the whole message
	Kinds      []string
	MailFrom   string
	Recipients []InboundRecipient
	ClientIP   *netip.Addr
	Helo       string
	TLS        bool
	Auth       inmail.Results
	AuthHeader string
	Raw        []byte
	ReceivedAt time.Time
	Status     string
	Result     string
	CreatedAt  time.Time
}

// Accept commits a received message: one inbound_message row per team its
// recipients belong to, each with an outbox entry that starts its
// workflow, in one transaction. nil means all of it is committed.
// Recipients routed inmail.RouteDiscard are left out; a message for
// them only is accepted and dropped. The message is counted against the
// inbound budget of each team it has a receiving recipient of
// (countUsage), and refused with inmail.ErrOverBudget over it.
func (in *Inbound) Accept(ctx context.Context, m inmail.Message) error {
	var teams []uuid.UUID
	byTeam := map[uuid.UUID][]InboundRecipient{}
	for _, r := range m.Recipients {
		if r.Route.Kind == inmail.RouteDiscard {
			continue
		}
		t := r.Route.TeamID
		if _, ok := byTeam[t]; !ok {
			teams = append(teams, t)
		}
		ir := InboundRecipient{Address: r.Address, Kind: r.Route.Kind, DomainID: r.Route.DomainID}
		if r.Route.EmailID != uuid.Nil {
			id := r.Route.EmailID
			ir.EmailID = &id
		}
		byTeam[t] = append(byTeam[t], ir)
	}
	if len(teams) == 0 {
		if len(m.Recipients) > 0 {
			return nil // every recipient's mail is dropped (RouteDiscard)
		}
		return errors.New("accepting inbound message: no recipients")
	}
	auth, err := json.Marshal(m.Auth)
	if err != nil {
		return fmt.Errorf("encoding authentication results: %w", err)
	}
	var ip *netip.Addr
	if m.ClientIP.IsValid() {
		a := m.ClientIP.Unmap()
		ip = &a
	}
	slots := in.small
	if m.Spool != nil {
		slots = in.large
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return fmt.Errorf("waiting to accept inbound message %s: %w", m.ID, ctx.Err())
	}
	size := m.Len()
	chunks := (size + inboundChunkSize - 1) / inboundChunkSize
	err = in.store.inTx(ctx, func(tx pgx.Tx) error {
		for _, t := range teams {
			rcpts := byTeam[t]
			var kinds []string
			for _, r := range rcpts {
				if !slices.Contains(kinds, string(r.Kind)) {
					kinds = append(kinds, string(r.Kind))
				}
			}
			rj, err := json.Marshal(rcpts)
			if err != nil {
				return fmt.Errorf("encoding recipients: %w", err)
			}
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			if m.Spool == nil && size <= inboundChunkSize {
				// A message of at most one chunk, held in memory, is stored
				// as one sealed value (the form rows had before chunks), in
				// one round trip with its outbox entry.
				raw, sealed, err := in.store.sealBytes(ctx, t, m.Data, adInbound(id))
				if err != nil {
					return fmt.Errorf("sealing inbound message %s: %w", m.ID, err)
				}
				if raw == nil {
					raw = []byte{} // an empty message, not NULL
				}
				b := &pgx.Batch{}
				b.Queue(`INSERT INTO inbound_message (id, team_id, message_id, kinds, mail_from, recipients, client_ip,
						helo, tls, auth, auth_header, raw, size, received_at, sealed)
					VALUES (@id, @team, @mid, @kinds, @from, @rcpts, @ip, @helo, @tls, @auth, @auth_header, @raw, @size,
						@at, @sealed)`,
					pgx.NamedArgs{"id": id, "team": t, "mid": m.ID, "kinds": kinds, "from": m.MailFrom,
						"rcpts": string(rj), "ip": ip, "helo": m.Helo, "tls": m.TLS, "auth": string(auth),
						"auth_header": m.AuthHeader, "raw": raw, "size": size, "at": m.ReceivedAt, "sealed": sealed})
				b.Queue(`INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
					pgx.NamedArgs{"kind": OutboxInbound, "team": t, "id": id})
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return fmt.Errorf("inserting inbound message %s: %w", m.ID, mapErr(err))
				}
				continue
			}
			_, err = tx.Exec(ctx, `INSERT INTO inbound_message (id, team_id, message_id, kinds, mail_from, recipients,
					client_ip, helo, tls, auth, auth_header, raw, raw_chunks, size, received_at, sealed)
				VALUES (@id, @team, @mid, @kinds, @from, @rcpts, @ip, @helo, @tls, @auth, @auth_header, ''::bytea,
					@chunks, @size, @at, @sealed)`,
				pgx.NamedArgs{"id": id, "team": t, "mid": m.ID, "kinds": kinds, "from": m.MailFrom, "rcpts": string(rj),
					"ip": ip, "helo": m.Helo, "tls": m.TLS, "auth": string(auth), "auth_header": m.AuthHeader,
					"chunks": chunks, "size": size, "at": m.ReceivedAt, "sealed": in.store.sealer != nil})
			if err != nil {
				return fmt.Errorf("inserting inbound message %s: %w", m.ID, mapErr(err))
			}
			// The message is streamed into its chunks, each sealed on its own
			// with the team's key: one chunk in memory at a time, whatever
			// the message's size and the number of teams.
			src := &chunkSource{ctx: ctx, s: in.store, team: t, id: id, r: m.Reader(),
				buf: make([]byte, min(size, inboundChunkSize))}
			n, err := tx.CopyFrom(ctx, pgx.Identifier{"inbound_message_chunk"}, []string{"inbound_id", "seq", "data"}, src)
			if err != nil {
				return fmt.Errorf("storing inbound message %s: %w", m.ID, mapErr(err))
			}
			if n != chunks {
				return fmt.Errorf("storing inbound message %s: %d chunks of %d", m.ID, n, chunks)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
				pgx.NamedArgs{"kind": OutboxInbound, "team": t, "id": id}); err != nil {
				return fmt.Errorf("inserting inbound message %s: %w", m.ID, mapErr(err))
			}
		}
		return in.countUsage(ctx, tx, m) // inbound_usage.go
	})
	if err != nil {
		return err
	}
	if in.committed != nil {
		in.committed()
	}
	return nil
}

// inboundChunkSize is the size of the chunks inbound messages are stored
// in (the last one may be shorter).
const inboundChunkSize = 256 << 10

// chunkSource is a pgx.CopyFromSource of the chunks of one inbound
// message, read from r and sealed one at a time into buf's worth.
type chunkSource struct {
	ctx  context.Context
	s    *Store
	team uuid.UUID
	id   uuid.UUID
	r    io.Reader
	buf  []byte
	seq  int
	row  []any
	err  error
}

func (c *chunkSource) Next() bool {
	if c.err != nil || len(c.buf) == 0 {
		return false
	}
	n, err := io.ReadFull(c.r, c.buf)
	if n == 0 {
		if !errors.Is(err, io.EOF) {
			c.err = fmt.Errorf("reading the message: %w", err)
		}
		return false
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.err = fmt.Errorf("reading the message: %w", err)
		return false
	}
	data := c.buf[:n]
	if c.s.sealer != nil {
		if data, err = c.s.sealer.Seal(c.ctx, c.team, data, adInboundChunk(c.id, c.seq)); err != nil {
			c.err = fmt.Errorf("sealing: %w", err)
			return false
		}
	}
	c.row = []any{c.id, c.seq, data}
	c.seq++
	return true
}

func (c *chunkSource) Values() ([]any, error) { return c.row, nil }
func (c *chunkSource) Err() error             { return c.err }

// inboundRaw is what a row of inbound_message says of its raw message:
// the message itself (raw) in the format of rows from before chunks
// (chunks NULL), else how many chunks it is in.
type inboundRaw struct {
	raw    []byte
	chunks *int64
	size   int64
	sealed bool
}

// openInboundRaw returns the raw message of the team's inbound message
// id: raw opened as it is, or its chunks read and opened in order into one
// slice of the message's size.
func (s *Received) openInboundRaw(ctx context.Context, teamID, id uuid.UUID, r inboundRaw) ([]byte, error) {
	if r.chunks == nil {
		return s.openBytes(ctx, teamID, r.raw, r.sealed, adInbound(id))
	}
	if r.sealed && s.sealer == nil {
		return nil, errNoSealer
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, data FROM inbound_message_chunk WHERE inbound_id = @id ORDER BY seq`,
		pgx.NamedArgs{"id": id})
	if err != nil {
		return nil, fmt.Errorf("reading chunks: %w", mapErr(err))
	}
	defer rows.Close()
	out := make([]byte, 0, r.size)
	var n int64
	for rows.Next() {
		var (
			seq  int64
			data []byte
		)
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, fmt.Errorf("reading chunks: %w", mapErr(err))
		}
		if seq != n {
			return nil, fmt.Errorf("chunk %d missing", n)
		}
		if r.sealed {
			if data, err = s.sealer.Open(ctx, teamID, data, adInboundChunk(id, int(seq))); err != nil {
				return nil, fmt.Errorf("opening chunk %d: %w", seq, err)
			}
		}
		out = append(out, data...)
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading chunks: %w", mapErr(err))
	}
	if n != *r.chunks || int64(len(out)) != r.size {
		return nil, fmt.Errorf("%d chunks of %d bytes, not %d of %d", n, len(out), *r.chunks, r.size)
	}
	return out, nil
}

const inboundColumns = `id, team_id, message_id, kinds, mail_from, recipients, client_ip, helo, tls, auth,
	auth_header, raw, raw_chunks, size, received_at, status, coalesce(result, ''), created_at, sealed`

// scanInbound reads an inbound message, all but its raw message, which
// openInboundRaw opens from what it returns (after the row is read: it
// queries the chunks).
func scanInbound(row pgx.Row) (InboundMessage, inboundRaw, error) {
	var (
		m     InboundMessage
		raw   inboundRaw
		rcpts []byte
		auth  []byte
	)
	err := row.Scan(&m.ID, &m.TeamID, &m.MessageID, &m.Kinds, &m.MailFrom, &rcpts, &m.ClientIP, &m.Helo, &m.TLS,
		&auth, &m.AuthHeader, &raw.raw, &raw.chunks, &raw.size, &m.ReceivedAt, &m.Status, &m.Result, &m.CreatedAt,
		&raw.sealed)
	if err != nil {
		return InboundMessage{}, inboundRaw{}, mapErr(err)
	}
	if err := json.Unmarshal(rcpts, &m.Recipients); err != nil {
		return InboundMessage{}, inboundRaw{}, fmt.Errorf("decoding recipients of %s: %w", m.ID, err)
	}
	if err := json.Unmarshal(auth, &m.Auth); err != nil {
		return InboundMessage{}, inboundRaw{}, fmt.Errorf("decoding authentication results of %s: %w", m.ID, err)
	}
	return m, raw, nil
}

// InboundByID loads an inbound message by id. It is not team-scoped:
// workflows address it by id only, and everything they do with it is
// scoped to its TeamID. ErrNotFound when it does not exist (any more).
func (s *Received) InboundByID(ctx context.Context, id uuid.UUID) (InboundMessage, error) {
	m, raw, err := scanInbound(s.pool.QueryRow(ctx, `SELECT `+inboundColumns+` FROM inbound_message WHERE id = @id`,
		pgx.NamedArgs{"id": id}))
	if err != nil {
		return InboundMessage{}, fmt.Errorf("loading inbound message %s: %w", id, err)
	}
	if m.Raw, err = s.openInboundRaw(ctx, m.TeamID, m.ID, raw); err != nil {
		return InboundMessage{}, fmt.Errorf("raw message of %s: %w", m.ID, mapErr(err))
	}
	return m, nil
}

// MarkInboundProcessed marks a team's inbound message processed with what
// processing found; marking it again changes nothing.
func (s *Received) MarkInboundProcessed(ctx context.Context, teamID, id uuid.UUID, result string) error {
	_, err := s.pool.Exec(ctx, `UPDATE inbound_message SET status = @processed, result = @result, processed_at = now()
		WHERE id = @id AND team_id = @team AND status <> @processed`,
		pgx.NamedArgs{"id": id, "team": teamID, "processed": InboundProcessed, "result": result})
	if err != nil {
		return fmt.Errorf("marking inbound message %s processed: %w", id, mapErr(err))
	}
	return nil
}
