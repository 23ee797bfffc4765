package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Kinds of rows an erasure counts (DataRequest.Found).
const (
	ErasedEmails          = "emails_deleted"
	AnonymizedEmails      = "emails_anonymized"
	ErasedContacts        = "contacts"
	ErasedSuppressions    = "suppressions"
	ErasedReceived        = "received_emails"
	ErasedInbound         = "inbound_messages"
	ScrubbedRequestLogs   = "request_logs"
	ScrubbedWebhooks      = "webhook_messages"
	ErasedUnsubscribes    = "broadcast_unsubscribes"
	ScrubbedImportChunks  = "contact_import_chunks"
	CanceledEmails        = "emails_canceled"
	subjectEraseBatchSize = 500
)

// SubjectScheduledEmails returns the ids of the team's scheduled emails to
// or from the address (at most limit), for an erasure to cancel them
// first.
func (s *Privacy) SubjectScheduledEmails(ctx context.Context, sub Subject, limit int) ([]uuid.UUID, error) {
	return s.subjectIDs(ctx, `SELECT e.id FROM email e WHERE e.team_id = @team AND e.id > @after
		AND e.last_event = 'scheduled' AND `+emailNames+` ORDER BY e.id LIMIT @limit`, sub, uuid.Nil, limit)
}

// eraseStep is one bounded step of an erasure, repeated until it
// changes no row: a statement (sql) or a function (run) that names its
// rows with a LIMIT and is its own transaction, so no erasure holds locks
// for long, and an erasure that stopped half way is finished by running
// it again.
type eraseStep struct {
	kind string
	sql  string
	run  func(s *Privacy, ctx context.Context, sub Subject, limit int) (int, error)
}

// eraseSteps are the steps of EraseSubject, in order. Reports about the
// emails naming the address go first (they are found through those
// emails); then emails only to the address, whole; emails that also
// concern others are then anonymised and no longer match.
var eraseSteps = []eraseStep{
	{ErasedInbound, `DELETE FROM inbound_message WHERE id IN (SELECT m.id FROM inbound_message m
		WHERE m.team_id = @team AND EXISTS (SELECT 1 FROM jsonb_array_elements(
			CASE jsonb_typeof(m.recipients) WHEN 'array' THEN m.recipients ELSE '[]' END) x
			JOIN email e ON e.id::text = x->>'email_id'
			WHERE e.team_id = @team AND ` + emailNames + `)
		LIMIT @limit)`, nil},
	{ErasedEmails, `DELETE FROM email WHERE id IN (SELECT e.id FROM email e
		WHERE e.team_id = @team AND ` + emailNames + `
		AND cardinality(e.rcpt_addrs) > 0
		AND NOT EXISTS (SELECT 1 FROM unnest(e.rcpt_addrs) a WHERE lower(a) <> @addr)
		AND e.from_addr !~* @re
		LIMIT @limit FOR UPDATE SKIP LOCKED)`, nil},
	{AnonymizedEmails, "", (*Privacy).anonymizeEmails},
	{ErasedContacts, `DELETE FROM contact WHERE id IN (SELECT c.id FROM contact c
		WHERE c.team_id = @team AND lower(c.email) = @addr LIMIT @limit)`, nil},
	{ErasedSuppressions, `DELETE FROM suppression WHERE id IN (SELECT x.id FROM suppression x
		WHERE x.team_id = @team AND x.email = @addr LIMIT @limit)`, nil},
	{ErasedUnsubscribes, `DELETE FROM broadcast_unsubscribe u USING broadcast b
		WHERE b.id = u.broadcast_id AND b.team_id = @team AND lower(u.email) = @addr`, nil},
	// Received mail goes with the inbound message it was parsed from, by
	// cascade: the raw message names the sender.
	{ErasedReceived, `DELETE FROM inbound_message WHERE id IN (SELECT r.inbound_id FROM received_email r
		WHERE r.team_id = @team AND ` + receivedNames + ` LIMIT @limit)`, nil},
	{ErasedInbound, `DELETE FROM inbound_message WHERE id IN (SELECT m.id FROM inbound_message m
		WHERE m.team_id = @team AND ` + inboundNames + ` LIMIT @limit)`, nil},
	{ScrubbedRequestLogs, `UPDATE request_log l SET
			path = regexp_replace(l.path, @re, @ph, 'gi'),
			request_body = regexp_replace(l.request_body, @re, @ph, 'gi'),
			response_body = regexp_replace(l.response_body, @re, @ph, 'gi')
		WHERE l.team_id = @team AND l.id IN (SELECT l.id FROM request_log l
			WHERE l.team_id = @team AND ` + requestLogNames + ` LIMIT @limit)`, nil},
	{ScrubbedWebhooks, `WITH x AS (SELECT w.id FROM webhook_message w
			WHERE w.team_id = @team AND ` + webhookNames + ` LIMIT @limit FOR UPDATE),
		t AS (UPDATE webhook_attempt SET response_body = regexp_replace(response_body, @re, @ph, 'gi'),
				error = regexp_replace(error, @re, @ph, 'gi')
			WHERE team_id = @team AND message_id IN (SELECT id FROM x))
		UPDATE webhook_message w SET payload = regexp_replace(w.payload::text, @re, @ph, 'gi')::jsonb
		FROM x WHERE w.id = x.id`, nil},
	{ScrubbedImportChunks, `UPDATE contact_import_chunk k SET
			rows = regexp_replace(k.rows::text, @re, @ph, 'gi')::jsonb,
			errors = regexp_replace(k.errors::text, @re, @ph, 'gi')::jsonb
		FROM contact_import i WHERE i.id = k.import_id AND i.team_id = @team
		AND (k.rows::text ~* @re OR k.errors::text ~* @re)`, nil},
}

