package delivery

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/tracking"
	"github.com/posthaste/posthaste/internal/unsubscribe"
	"github.com/posthaste/posthaste/workflows/contract"
)

// Open and click tracking (issue 19): mail from a domain with open or
// click tracking on, whose Tracking record (the CNAME of its tracking
// subdomain) is verified, carries per recipient an open pixel and links
// rewritten to https://<tracking subdomain>.<domain>/c/<token> (in
// `posthaste dev` without a tracking host, to its own address, with no
// record: Config.LocalTracking), so it is
// built and DKIM-signed per recipient in Deliver, after the rewriting. The
// copy Prepare stores (what GET /emails/{id} shows) is not rewritten.
// Mail submitted over SMTP is tracked alike: the text/html parts of the
// submitted message (in UTF-8 or US-ASCII, not attachments) are rewritten,
// everything else is copied.

// trackFunc returns e with its HTML body tracked for recipient number i
// of e.Recipients.
type trackFunc func(e store.Email, i int) (store.Email, error)

// tracker returns how mail of e from domain d is tracked; nil when it is
// not.
func (a *Sending) tracker(d store.Domain, e store.Email) (trackFunc, error) {
	if (e.Source == nil && e.HTML == nil) || len(a.trackingKey) == 0 || !(d.OpenTracking || d.ClickTracking) ||
		d.TrackingSubdomain == "" {
		return nil, nil
	}
	if a.localTracking == "" && d.RecordStatus[records.KeyTracking] != store.DomainVerified {
		return nil, nil
	}
	sealer, err := tracking.NewSealer(a.trackingKey)
	if err != nil {
		return nil, err
	}
	links := tracking.Links{Host: d.TrackingSubdomain + "." + d.Name, Sealer: sealer}
	if a.localTracking != "" { // dev: under its own address, no DNS record
		links = tracking.Links{Host: a.localTrackingHost, Base: a.localTracking, Sealer: sealer}
	}
	var keep func(string) bool
	if u := a.unsubscribe; u != nil {
		prefix := u.Base + unsubscribe.Path
		keep = func(link string) bool { return strings.HasPrefix(link, prefix) }
	}
	return func(e store.Email, i int) (store.Email, error) {
		track := func(body string) (string, error) {
			html, _, err := links.Track(body, e.TeamID, e.ID, i, d.OpenTracking, d.ClickTracking, keep)
			if err != nil {
				return "", fmt.Errorf("tracking the body: %w", err)
			}
			return html, nil
		}
		if e.Source != nil {
			src, err := trackSubmitted(e.Source, track)
			if errors.Is(err, errUnreadable) {
				return e, nil
			}
			if err != nil {
				return store.Email{}, err
			}
			e.Source = src
			return e, nil
		}
		html, err := track(*e.HTML)
		if err != nil {
			return store.Email{}, err
		}
		e.HTML = &html
		return e, nil
	}, nil
}

// recipientIndex maps each address of e's recipients to its first index.
func recipientIndex(e store.Email) map[string]int {
	index := make(map[string]int, len(e.Recipients))
	for i, r := range e.Recipients {
		if _, dup := index[r.Address]; !dup {
			index[r.Address] = i
		}
	}
	return index
}

// trackedMessages builds and signs the tracked message of each of rcpts
// of an email that is not otherwise built per recipient, dated like
// stored; nil when e is not tracked. Errors that retrying cannot fix are
// classified permanent.
func (a *Sending) trackedMessages(ctx context.Context, e store.Email, d *store.Domain, stored []byte, rcpts []string) (map[string][]byte, error) {
	if e.DomainID == nil || (e.Source == nil && e.HTML == nil) || len(a.trackingKey) == 0 {
		return nil, nil
	}
	if d == nil {
		return nil, classify(fmt.Errorf("loading domain of %s: %w", e.ID, store.ErrNotFound))
	}
	track, err := a.tracker(*d, e)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
	}
	if track == nil {
		return nil, nil
	}
	var at time.Time
	if e.Source == nil {
		if at, err = messageDate(stored); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
		}
		// Built again for each recipient: with its attachments.
		if e.Attachments, err = a.emails.Attachments(ctx, e.ID); err != nil {
			return nil, err
		}
	}
	sign, err := a.signerFor(*d)
	if err != nil {
		return nil, classify(err)
	}
	index := recipientIndex(e)
	out := make(map[string][]byte, len(rcpts))
	for _, r := range rcpts {
		te, err := track(e, index[r])
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
		}
		msg := te.Source // submitted over SMTP: tracked, otherwise as submitted
		if msg == nil {
			msg, err = BuildMessage(te, at)
		}
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

