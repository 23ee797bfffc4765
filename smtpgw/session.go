package smtpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/connlimit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// commandTimeout bounds the work behind one command (a key lookup, an
// acceptance); the network timeouts are the server's.
const commandTimeout = 30 * time.Second

// session is one client's state between EHLO and QUIT (a new one after
// STARTTLS).
type session struct {
	g       *Gateway
	conn    *smtp.Conn
	tracked *connlimit.Conn
	ip      string
	helo    string

	token     string // the API key, checked again at each MAIL FROM
	principal *auth.Principal

	from    string
	rcpts   []string
	started time.Time
}

var _ smtp.AuthSession = (*session)(nil)

// Replies. Texts are generic: nothing internal reaches a client.
var (
	errAuthRequired = reply(530, 5, 7, 0, "Authentication required")
	errAuthFailed   = reply(535, 5, 7, 8, "Authentication credentials invalid")
	errInternal     = reply(451, 4, 3, 0, "Internal error, try again later")
	errShuttingDown = reply(421, 4, 3, 2, "Service shutting down, try again later")
)

func reply(code, c1, c2, c3 int, msg string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{c1, c2, c3}, Message: msg}
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain, sasl.Login} }

func (s *session) Auth(mech string) (sasl.Server, error) {
	check := func(_, username, password string) error { return s.authenticate(username, password) }
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(check), nil
	case sasl.Login:
		return newLoginServer(func(u, p string) error { return check("", u, p) }), nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// authenticate checks the credentials after the address's throttle delay.
func (s *session) authenticate(username, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	s.g.thr.Wait(ctx, s.ip)
	if username != Username && username != ResendUsername {
		return s.authFailed("wrong user name")
	}
	p, err := s.g.cfg.Auth.Authenticate(ctx, password)
	if errors.Is(err, auth.ErrInvalidKey) {
		return s.authFailed("invalid API key")
	}
	if err != nil {
		s.g.logger.Error("checking an API key", "client_addr", s.ip, "err", err)
		return reply(454, 4, 7, 0, "Temporary authentication failure, try again later")
	}
	if !s.allowed(p) {
		return s.authFailed("client address outside the key's allowed_ips")
	}
	s.g.thr.Succeed(s.ip)
	s.token, s.principal = password, &p
	return nil
}

// allowed reports whether the key of p may be used from the client's
// address (its allowed_ips), as the API checks it.
func (s *session) allowed(p auth.Principal) bool {
	addr, _ := netip.ParseAddr(s.ip)
	return p.AllowsAddr(addr)
}

func (s *session) authFailed(why string) error {
	s.g.thr.Fail(s.ip)
	if s.g.cfg.Metrics != nil {
		s.g.cfg.Metrics.SMTPAuthFailures.Inc()
	}
	s.g.logger.Info("SMTP authentication failed", "client_addr", s.ip, "reason", why)
	return errAuthFailed
}

func (s *session) sender() submit.Sender {
	return submit.Sender{TeamID: s.principal.TeamID, KeyID: s.principal.KeyID, DomainID: s.principal.DomainID}
}

// Mail starts a transaction: it needs AUTH, a key that still works, room
// in the team's rate limit and a sender the team may use.
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.principal == nil {
		return errAuthRequired
	}
	if !s.g.srv.SetBusy(s.tracked, true) {
		return errShuttingDown
	}
	s.started = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	p, err := s.g.cfg.Auth.Authenticate(ctx, s.token)
	if errors.Is(err, auth.ErrInvalidKey) {
		s.principal = nil // revoked since AUTH
		return s.refuse("MAIL FROM", from, errAuthFailed)
	}
	if err != nil {
		s.g.logger.Error("checking an API key", "client_addr", s.ip, "err", err)
		return s.refuse("MAIL FROM", from, errInternal)
	}
	s.principal = &p
	if r := s.limit(ctx); r != nil {
		return s.refuse("MAIL FROM", from, r)
	}
	if err := s.g.cfg.Submit.CheckEnvelopeSender(ctx, s.sender(), from); err != nil {
		return s.refuse("MAIL FROM", from, s.g.mapError(err))
	}
	s.from = from
	return nil
}

