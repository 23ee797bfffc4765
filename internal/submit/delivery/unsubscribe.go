package delivery

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/unsubscribe"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Mail sent with a topic carries each recipient's own unsubscribe link
// (RFC 2369 List-Unsubscribe, RFC 8058 one-click), so it is built and
// DKIM-signed per recipient in Deliver. Prepare still stores one copy, as
// for any email: the message without the per-recipient parts (no
// List-Unsubscribe fields, and the body's unsubscribe placeholders left as
// they are, unsubscribe.Placeholder), so that no recipient's link shows in
// what the team reads back. Deliver rebuilds each recipient's message
// from the email row, dated like the stored copy, so a retry sends the
// same message.

// errNoLinks is an email that needs unsubscribe links in a process that
// cannot make them.
var errNoLinks = errors.New("this email was sent with a topic, so each recipient's copy carries an unsubscribe link, " +
	"and unsubscribe links need POSTHASTE_PUBLIC_URL and a master key (POSTHASTE_MASTER_KEY), which this worker lacks")

// perRecipient reports whether e is built per recipient: an API email
// sent with a topic, or a broadcast's email. Mail submitted over SMTP is
// delivered as submitted.
func perRecipient(e store.Email) bool {
	return (e.TopicID != nil || e.BroadcastID != nil) && e.Source == nil
}

// BuildForRecipient renders e as the message for one recipient, dated at:
// the body's and subject's unsubscribe placeholders replaced by url, and
// List-Unsubscribe: <url> with List-Unsubscribe-Post:
// List-Unsubscribe=One-Click (RFC 8058 §3.1; dkim.Sign signs both) in
// place of any the sender set itself. A non-empty mailtoAddr (the
// recipient's mailto unsubscribe address, mailto.Make) is the field's
// second entry: <url>, <mailto:mailtoAddr> (RFC 2369 §3.2).
func BuildForRecipient(e store.Email, at time.Time, url, mailtoAddr string) ([]byte, error) {
	e.Subject = unsubscribe.ReplacePlaceholders(e.Subject, url)
	if e.HTML != nil {
		html := unsubscribe.ReplacePlaceholders(*e.HTML, url)
		e.HTML = &html
	}
	if e.Text != nil {
		text := unsubscribe.ReplacePlaceholders(*e.Text, url)
		e.Text = &text
	}
	headers := make([]store.Header, 0, len(e.Headers)+2)
	for _, h := range e.Headers {
		if strings.EqualFold(h.Name, "List-Unsubscribe") || strings.EqualFold(h.Name, "List-Unsubscribe-Post") {
			continue
		}
		headers = append(headers, h)
	}
	list := "<" + url + ">"
	if mailtoAddr != "" {
		list += ", <mailto:" + mailtoAddr + ">"
	}
	e.Headers = append(headers,
		store.Header{Name: "List-Unsubscribe", Value: list},
		store.Header{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"})
	return BuildMessage(e, at)
}

// messageDate is the Date of a stored message, which recipients' copies
// share.
func messageDate(msg []byte) (time.Time, error) {
	h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(msg)))
	if err != nil {
		return time.Time{}, fmt.Errorf("reading stored message header: %w", err)
	}
	mh := mail.Header{Header: message.Header{Header: h}}
	at, err := mh.Date()
	if err != nil {
		return time.Time{}, fmt.Errorf("reading stored message date: %w", err)
	}
	if at.IsZero() {
		return time.Time{}, errors.New("the stored message has no date")
	}
	return at, nil
}

// signerFor returns a function that adds d's DKIM signature to a message,
// the domain's key opened once.
func (a *Sending) signerFor(d store.Domain) (func([]byte) ([]byte, error), error) {
	key, err := a.domainKey(d)
	if err != nil {
		return nil, err
	}
	return func(msg []byte) ([]byte, error) { return signWith(d, key, msg) }, nil
}

