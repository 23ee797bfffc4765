package insights

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
)

// maxNesting bounds how deep FromSource walks multipart bodies.
const maxNesting = 20

// FromSource reads the header fields and the attachments of a message
// submitted as bytes (over SMTP), as far as its MIME structure can be
// read; a part counts as an attachment when its Content-Disposition is
// attachment or it names a file.
func FromSource(raw []byte) ([]Header, []Attachment) {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, nil
	}
	var hs []Header
	for name, values := range m.Header {
		for _, v := range values {
			hs = append(hs, Header{Name: name, Value: v})
		}
	}
	var atts []Attachment
	walkParts(m.Header.Get("Content-Type"), m.Body, 0, &atts)
	return hs, atts
}

func walkParts(contentType string, body io.Reader, depth int, atts *[]Attachment) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" || depth >= maxNesting {
		return
	}
	r := multipart.NewReader(body, params["boundary"])
	for {
		p, err := r.NextPart()
		if err != nil {
			return
		}
		ct := p.Header.Get("Content-Type")
		if strings.HasPrefix(strings.ToLower(ct), "multipart/") {
			walkParts(ct, p, depth+1, atts)
			continue
		}
		disp, _, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		name := p.FileName()
		if name == "" {
			if _, cparams, err := mime.ParseMediaType(ct); err == nil {
				name = cparams["name"]
			}
		}
		if disp == "attachment" || name != "" {
			ctype, _, _ := mime.ParseMediaType(ct)
			*atts = append(*atts, Attachment{Filename: name, ContentType: ctype})
		}
	}
}
