package mtasts

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want *Policy
		err  string
	}{
		{
			name: "RFC 8461 §3.2 example",
			body: "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmx: backupmx.example.com\r\nmax_age: 604800\r\n",
			want: &Policy{Mode: Enforce, MX: []string{"mail.example.com", "*.example.net", "backupmx.example.com"}, MaxAge: 604800 * time.Second},
		},
		{
			name: "LF line ends, spaces, case and trailing dots",
			body: "version:STSv1\nmode:   testing\t\nmx: MX.Example.COM.\nmax_age: 86400",
			want: &Policy{Mode: Testing, MX: []string{"mx.example.com"}, MaxAge: 86400 * time.Second},
		},
		{
			name: "mode none needs no mx",
			body: "version: STSv1\nmode: none\nmax_age: 0\n",
			want: &Policy{Mode: None, MaxAge: 0},
		},
		{
			name: "unknown keys ignored, first occurrence wins",
			body: "version: STSv1\nmode: testing\nmode: enforce\nx-extra: whatever: here\nmx: a.test\nmax_age: 60\nmax_age: 120\n",
			want: &Policy{Mode: Testing, MX: []string{"a.test"}, MaxAge: time.Minute},
		},
		{
			name: "max_age capped at a year",
			body: "version: STSv1\nmode: enforce\nmx: a.test\nmax_age: 9999999999\n",
			want: &Policy{Mode: Enforce, MX: []string{"a.test"}, MaxAge: MaxAge},
		},
		{name: "no version", body: "mode: enforce\nmx: a.test\nmax_age: 60\n", err: "no version"},
		{name: "wrong version", body: "version: STSv2\nmode: enforce\nmx: a.test\nmax_age: 60\n", err: "want STSv1"},
		{name: "no mode", body: "version: STSv1\nmx: a.test\nmax_age: 60\n", err: "no mode"},
		{name: "bad mode", body: "version: STSv1\nmode: strict\nmx: a.test\nmax_age: 60\n", err: "want enforce, testing or none"},
		{name: "no max_age", body: "version: STSv1\nmode: enforce\nmx: a.test\n", err: "no max_age"},
		{name: "negative max_age", body: "version: STSv1\nmode: enforce\nmx: a.test\nmax_age: -1\n", err: "want seconds"},
		{name: "max_age too long", body: "version: STSv1\nmode: enforce\nmx: a.test\nmax_age: 12345678901\n", err: "want seconds"},
		{name: "enforce without mx", body: "version: STSv1\nmode: enforce\nmax_age: 60\n", err: "without mx"},
		{name: "wildcard in the middle", body: "version: STSv1\nmode: enforce\nmx: a.*.test\nmax_age: 60\n", err: "invalid character"},
		{name: "empty label", body: "version: STSv1\nmode: enforce\nmx: a..test\nmax_age: 60\n", err: "invalid label"},
		{name: "not key: value", body: "version: STSv1\nmode enforce\n", err: "want key: value"},
		{name: "HTML", body: "<html><body>not found</body></html>", err: "want key: value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.body)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// RFC 8461 §4.1: a wildcard stands for exactly one left-most label.
func TestMatches(t *testing.T) {
	p := &Policy{Mode: Enforce, MX: []string{"mail.example.com", "*.example.net"}}
	for host, want := range map[string]bool{
		"mail.example.com":   true,
		"MAIL.example.com.":  true,
		"other.example.com":  false,
		"example.com":        false,
		"mx1.example.net":    true,
		"Mx1.Example.Net.":   true,
		"example.net":        false,
		"a.b.example.net":    false,
		".example.net":       false,
		"mail.example.com.x": false,
	} {
		require.Equal(t, want, p.Matches(host), host)
	}
}

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		txt, id, err string
	}{
		{txt: "v=STSv1; id=20160831085700Z;", id: "20160831085700Z"},
		{txt: "v=STSv1;id=abc", id: "abc"},
		{txt: "v=STSv1; ext=1; id=abc; id=def", id: "abc"},
		{txt: "v=STSv1; id=", err: "want 1 to 32"},
		{txt: "v=STSv1; id=a-b", err: "want 1 to 32"},
		{txt: "v=STSv1; id=" + strings.Repeat("a", 33), err: "want 1 to 32"},
		{txt: "v=STSv1;", err: "no id"},
		{txt: "id=abc; v=STSv1", err: "does not start with v=STSv1"},
		{txt: "v=STSv1; junk", err: "want key=value"},
	} {
		id, err := parseRecord(tc.txt)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.txt)
			continue
		}
		require.NoError(t, err, tc.txt)
		require.Equal(t, tc.id, id, tc.txt)
	}
}

// FuzzParse checks that Parse never panics and that what it accepts is a
// well-formed policy that reads back the same from its published form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmax_age: 604800\r\n",
		"version: STSv1\nmode: none\nmax_age: 0\n",
		"version: STSv1\nmode: testing\nmx: a.test\nmax_age: 9999999999\nfoo: bar\n",
		"version: STSv1\nmode: enforce\nmx: *.\nmax_age: 1\n",
		"\n\n:\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := Parse(body)
		if err != nil {
			return
		}
		if p.Mode != Enforce && p.Mode != Testing && p.Mode != None {
			t.Fatalf("mode %q", p.Mode)
		}
		if p.MaxAge < 0 || p.MaxAge > MaxAge {
			t.Fatalf("max_age %v", p.MaxAge)
		}
		if len(p.MX) == 0 && p.Mode != None {
			t.Fatalf("mode %s without mx", p.Mode)
		}
		for _, mx := range p.MX {
			if mx != strings.ToLower(mx) || strings.HasSuffix(mx, ".") || mx == "" {
				t.Fatalf("mx %q not normalized", mx)
			}
			if !p.Matches(strings.Replace(mx, "*", "x", 1)) {
				t.Fatalf("policy does not match its own mx %q", mx)
			}
		}
		again, err := Parse(p.String())
		if err != nil {
			t.Fatalf("reading back %q: %v", p.String(), err)
		}
		if again.String() != p.String() {
			t.Fatalf("read back %q as %q", p.String(), again.String())
		}
	})
}

// FuzzParseRecord checks that parseRecord never panics and returns only
// ids of the RFC 8461 §3.1 form.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{"v=STSv1; id=20160831085700Z;", "v=STSv1;id=a;id=b", "v=STSv1; =; id=x", ";;;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, txt string) {
		id, err := parseRecord(txt)
		if err != nil {
			return
		}
		if id == "" || len(id) > 32 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
			t.Fatalf("id %q from %q", id, txt)
		}
	})
}