// recipientMessages builds and signs the message of each of rcpts (see
// BuildForRecipient), dated like stored, the copy Prepare stored. Errors
// that retrying cannot fix are classified permanent.
func (a *Sending) recipientMessages(ctx context.Context, e store.Email, d *store.Domain, stored []byte, rcpts []string) (map[string][]byte, error) {
	links := a.unsubscribe
	if links == nil {
		return nil, temporal.NewNonRetryableApplicationError(errNoLinks.Error(), contract.ErrTypePermanent, errNoLinks)
	}
	at, err := messageDate(stored)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
	}
	// Built again for each recipient: with its attachments.
	if e.Attachments, err = a.emails.Attachments(ctx, e.ID); err != nil {
		return nil, err
	}
	sign := func(msg []byte) ([]byte, error) { return msg, nil } // the sandbox sender does not sign

	var track trackFunc // nil: not tracked
	// Mail from a domain also names a mailto unsubscribe address at its
	// return-path host, which the inbound MX receives; the sandbox sender
	// has no such host.
	mailtoHost := ""
	if e.DomainID != nil {
		if d == nil {
			return nil, classify(fmt.Errorf("loading domain of %s: %w", e.ID, store.ErrNotFound))
		}
		var err error
		if sign, err = a.signerFor(*d); err != nil {
			return nil, classify(err)
		}
		if track, err = a.tracker(*d, e); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
		}
		if len(a.unsubscribeMailtoKey) > 0 {
			mailtoHost = d.ReturnPath + "." + d.Name
		}
	}
	index := recipientIndex(e)
	out := make(map[string][]byte, len(rcpts))
	for _, r := range rcpts {
		url, err := links.URL(unsubscribe.Token{TeamID: e.TeamID, EmailID: e.ID, TopicID: e.TopicID, BroadcastID: e.BroadcastID, Email: r})
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("making the unsubscribe link: %v", err), contract.ErrTypePermanent, err)
		}
		mailtoAddr := ""
		if i, ok := index[r]; ok && mailtoHost != "" {
			if mailtoAddr, err = mailto.Make(a.unsubscribeMailtoKey, e.ID, i, mailtoHost); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("making the mailto unsubscribe address: %v", err), contract.ErrTypePermanent, err)
			}
		}
		te := e
		if track != nil {
			// Before the placeholders are filled: the unsubscribe links
			// are not tracked.
			if te, err = track(e, index[r]); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
			}
		}
		msg, err := BuildForRecipient(te, at, url, mailtoAddr)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("building message: %v", err), contract.ErrTypePermanent, err)
		}
		if out[r], err = sign(msg); err != nil {
			return nil, classify(err)
		}
	}
	return out, nil
}

// deliverEach hands each recipient its own copy, one transaction per
// recipient (the MTA client reuses its connection to the MX between
// them), and returns the results in the order of env.To. progress is
// called with each final outcome as it comes, so the liveness heartbeats
// carry it. Each copy is its own message (msgs[r]; env.Data when msgs is
// nil) from its own return path (froms[r]; env.From when froms is nil).
func (a *Sending) deliverEach(ctx context.Context, d Deliverer, domain string, env mta.Envelope, msgs map[string][]byte,
	froms map[string]string, progress func(mta.Result)) []mta.Result {
	results := make([]mta.Result, 0, len(env.To))
	for _, r := range env.To {
		one := env
		one.To = []string{r}
		if msgs != nil {
			one.Data = msgs[r]
		}
		if froms != nil {
			one.From = froms[r]
		}
		res := d.Deliver(ctx, domain, one)
		for _, x := range res {
			if x.Status == mta.Delivered || x.Status == mta.Bounced {
				progress(x)
			}
		}
		results = append(results, res...)
		if len(res) > 0 && res[0].Status == mta.Refused {
			// Every recipient of a domain takes the same route.
			for _, rest := range env.To[len(results):] {
				results = append(results, mta.Result{Rcpt: rest, Status: mta.Refused, Message: res[0].Message})
			}
			break
		}
	}
	return results
}
