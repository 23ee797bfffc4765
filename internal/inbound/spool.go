package inbound

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

// readMessage reads a message of at most limit bytes from r and returns
// prefix followed by it, in one slice of exactly that size once the
// message is larger than spoolMemory. A message over limit returns
// errTooLarge, having read no more than limit+1 bytes of it (the caller,
// go-smtp, discards the rest without keeping it). Large messages are
// spooled to a temporary file in dir while they are read, so that memory
// holds one copy at the end, not a growing buffer and its copies.
func readMessage(r io.Reader, limit int64, prefix []byte, dir string) ([]byte, error) {
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
		return buf.Bytes(), nil
	}

	f, err := os.CreateTemp(dir, "posthaste-inbound-*")
	if err != nil {
		return nil, fmt.Errorf("creating a spool file: %w", err)
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	if _, err := f.Write(buf.Bytes()[len(prefix):]); err != nil {
		return nil, fmt.Errorf("writing a spool file: %w", err)
	}
	buf = nil
	rest, err := io.Copy(f, lr)
	if err != nil {
		return nil, readError(err)
	}
	total := n + rest
	if total > limit {
		return nil, errTooLarge
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("reading a spool file: %w", err)
	}
	data := make([]byte, int64(len(prefix))+total)
	copy(data, prefix)
	if _, err := io.ReadFull(f, data[len(prefix):]); err != nil {
		return nil, fmt.Errorf("reading a spool file: %w", err)
	}
	return data, nil
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
