package postfixtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Log is the instance's log so far ("" before postlogd wrote any).
func (in *Instance) Log() string {
	b, _ := os.ReadFile(in.logPath)
	return string(b)
}

// Tail returns the last n lines of the instance's log.
func (in *Instance) Tail(n int) string {
	s := strings.TrimRight(in.Log(), "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Counts is what the instance logged: messages the queue manager removed
// (each one delivered, discarded or bounced, and so done with) and SMTP
// commands its smtpd rejected.
type Counts struct {
	Removed  int
	Rejected int
}

// ReadLog counts what the instance has logged so far.
func (in *Instance) ReadLog() (Counts, error) {
	f, err := os.Open(in.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return Counts{}, nil // postlogd has not written yet
	}
	if err != nil {
		return Counts{}, fmt.Errorf("reading the Postfix log: %w", err)
	}
	defer f.Close()
	var c Counts
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "postfix/qmgr[") && strings.HasSuffix(line, ": removed"):
			c.Removed++
		case strings.Contains(line, "postfix/smtpd[") && strings.Contains(line, ": reject: "):
			c.Rejected++
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading the Postfix log: %w", err)
	}
	return c, nil
}

// WaitRemoved polls the log until it shows n messages removed from the
// queue (postlogd writes it a moment after the fact), ctx ends or timeout
// passes, and returns the counts last seen.
func (in *Instance) WaitRemoved(ctx context.Context, n int, timeout time.Duration) (Counts, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := in.ReadLog()
		if err != nil {
			return c, err
		}
		if c.Removed >= n {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("the Postfix log shows %d of %d messages removed from the queue after %s:\n%s",
				c.Removed, n, timeout, in.Tail(10))
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