// limit takes one request from the team's rate limit bucket.
func (s *session) limit(ctx context.Context) *smtp.SMTPError {
	if s.g.cfg.Limiter == nil {
		return nil
	}
	perSecond := s.g.cfg.DefaultRate
	if s.principal.RateLimit > 0 {
		perSecond = s.principal.RateLimit
	}
	r, err := s.g.cfg.Limiter.Allow(ctx, "team:"+s.principal.TeamID.String(), perSecond)
	if err != nil {
		s.g.logger.Error("rate limiter", "err", err)
		return errInternal
	}
	if !r.Allowed {
		return reply(451, 4, 7, 0, "Rate limit exceeded: "+strconv.Itoa(r.Limit)+
			" requests per second. Try again in "+strconv.Itoa(r.RetryAfterSeconds())+" s")
	}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.principal == nil {
		return errAuthRequired
	}
	if err := submit.CheckRecipient(to); err != nil {
		return reply(501, 5, 1, 3, "Invalid recipient address")
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// Data reads the message and hands it to submit. The success reply names
// the email's id, which GET /emails/{id} shows.
func (s *session) Data(r io.Reader) error {
	if s.principal == nil {
		return errAuthRequired
	}
	data, err := io.ReadAll(r)
	if err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return s.finish(len(data), nil, se) // over SIZE
		}
		return s.finish(len(data), nil, reply(451, 4, 3, 0, "Error reading the message, try again"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	res, err := s.g.cfg.Submit.SendMessage(ctx, s.sender(), submit.Message{
		EnvelopeFrom: s.from, Recipients: s.rcpts, Data: data,
	})
	if err != nil {
		return s.finish(len(data), data, s.g.mapError(err))
	}
	if s.g.cfg.Metrics != nil && !res.Replayed {
		s.g.cfg.Metrics.EmailsAccepted.WithLabelValues("smtp").Inc()
	}
	return s.finish(len(data), data, reply(250, 2, 0, 0, "Ok: queued as "+res.ID.String()))
}

// refuse ends a transaction refused at MAIL FROM.
func (s *session) refuse(cmd, from string, r *smtp.SMTPError) error {
	s.log(cmd, from, nil, 0, nil, r)
	s.g.srv.SetBusy(s.tracked, false)
	return r
}

// finish logs the outcome of DATA and returns it as the reply.
func (s *session) finish(size int, data []byte, r *smtp.SMTPError) error {
	s.log("DATA", s.from, s.rcpts, size, data, r)
	return r
}

func (s *session) Reset() {
	s.from, s.rcpts = "", nil
	s.g.srv.SetBusy(s.tracked, false)
}

func (s *session) Logout() error {
	s.g.srv.SetBusy(s.tracked, false)
	return nil
}

// logged is the request body of an SMTP entry in the request log.
type logged struct {
	MailFrom string   `json:"mail_from"`
	RcptTo   []string `json:"rcpt_to,omitempty"`
	Size     int      `json:"size,omitempty"`
	Subject  string   `json:"subject,omitempty"`
	Helo     string   `json:"helo,omitempty"`
	TLS      bool     `json:"tls"`
}

// log writes one transaction to the request log (method SMTP, path the
// command that ended it, status the reply code) and counts it.
func (s *session) log(cmd, from string, rcpts []string, size int, data []byte, r *smtp.SMTPError) {
	if m := s.g.cfg.Metrics; m != nil {
		result := map[int]string{2: "accepted", 4: "deferred", 5: "rejected"}[r.Code/100]
		m.SMTPTransactions.WithLabelValues(result).Inc()
	}
	if s.g.cfg.RequestLog == nil || s.principal == nil {
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		return
	}
	_, isTLS := s.conn.TLSConnectionState()
	body, _ := json.Marshal(logged{MailFrom: from, RcptTo: rcpts, Size: size, Subject: subjectOf(data),
		Helo: s.helo, TLS: isTLS})
	resp, _ := json.Marshal(map[string]any{"code": r.Code,
		"enhanced_code": strconv.Itoa(r.EnhancedCode[0]) + "." + strconv.Itoa(r.EnhancedCode[1]) + "." +
			strconv.Itoa(r.EnhancedCode[2]),
		"message": r.Message})
	reqBody, respBody := string(body), string(resp)
	ua := "SMTP client " + s.helo
	start := s.started
	if start.IsZero() {
		start = time.Now()
	}
	team, key := s.principal.TeamID, s.principal.KeyID
	s.g.cfg.RequestLog.Log(store.RequestLog{ID: id, TeamID: &team, KeyID: &key, Method: "SMTP", Path: cmd,
		Status: r.Code, UserAgent: &ua, ClientAddr: s.ip, Duration: time.Since(start), CreatedAt: start,
		RequestBody: &reqBody, ResponseBody: &respBody})
}

// subjectOf reads the Subject of a message for the log, cheaply.
func subjectOf(data []byte) string {
	end := bytes.Index(data, []byte("\r\n\r\n"))
	if end < 0 {
		end = min(len(data), 64<<10)
	}
	for _, line := range bytes.Split(data[:end], []byte("\r\n")) {
		if len(line) > 8 && strings.EqualFold(string(line[:8]), "subject:") {
			s := strings.TrimSpace(string(line[8:]))
			if len(s) > 200 {
				s = s[:200]
			}
			return strings.ToValidUTF8(s, "")
		}
	}
	return ""
}

// mapError turns a submit error into the reply: an *submit.Error by its
// Kind with its own text (made safe for one reply line), anything else
// into the generic internal error.
func (g *Gateway) mapError(err error) *smtp.SMTPError {
	var se *submit.Error
	var quota *store.QuotaExceededError
	switch {
	case errors.As(err, &quota):
		return reply(550, 5, 7, 0, "Monthly sending quota exceeded")
	case !errors.As(err, &se):
		g.logger.Error("accepting a message", "err", err)
		return errInternal
	}
	msg := oneLine(se.Message)
	switch se.Kind {
	case submit.KindForbidden:
		return reply(550, 5, 7, 1, msg)
	case submit.KindTooLarge:
		return reply(552, 5, 3, 4, msg)
	case submit.KindMalformedMessage:
		return reply(554, 5, 6, 0, "Message is not a valid RFC 5322 message: "+msg)
	case submit.KindIdempotencyInFlight:
		return reply(451, 4, 7, 0, msg)
	case submit.KindIdempotencyMismatch:
		return reply(550, 5, 7, 0, msg)
	case submit.KindInvalidParameter:
		return reply(553, 5, 1, 7, msg)
	case submit.KindValidation, submit.KindMissingField, submit.KindInvalidIdempotencyKey:
		return reply(554, 5, 6, 0, msg)
	}
	return reply(554, 5, 0, 0, msg)
}

// oneLine makes a message safe for one reply line: no control
// characters, at most 300 bytes.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
