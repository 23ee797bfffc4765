package mtasts

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Mode is a policy's mode (RFC 8461 §5).
type Mode string

const (
	// Enforce: deliver only to listed MX hosts over TLS with a valid
	// certificate.
	Enforce Mode = "enforce"
	// Testing: check as under Enforce, report failures, deliver anyway.
	Testing Mode = "testing"
	// None: the domain has no active policy (how a domain withdraws one,
	// RFC 8461 §8.3).
	None Mode = "none"
)

// MaxAge is the longest max_age a policy may have (RFC 8461 §3.2: about a
// year); larger values are read as this.
const MaxAge = 31557600 * time.Second

// Policy is a domain's MTA-STS policy (RFC 8461 §3.2).
type Policy struct {
	Mode Mode
	// MX are the patterns of the MX hosts the policy allows: host names or
	// "*." wildcards, lower case, without a trailing dot. Empty only in
	// mode none.
	MX []string
	// MaxAge is how long the policy may be cached.
	MaxAge time.Duration
	// ID is the id of the TXT record the policy was fetched under.
	ID string
}

// Parse reads a policy body (RFC 8461 §3.2): "key: value" lines ended by
// CRLF or LF. version (STSv1), mode and max_age are required, mx too unless
// the mode is none; unknown keys are ignored, and of a repeated key other
// than mx the first occurrence counts.
func Parse(body string) (*Policy, error) {
	var p Policy
	var version, mode, maxAge bool
	for line := range strings.SplitSeq(body, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimRight(line, " \t") == "" {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok || !validKey(key) {
			return nil, fmt.Errorf("line %q: want key: value", line)
		}
		value = strings.Trim(value, " \t")
		switch key {
		case "version":
			if version {
				continue
			}
			if value != "STSv1" {
				return nil, fmt.Errorf("version %q: want STSv1", value)
			}
			version = true
		case "mode":
			if mode {
				continue
			}
			switch m := Mode(value); m {
			case Enforce, Testing, None:
				p.Mode = m
			default:
				return nil, fmt.Errorf("mode %q: want enforce, testing or none", value)
			}
			mode = true
		case "max_age":
			if maxAge {
				continue
			}
			// ABNF 1*10DIGIT.
			if value == "" || len(value) > 10 || strings.Trim(value, "0123456789") != "" {
				return nil, fmt.Errorf("max_age %q: want seconds", value)
			}
			n, _ := strconv.ParseInt(value, 10, 64)
			p.MaxAge = time.Duration(min(n, int64(MaxAge/time.Second))) * time.Second
			maxAge = true
		case "mx":
			pattern := strings.ToLower(strings.TrimSuffix(value, "."))
			if err := checkPattern(pattern); err != nil {
				return nil, fmt.Errorf("mx %q: %w", value, err)
			}
			p.MX = append(p.MX, pattern)
		}
	}
	switch {
	case !version:
		return nil, errors.New("no version")
	case !mode:
		return nil, errors.New("no mode")
	case !maxAge:
		return nil, errors.New("no max_age")
	case len(p.MX) == 0 && p.Mode != None:
		return nil, fmt.Errorf("mode %s without mx", p.Mode)
	}
	return &p, nil
}

// validKey reports whether key is an RFC 8461 §3.2 sts-policy-ext-name:
// 1 to 32 letters, digits, "_", "-" or ".", starting with a letter or digit.
func validKey(key string) bool {
	if key == "" || len(key) > 32 {
		return false
	}
	for i := 0; i < len(key); i++ {
		b := key[i]
		alnum := 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
		if !alnum && (i == 0 || b != '_' && b != '-' && b != '.') {
			return false
		}
	}
	return true
}

// checkPattern checks an mx value: ["*."] Domain (RFC 8461 §3.2).
func checkPattern(p string) error {
	p = strings.TrimPrefix(p, "*.")
	if p == "" || len(p) > 253 {
		return errors.New("invalid length")
	}
	for label := range strings.SplitSeq(p, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("invalid label")
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-') {
				return fmt.Errorf("invalid character %q", b)
			}
		}
	}
	return nil
}

// Matches reports whether the policy lists host, an MX host name (RFC 8461
// §4.1): a pattern names it exactly, or a "*." pattern stands for its
// left-most label alone, so that "*.example.com" matches
// "mail.example.com" but neither "example.com" nor "a.b.example.com".
// Case and a trailing dot do not matter.
func (p *Policy) Matches(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, pattern := range p.MX {
		if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
			label, rest, found := strings.Cut(host, ".")
			if found && label != "" && rest == suffix {
				return true
			}
			continue
		}
		if host == pattern {
			return true
		}
	}
	return false
}

// String returns the policy in its published form.
func (p *Policy) String() string {
	var b strings.Builder
	b.WriteString("version: STSv1\r\nmode: ")
	b.WriteString(string(p.Mode))
	for _, mx := range p.MX {
		b.WriteString("\r\nmx: ")
		b.WriteString(mx)
	}
	b.WriteString("\r\nmax_age: ")
	b.WriteString(strconv.FormatInt(int64(p.MaxAge/time.Second), 10))
	b.WriteString("\r\n")
	return b.String()
}

// parseRecord reads the id of an _mta-sts TXT record (RFC 8461 §3.1):
// "v=STSv1; id=<1 to 32 letters and digits>", fields separated by ";" with
// optional spaces, v first, unknown fields ignored.
func parseRecord(txt string) (id string, err error) {
	fields := strings.Split(txt, ";")
	if strings.Trim(fields[0], " \t") != "v=STSv1" {
		return "", errors.New("does not start with v=STSv1")
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(strings.Trim(f, " \t"), "=")
		if !ok {
			if strings.Trim(f, " \t") == "" {
				continue
			}
			return "", fmt.Errorf("field %q: want key=value", f)
		}
		if k != "id" || id != "" {
			continue
		}
		if v == "" || len(v) > 32 || strings.IndexFunc(v, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
		}) >= 0 {
			return "", fmt.Errorf("id %q: want 1 to 32 letters and digits", v)
		}
		id = v
	}
	if id == "" {
		return "", errors.New("no id")
	}
	return id, nil
}