// errUnreadable is a submitted message trackSubmitted cannot parse: it
// is delivered as submitted, untracked.
var errUnreadable = errors.New("reading the submitted message")

// maxTrackedDepth bounds the nesting of multiparts trackSubmitted goes
// into; deeper parts are copied as they are.
const maxTrackedDepth = 10

// trackSubmitted returns the message raw (submitted over SMTP) with each
// of its text/html parts that is not an attachment and is in UTF-8 or
// US-ASCII rewritten by track. Everything else is copied as it is, but
// for multipart preambles and epilogues, which are dropped. A rewritten
// part written 7bit or 8bit is written quoted-printable: tracked links
// make lines longer.
func trackSubmitted(raw []byte, track func(string) (string, error)) ([]byte, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	h, err := textproto.ReadHeader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreadable, err)
	}
	var out bytes.Buffer
	out.Grow(len(raw) + len(raw)/4)
	if err := trackPart(&out, h, br, track, 0); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// trackPart writes the part of header h and body body to w, its HTML
// rewritten by track (see trackSubmitted).
func trackPart(w io.Writer, h textproto.Header, body io.Reader, track func(string) (string, error), depth int) error {
	mediaType, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		mediaType = ""
	}
	disposition, _, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	switch {
	case strings.HasPrefix(mediaType, "multipart/") && params["boundary"] != "" && depth < maxTrackedDepth:
		if err := textproto.WriteHeader(w, h); err != nil {
			return err
		}
		b := params["boundary"]
		mr := textproto.NewMultipartReader(body, b)
		for n := 0; ; n++ {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("%w: %w", errUnreadable, err)
			}
			sep := "\r\n--" + b + "\r\n"
			if n == 0 {
				sep = sep[2:]
			}
			if _, err := io.WriteString(w, sep); err != nil {
				return err
			}
			if err := trackPart(w, p.Header, p, track, depth+1); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, "\r\n--"+b+"--\r\n")
		return err
	case mediaType == "text/html" && !strings.EqualFold(disposition, "attachment") &&
		(params["charset"] == "" || strings.EqualFold(params["charset"], "utf-8") ||
			strings.EqualFold(params["charset"], "us-ascii")):
		raw, err := io.ReadAll(body)
		if err != nil {
			return fmt.Errorf("%w: %w", errUnreadable, err)
		}
		// Decode the transfer encoding only: the charset is UTF-8 already.
		dh := h.Copy()
		dh.Set("Content-Type", "text/html")
		ent, err := message.New(message.Header{Header: dh}, bytes.NewReader(raw))
		var decoded []byte
		if err == nil {
			decoded, err = io.ReadAll(ent.Body)
		}
		if err != nil { // an unknown or broken encoding: copied
			if err := textproto.WriteHeader(w, h); err != nil {
				return err
			}
			_, err = w.Write(raw)
			return err
		}
		html, err := track(string(decoded))
		if err != nil {
			return err
		}
		oh := h.Copy()
		switch strings.ToLower(strings.TrimSpace(oh.Get("Content-Transfer-Encoding"))) {
		case "quoted-printable", "base64":
		default:
			oh.Set("Content-Transfer-Encoding", "quoted-printable")
		}
		mw, err := message.CreateWriter(w, message.Header{Header: oh})
		if err != nil {
			return fmt.Errorf("writing the tracked body: %w", err)
		}
		if _, err := io.WriteString(mw, html); err != nil {
			return err
		}
		return mw.Close()
	}
	if err := textproto.WriteHeader(w, h); err != nil {
		return err
	}
	_, err = io.Copy(w, body)
	return err
}
