package mta

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxReplyLines bounds a multi-line reply; EHLO replies, the longest in
// practice, have a few dozen lines. Line length is bounded by the size of the
// bufio.Reader (RFC 5321 §4.5.3.1.5 allows 512 octets).
const maxReplyLines = 100

// reply is one server reply (RFC 5321 §4.2).
type reply struct {
	code     int
	enhanced string // RFC 3463 status code such as "5.1.1", or ""
	text     string // the lines' texts joined by "\n", codes removed
}

// String formats the reply on one line for messages and logs.
func (r reply) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(r.code))
	if r.enhanced != "" {
		b.WriteByte(' ')
		b.WriteString(r.enhanced)
	}
	if r.text != "" {
		b.WriteByte(' ')
		b.WriteString(strings.ReplaceAll(r.text, "\n", " "))
	}
	return b.String()
}

// errMalformedReply marks a reply that does not follow RFC 5321 §4.2.
var errMalformedReply = errors.New("malformed reply")

// readReply reads one reply, single- or multi-line, from br.
func readReply(br *bufio.Reader) (reply, error) {
	var (
		r     reply
		lines []string
	)
	for i := 0; ; i++ {
		if i == maxReplyLines {
			return reply{}, fmt.Errorf("%w: more than %d lines", errMalformedReply, maxReplyLines)
		}
		line, err := br.ReadSlice('\n')
		if err != nil {
			switch {
			case errors.Is(err, bufio.ErrBufferFull):
				return reply{}, fmt.Errorf("%w: line longer than %d bytes", errMalformedReply, br.Size())
			case errors.Is(err, io.EOF) && (len(line) > 0 || i > 0):
				return reply{}, io.ErrUnexpectedEOF
			}
			return reply{}, err
		}
		code, more, text, err := parseReplyLine(line)
		if err != nil {
			return reply{}, err
		}
		if i == 0 {
			r.code = code
		} else if code != r.code {
			return reply{}, fmt.Errorf("%w: code %d in a reply that began with %d", errMalformedReply, code, r.code)
		}
		lines = append(lines, text)
		if !more {
			break
		}
	}
	r.enhanced, lines = splitEnhancedCode(r.code, lines)
	r.text = strings.Join(lines, "\n")
	return r, nil
}

// parseReplyLine parses one reply line: three digits, then "-" on all lines
// but the last, or " " or nothing on the last (RFC 5321 §4.2.1), then text.
func parseReplyLine(line []byte) (code int, more bool, text string, err error) {
	line = trimEOL(line)
	if len(line) < 3 || line[0] < '2' || line[0] > '5' || !isDigit(line[1]) || !isDigit(line[2]) {
		return 0, false, "", fmt.Errorf("%w: %.40q", errMalformedReply, line)
	}
	code = int(line[0]-'0')*100 + int(line[1]-'0')*10 + int(line[2]-'0')
	if len(line) == 3 {
		return code, false, "", nil
	}
	switch line[3] {
	case ' ':
	case '-':
		more = true
	default:
		return 0, false, "", fmt.Errorf("%w: %.40q", errMalformedReply, line)
	}
	// Reply text ends up in events and API responses: keep it valid UTF-8.
	return code, more, strings.ToValidUTF8(string(line[4:]), "\uFFFD"), nil
}

func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// splitEnhancedCode takes the RFC 3463 enhanced status code off the reply's
// lines. RFC 2034 §4 puts it at the start of every line; only a code whose
// class matches the reply's first digit counts (RFC 3463 §2).
func splitEnhancedCode(code int, lines []string) (string, []string) {
	if len(lines) == 0 {
		return "", lines
	}
	ec, _, ok := parseEnhancedCode(lines[0])
	if !ok || int(ec[0]-'0') != code/100 {
		return "", lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if got, rest, ok := parseEnhancedCode(l); ok && got == ec {
			l = rest
		}
		out[i] = l
	}
	return ec, out
}

// parseEnhancedCode parses an RFC 3463 §2 status code at the start of s:
// class "." subject "." detail, class one of 2, 4, 5, subject and detail of
// one to three digits, followed by a space or the end of s. It returns the
// code and the text after it.
func parseEnhancedCode(s string) (code, rest string, ok bool) {
	if len(s) < 5 || (s[0] != '2' && s[0] != '4' && s[0] != '5') || s[1] != '.' {
		return "", s, false
	}
	i := 2
	for part := 0; part < 2; part++ {
		n := 0
		for i < len(s) && isDigit(s[i]) && n < 4 {
			i++
			n++
		}
		if n == 0 || n > 3 {
			return "", s, false
		}
		if part == 0 {
			if i == len(s) || s[i] != '.' {
				return "", s, false
			}
			i++
		}
	}
	switch {
	case i == len(s):
		return s, "", true
	case s[i] == ' ':
		return s[:i], s[i+1:], true
	}
	return "", s, false
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
