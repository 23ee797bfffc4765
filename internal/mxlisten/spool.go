package mxlisten

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/emersion/go-smtp"
)

// spoolMemory is how much of a message is read into memory before the
// rest goes to a temporary file.
const spoolMemory = 1 << 20

// errTooLarge is go-smtp's 552 5.3.4 reply (RFC 3463: message length
// exceeds administrative limit).
var errTooLarge = smtp.ErrDataTooLarge

// spooled is a message as read: in memory when it is at most spoolMemory
// bytes, else in a temporary file that close removes. Either way it is
// held once: a large message is never read back into memory whole, but
// streamed from the file by whoever needs it (the checks, the Acceptor).
type spooled struct {
	data []byte   // the message, when in memory
	f    *os.File // the message, when spooled
	size int64
}

// reader reads the message from offset off.
func (s *spooled) reader(off int64) io.Reader {
	if s.f != nil {
		return io.NewSectionReader(s.f, off, s.size-off)
	}
	return bytes.NewReader(s.data[off:])
}

// close removes the spool file, if any.
func (s *spooled) close() {
	if s.f != nil {
		_ = s.f.Close()
		_ = os.Remove(s.f.Name())
		s.f = nil
	}
}

// readMessage reads a message of at most limit bytes from r and returns
// prefix followed by it. A message over limit returns errTooLarge, having
// read no more than limit+1 bytes of it (the caller, go-smtp, discards the
// rest without keeping it). A message larger than spoolMemory is spooled
// to a temporary file in dir while it is read and stays there (the
// caller closes it): memory holds no copy of it, only a buffer.
func readMessage(r io.Reader, limit int64, prefix []byte, dir string) (*spooled, error) {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	buf := bytes.NewBuffer(make([]byte, 0, len(prefix)+64<<10))
	buf.Write(prefix)
	n, err := io.CopyN(buf, lr, spoolMemory+1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, readError(err)
	}
	if errors.Is(err, io.EOF) {
		if n > limit {
			return nil, errTooLarge
		}
		return &spooled{data: buf.Bytes(), size: int64(buf.Len())}, nil
	}

	f, err := os.CreateTemp(dir, "posthaste-inbound-*")
	if err != nil {
		return nil, fmt.Errorf("creating a spool file: %w", err)
	}
	sp := &spooled{f: f}
	ok := false
	defer func() {
		if !ok {
			sp.close()
		}
	}()
	if _, err := f.Write(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("writing a spool file: %w", err)
	}
	buf = nil
	rest, err := io.Copy(f, lr)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("writing a spool file: %w", err)
		}
		return nil, readError(err)
	}
	if n+rest > limit {
		return nil, errTooLarge
	}
	sp.size = int64(len(prefix)) + n + rest
	ok = true
	return sp, nil
}

// readError keeps go-smtp's size refusal and wraps anything else (a
// connection that broke or timed out).
func readError(err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se
	}
	return fmt.Errorf("reading the message: %w", err)
}