// anonymizeSQL anonymises the emails @ids in place: the address (with its
// display name) becomes the placeholder in address lists and events, and
// is replaced in the subject, the bodies stored unsealed, headers and
// tags; the built message and the source go, and so do the unsealed
// attachments that name the address (anonymizeEmails handles the sealed
// bodies and attachments).
const anonymizeSQL = `WITH m AS (DELETE FROM email_message WHERE email_id = ANY(@ids)),
		src AS (DELETE FROM email_source WHERE email_id = ANY(@ids)),
		att AS (DELETE FROM attachment WHERE email_id = ANY(@ids) AND NOT sealed
			AND lower(encode(content, 'escape')) ~* @re),
		ev AS (UPDATE email_event SET
				recipient = CASE WHEN recipient ~* @re THEN @ph ELSE recipient END,
				detail = regexp_replace(detail::text, @re, @ph, 'gi')::jsonb
			WHERE email_id = ANY(@ids) AND (recipient ~* @re OR detail::text ~* @re))
		UPDATE email e SET
			from_addr = CASE WHEN e.from_addr ~* @re THEN @ph ELSE e.from_addr END,
			to_addrs = scrub_text_array(e.to_addrs, '^.*' || @re || '.*$', @ph),
			cc_addrs = scrub_text_array(e.cc_addrs, '^.*' || @re || '.*$', @ph),
			bcc_addrs = scrub_text_array(e.bcc_addrs, '^.*' || @re || '.*$', @ph),
			reply_to = scrub_text_array(e.reply_to, '^.*' || @re || '.*$', @ph),
			rcpt_addrs = (SELECT array_agg(CASE WHEN NOT u.a ~* @re THEN u.a
					WHEN u.i = (SELECT min(v.j) FROM unnest(e.rcpt_addrs) WITH ORDINALITY v(b, j) WHERE v.b ~* @re)
						AND NOT @ph = ANY(e.rcpt_addrs) THEN @ph
					ELSE 'erased+' || u.i || '@erased.invalid' END ORDER BY u.i)
				FROM unnest(e.rcpt_addrs) WITH ORDINALITY u(a, i)),
			subject = regexp_replace(e.subject, @re, @ph, 'gi'),
			html = regexp_replace(e.html, @re, @ph, 'gi'),
			text_body = regexp_replace(e.text_body, @re, @ph, 'gi'),
			headers = regexp_replace(e.headers::text, @re, @ph, 'gi')::jsonb,
			tags = regexp_replace(e.tags::text, @re, @ph, 'gi')::jsonb,
			insights = regexp_replace(e.insights::text, @re, @ph, 'gi')::jsonb,
			updated_at = now()
		WHERE e.team_id = @team AND e.id = ANY(@ids)`

