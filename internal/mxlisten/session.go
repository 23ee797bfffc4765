package mxlisten

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/connlimit"
	"github.com/posthaste/posthaste/internal/inmail"
)

// session is one client's state between EHLO and QUIT (a new one after
// STARTTLS). It implements smtp.Session but not smtp.AuthSession: the MX
// offers no AUTH, and go-smtp answers AUTH with 504 5.7.4.
type session struct {
	s       *Server
	conn    *smtp.Conn
	tracked *connlimit.Conn
	ip      netip.Addr
	helo    string

	inTx  bool
	from  string
	rcpts []inmail.Recipient
}

var _ smtp.Session = (*session)(nil)

// Replies. Texts are generic: nothing internal reaches a client.
var (
	errInternal     = reply(451, 4, 3, 0, "Internal error, try again later")
	errShuttingDown = reply(421, 4, 3, 2, "Service shutting down, try again later")
	errNotOurs      = reply(550, 5, 1, 1, "Recipient address rejected: not a mailbox here")
	errBadAddress   = reply(550, 5, 1, 3, "Recipient address rejected: not an address accepted here")
	errReading      = reply(451, 4, 3, 0, "Error reading the message, try again")
	// RFC 5321 §4.1.1.2: MAIL inside a transaction is a bad sequence.
	errNestedMail  = reply(503, 5, 5, 1, "Nested MAIL command")
	errNoRcpts     = reply(503, 5, 5, 1, "No valid recipients")
	errLineTooLong = reply(500, 5, 5, 6, "Line too long")
)

func reply(code, c1, c2, c3 int, msg string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{c1, c2, c3}, Message: msg}
}

// Mail starts a transaction. Any sender is taken, the null reverse path
// <> too (RFC 5321 §4.5.5: bounces must be accepted); it is checked by
// SPF, not trusted.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.inTx {
		return errNestedMail
	}
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.CommandTimeout)
	defer cancel()
	if err := ss.s.allowClient(ctx, ss.ip); err != nil {
		return ss.refuseMail(err)
	}
	if !ss.s.srv.SetBusy(ss.tracked, true) {
		return errShuttingDown
	}
	ss.inTx, ss.from, ss.rcpts = true, from, nil
	return nil
}

// Rcpt accepts a recipient only when the Router says it is ours: never
// an open relay.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	addr, err := NormalizeRecipient(to)
	if err != nil {
		ss.s.cfg.Metrics.recipient("refused")
		ss.s.logger.Debug("recipient refused: not an address accepted here", "client_addr", ss.ip.String(),
			"rcpt", to)
		return errBadAddress
	}
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.CommandTimeout)
	defer cancel()
	route, err := ss.s.router.Route(ctx, addr)
	switch {
	case errors.Is(err, inmail.ErrNotOurs):
		ss.s.cfg.Metrics.recipient("refused")
		ss.s.logger.Info("recipient refused: not ours", "client_addr", ss.ip.String(), "rcpt_domain", domainOf(addr))
		return errNotOurs
	case err != nil:
		ss.s.cfg.Metrics.recipient("deferred")
		ss.s.logger.Error("routing a recipient", "client_addr", ss.ip.String(), "rcpt_domain", domainOf(addr),
			"err", err)
		return errInternal
	}
	for _, r := range ss.rcpts {
		if r.Address == addr {
			ss.s.cfg.Metrics.recipient("accepted")
			return nil // the same mailbox twice: one copy
		}
	}
	if err := ss.s.admit(ctx, route, ss.ip); err != nil {
		ss.s.cfg.Metrics.recipient("deferred")
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			ss.s.logger.Info("recipient deferred", "client_addr", ss.ip.String(), "rcpt_domain", domainOf(addr),
				"team_id", route.TeamID.String(), "reason", se.Message)
			return se
		}
		ss.s.logger.Error("checking an inbound limit", "client_addr", ss.ip.String(), "err", err)
		return errInternal
	}
	ss.s.cfg.Metrics.recipient("accepted")
	ss.rcpts = append(ss.rcpts, inmail.Recipient{Address: addr, Route: route})
	return nil
}

