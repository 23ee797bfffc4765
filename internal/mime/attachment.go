package mime

import (
	"bufio"
	"bytes"
	"fmt"
	stdmime "mime"
	"strings"

	"github.com/emersion/go-message/textproto"
)

// CheckAttachmentType checks the declared content type of an attachment:
// a media type Build can parse and carry. multipart/* is refused: an
// attachment is a file, and a multipart entity is MIME structure whose
// content must match its boundary parameter and may not be base64-encoded
// (RFC 2046 §5.1), so carrying it would let a sender inject structure into
// the message and relabelling it would silently change what was asked for.
func CheckAttachmentType(contentType string) error {
	mediaType, _, err := stdmime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("invalid content type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		return fmt.Errorf("content type %q is MIME structure, not a file type", mediaType)
	}
	return nil
}

func attachmentPart(a Attachment, html bool) (*node, error) {
	ct := a.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	if err := CheckAttachmentType(ct); err != nil {
		return nil, err
	}
	mediaType, ctParams, _ := stdmime.ParseMediaType(ct) // checked above
	body, encoding := a.Content, "base64"
	if strings.HasPrefix(mediaType, "message/") {
		if raw, enc, ok := unencodedMessage(mediaType, a.Content); ok {
			body, encoding = raw, enc
		} else if mediaType != "message/global" {
			// RFC 6532 §3.5 allows message/global in base64; the other
			// message types it cannot be (RFC 2046 §5.2), so the content
			// goes as the file it is.
			mediaType, ctParams = "application/octet-stream", nil
		}
	}
	delete(ctParams, "name")
	params := sortedParams(ctParams)
	var dispParams []param
	if a.Filename != "" {
		name := validUTF8(a.Filename)
		// The name parameter of Content-Type is obsolete but still read by
		// some clients; filename (RFC 2183 §2.3) is the standard one.
		params = append(params, param{"name", name})
		dispParams = []param{{"filename", name}}
	}

	disposition := "attachment"
	if a.ContentID != "" && html {
		disposition = "inline"
	}
	n := &node{
		fields: fieldList{
			{"Content-Type", formatMediaType(mediaType, params)},
			{"Content-Transfer-Encoding", encoding},
			{"Content-Disposition", formatMediaType(disposition, dispParams)},
		},
		body: body,
		raw:  encoding != "base64",
	}
	if a.ContentID != "" {
		id := strings.TrimSuffix(strings.TrimPrefix(a.ContentID, "<"), ">")
		for _, r := range id {
			if r <= ' ' || r >= 0x7f || r == '<' || r == '>' {
				return nil, fmt.Errorf("invalid content id %q", a.ContentID)
			}
		}
		if id == "" {
			return nil, fmt.Errorf("invalid content id %q", a.ContentID)
		}
		// RFC 2045 §7 and RFC 2392 §2: Content-ID is a msg-id in brackets.
		n.fields = append(n.fields, field{"Content-ID", "<" + id + ">"})
	}
	return n, nil
}

// unencodedMessage returns content with CRLF line ends and the transfer
// encoding to carry it as mediaType (a message/* type) without encoding, or
// false when it cannot be: RFC 2045 §2.7 and §2.8 allow neither NUL nor
// lines over 998 octets in 7bit or 8bit data, and only message/rfc822
// (RFC 2046 §5.2.1) and message/global (RFC 6532 §3.5) may be 8bit. An
// attached message must also have a header that reads as one, or a mail
// reader would show an empty message.
func unencodedMessage(mediaType string, content []byte) ([]byte, string, bool) {
	body := normalizeCRLF(content)
	eightBit := false
	for line := range bytes.SplitSeq(body, []byte("\r\n")) {
		if len(line) > maxLineLen || bytes.IndexByte(line, 0) >= 0 {
			return nil, "", false
		}
		eightBit = eightBit || bytes.IndexFunc(line, func(r rune) bool { return r >= 0x80 }) >= 0
	}
	message := mediaType == "message/rfc822" || mediaType == "message/global"
	if eightBit && !message {
		return nil, "", false
	}
	if message {
		h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(body)))
		if err != nil || h.Len() == 0 {
			return nil, "", false
		}
	}
	if eightBit {
		return body, "8bit", true
	}
	return body, "7bit", true
}