// anonymizeEmails anonymises up to limit of the team's emails naming the
// address (those left after the emails only to it were deleted) in one
// transaction: their sealed bodies are opened, scrubbed and sealed again,
// their sealed attachments naming the address deleted, then anonymizeSQL
// does the rest. It returns how many emails it anonymised.
func (s *Privacy) anonymizeEmails(ctx context.Context, sub Subject, limit int) (int, error) {
	args := sub.args(pgx.NamedArgs{"limit": limit})
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT e.id, e.html_sealed, e.text_sealed FROM email e
			WHERE e.team_id = @team AND `+emailNames+` ORDER BY e.id LIMIT @limit FOR UPDATE`, args)
		if err != nil {
			return err
		}
		type found struct {
			id         uuid.UUID
			html, text []byte
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
			var f found
			return f, r.Scan(&f.id, &f.html, &f.text)
		})
		if err != nil || len(list) == 0 {
			return err
		}
		ids := make([]uuid.UUID, len(list))
		for i, f := range list {
			ids[i] = f.id
			for _, b := range []struct {
				col    string
				sealed []byte
				ad     []byte
			}{{"html_sealed", f.html, adEmailHTML(f.id)}, {"text_sealed", f.text, adEmailText(f.id)}} {
				if b.sealed == nil {
					continue
				}
				pt, err := s.openBytes(ctx, sub.TeamID, b.sealed, true, b.ad)
				if err != nil {
					return fmt.Errorf("opening %s of email %s: %w", b.col, f.id, err)
				}
				scrubbed, changed := scrubAddress(string(pt), sub.Address, ErasedPlaceholder)
				if !changed {
					continue
				}
				out, _, err := s.sealBytes(ctx, sub.TeamID, []byte(scrubbed), b.ad)
				if err != nil {
					return fmt.Errorf("sealing %s of email %s: %w", b.col, f.id, err)
				}
				if _, err := tx.Exec(ctx, `UPDATE email SET `+b.col+` = @v WHERE id = @id`,
					pgx.NamedArgs{"v": out, "id": f.id}); err != nil {
					return err
				}
			}
			if err := s.dropSealedAttachments(ctx, tx, sub, f.id); err != nil {
				return err
			}
		}
		args["ids"] = ids
		if _, err := tx.Exec(ctx, anonymizeSQL, args); err != nil {
			return err
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("anonymising emails: %w", err)
	}
	return n, nil
}

// dropSealedAttachments deletes, within tx, the sealed attachments of the
// email that name the address, opening them one at a time.
func (s *Privacy) dropSealedAttachments(ctx context.Context, tx pgx.Tx, sub Subject, id uuid.UUID) error {
	rows, err := tx.Query(ctx, `SELECT position FROM attachment WHERE email_id = @id AND sealed ORDER BY position`,
		pgx.NamedArgs{"id": id})
	if err != nil {
		return err
	}
	positions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return err
	}
	for _, pos := range positions {
		var content []byte
		if err := tx.QueryRow(ctx, `SELECT content FROM attachment WHERE email_id = @id AND position = @pos`,
			pgx.NamedArgs{"id": id, "pos": pos}).Scan(&content); err != nil {
			return err
		}
		pt, err := s.openBytes(ctx, sub.TeamID, content, true, adAttachment(id, pos))
		if err != nil {
			return fmt.Errorf("opening attachment %d of email %s: %w", pos, id, err)
		}
		if _, named := scrubAddress(string(pt), sub.Address, ""); !named {
			continue
		}
		if _, err := tx.Exec(ctx, `DELETE FROM attachment WHERE email_id = @id AND position = @pos`,
			pgx.NamedArgs{"id": id, "pos": pos}); err != nil {
			return err
		}
	}
	return nil
}

// scrubAddress replaces every whole, case-insensitive occurrence of addr
// in s ("@" also as "%40") by ph, as pattern matches in PostgreSQL; it
// reports whether there was one. Go's regular expressions have no
// lookaround, so the boundaries are checked by hand.
func scrubAddress(s, addr, ph string) (string, bool) {
	q := regexp.QuoteMeta(strings.ToLower(addr))
	re := regexp.MustCompile(`(?i)` + strings.Replace(q, "@", "(?:@|%40)", 1))
	var b strings.Builder
	last, found := 0, false
	for _, m := range re.FindAllStringIndex(s, -1) {
		if m[0] > 0 && localChar(s[m[0]-1]) {
			continue
		}
		if m[1] < len(s) && (domainChar(s[m[1]]) || s[m[1]] == '.' && m[1]+1 < len(s) && alnum(s[m[1]+1])) {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(ph)
		last, found = m[1], true
	}
	if !found {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// localChar: a character that continues a local part leftwards.
func localChar(c byte) bool { return alnum(c) || strings.IndexByte("._%+-", c) >= 0 }

// domainChar: a character that continues a domain label rightwards.
func domainChar(c byte) bool { return alnum(c) || c == '_' || c == '-' }

// EraseSubject deletes or anonymises everything the team holds about the
// address in PostgreSQL (docs/privacy.md: "Erasure rules"), in bounded
// transactions of at most batch rows (0: 500), and returns what it
// changed by kind. Running it again after it stopped half way finishes
// the job and counts only the rest.
func (s *Privacy) EraseSubject(ctx context.Context, sub Subject, batch int) (map[string]int, error) {
	if batch <= 0 {
		batch = subjectEraseBatchSize
	}
	counts := map[string]int{}
	for _, st := range eraseSteps {
		for {
			var n int
			if st.run != nil {
				var err error
				if n, err = st.run(s, ctx, sub, batch); err != nil {
					return counts, fmt.Errorf("erasing %s: %w", st.kind, err)
				}
			} else {
				tag, err := s.pool.Exec(ctx, st.sql, sub.args(pgx.NamedArgs{"limit": batch}))
				if err != nil {
					return counts, fmt.Errorf("erasing %s: %w", st.kind, mapErr(err))
				}
				n = int(tag.RowsAffected())
			}
			counts[st.kind] += n
			if n == 0 || st.run == nil && !strings.Contains(st.sql, "@limit") {
				break
			}
		}
	}
	return counts, nil
}