// Data reads the message under the size cap, authenticates it, and
// replies 250 only once the Acceptor has committed it.
func (ss *session) Data(r io.Reader) error {
	if len(ss.rcpts) == 0 {
		return errNoRcpts
	}
	now := ss.s.cfg.Now()
	id, err := uuid.NewV7()
	if err != nil {
		ss.s.logger.Error("making a message id", "err", err)
		ss.s.cfg.Metrics.message("deferred")
		return errInternal
	}
	state, isTLS := ss.conn.TLSConnectionState()
	var tlsState *tls.ConnectionState
	if isTLS {
		tlsState = &state
	}
	received := receivedHeader(ss.helo, ss.ip, ss.s.cfg.Hostname, id, tlsState, ss.rcpts, now)
	sp, err := readMessage(r, ss.s.cfg.MaxMessageBytes, received, ss.s.cfg.TempDir)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			ss.s.cfg.Metrics.message("rejected")
			ss.s.logger.Info("message refused: over the size cap", "client_addr", ss.ip.String(),
				"max_bytes", ss.s.cfg.MaxMessageBytes)
			return errTooLarge
		}
		if errors.Is(err, smtp.ErrTooLongLine) {
			// RFC 5321 §4.5.3.1.6; go-smtp closes the connection after
			// this reply, having lost the line boundaries.
			ss.s.cfg.Metrics.message("rejected")
			ss.s.logger.Info("message refused: a line is too long", "client_addr", ss.ip.String())
			return errLineTooLong
		}
		ss.s.cfg.Metrics.message("deferred")
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
			ss.s.logger.Info("reading a message", "client_addr", ss.ip.String(), "err", err)
			return errReading
		}
		ss.s.logger.Error("reading a message", "client_addr", ss.ip.String(), "err", err)
		return errInternal
	}

	defer sp.close()

	actx, acancel := context.WithTimeout(context.Background(), ss.s.cfg.AuthTimeout)
	res := ss.s.auth.check(actx, ss.ip.AsSlice(), ss.helo, ss.from,
		func() io.Reader { return sp.reader(int64(len(received))) })
	acancel()

	m := inmail.Message{ID: id, MailFrom: ss.from, Recipients: ss.rcpts, ClientIP: ss.ip, Helo: ss.helo, TLS: isTLS,
		ReceivedAt: now, Data: sp.data, Auth: res, AuthHeader: res.Header(ss.s.cfg.Hostname)}
	if sp.f != nil {
		m.Spool, m.Size = sp.f, sp.size
	}
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.CommandTimeout)
	defer cancel()
	if err := ss.s.accept.Accept(ctx, m); err != nil {
		ss.s.cfg.Metrics.message("deferred")
		if errors.Is(err, inmail.ErrOverBudget) {
			ss.s.logger.Info("message deferred: a team is over its inbound budget", "client_addr", ss.ip.String(),
				"inbound_id", id.String())
			return errOverBudget
		}
		ss.s.logger.Error("accepting an inbound message", "client_addr", ss.ip.String(), "inbound_id", id.String(),
			"err", err)
		return errInternal
	}
	ss.s.cfg.Metrics.message("accepted")
	ss.s.logger.Info("inbound message accepted", "client_addr", ss.ip.String(), "inbound_id", id.String(),
		"size", sp.size-int64(len(received)), "recipients", len(ss.rcpts), "spf", res.SPF.Result,
		"dmarc", res.DMARC.Result)
	return reply(250, 2, 0, 0, "Ok: queued as "+id.String())
}

// refuseMail answers a MAIL FROM the rates refuse (or could not check).
func (ss *session) refuseMail(err error) error {
	ss.s.cfg.Metrics.message("deferred")
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		ss.s.logger.Info("transaction deferred", "client_addr", ss.ip.String(), "reason", se.Message)
		return se
	}
	ss.s.logger.Error("checking an inbound rate", "client_addr", ss.ip.String(), "err", err)
	return errInternal
}

// Reset ends a transaction (RSET, the end of DATA, a new MAIL).
func (ss *session) Reset() {
	ss.inTx, ss.from, ss.rcpts = false, "", nil
	ss.s.srv.SetBusy(ss.tracked, false)
}

// Logout ends the session.
func (ss *session) Logout() error {
	ss.s.srv.SetBusy(ss.tracked, false)
	return nil
}

// receivedHeader is the trace field of RFC 5321 §4.4, with the protocol
// of RFC 3848 (ESMTP, or ESMTPS over TLS). The recipient is named only
// when there is one, so that one copy does not disclose the others.
func receivedHeader(helo string, ip netip.Addr, host string, id uuid.UUID, t *tls.ConnectionState, rcpts []inmail.Recipient,
	now time.Time) []byte {
	var b strings.Builder
	b.WriteString("Received: from ")
	b.WriteString(traceToken(helo))
	b.WriteString(" ([")
	b.WriteString(ip.String())
	b.WriteString("])\r\n\tby ")
	b.WriteString(traceToken(host))
	if t != nil {
		b.WriteString(" with ESMTPS (")
		b.WriteString(strings.ReplaceAll(tls.VersionName(t.Version), " ", ""))
		b.WriteString(" ")
		b.WriteString(tls.CipherSuiteName(t.CipherSuite))
		b.WriteString(")")
	} else {
		b.WriteString(" with ESMTP")
	}
	b.WriteString(" id ")
	b.WriteString(id.String())
	if len(rcpts) == 1 {
		b.WriteString("\r\n\tfor <")
		b.WriteString(rcpts[0].Address)
		b.WriteString(">")
	}
	b.WriteString(";\r\n\t")
	b.WriteString(now.Format(time.RFC1123Z))
	b.WriteString("\r\n")
	return []byte(b.String())
}

// traceToken makes a client-chosen name safe inside a header field: only
// the characters of domain names and address literals are kept.
func traceToken(s string) string {
	if s == "" {
		return "unknown"
	}
	if len(s) > 255 {
		s = s[:255]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune(".-_:[]", r):
			return r
		}
		return '?'
	}, s)
}
