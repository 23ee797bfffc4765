package mta

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want reply
		err  error
	}{
		{"single", "250 OK\r\n", reply{250, "", "OK"}, nil},
		{"enhanced", "550 5.1.1 no such user\r\n", reply{550, "5.1.1", "no such user"}, nil},
		{"bare code", "250\r\n", reply{250, "", ""}, nil},
		{"code and space", "354 \r\n", reply{354, "", ""}, nil},
		{"bare LF", "221 bye\n", reply{221, "", "bye"}, nil},
		{"multiline", "250-mx.test hello\r\n250-PIPELINING\r\n250 SIZE 1000\r\n", reply{250, "", "mx.test hello\nPIPELINING\nSIZE 1000"}, nil},
		{
			"multiline enhanced on every line", "451-4.7.1 greylisted,\r\n451 4.7.1 try again later\r\n",
			reply{451, "4.7.1", "greylisted,\ntry again later"}, nil,
		},
		{
			"enhanced on first line only", "550-5.7.1 blocked\r\n550 see https://example.test\r\n",
			reply{550, "5.7.1", "blocked\nsee https://example.test"}, nil,
		},
		{"class mismatch ignored", "250 5.0.0 odd\r\n", reply{250, "", "5.0.0 odd"}, nil},
		{"three-digit parts", "452 4.123.999 x\r\n", reply{452, "4.123.999", "x"}, nil},
		{"four-digit part is text", "452 4.1234.9 x\r\n", reply{452, "", "4.1234.9 x"}, nil},
		{"enhanced alone", "250 2.0.0\r\n", reply{250, "2.0.0", ""}, nil},
		{"invalid UTF-8 replaced", "550 bad \xff\r\n", reply{550, "", "bad \uFFFD"}, nil},
		{"code mismatch", "250-a\r\n251 b\r\n", reply{}, errMalformedReply},
		{"letters", "2x0 no\r\n", reply{}, errMalformedReply},
		{"first digit 1", "150 no\r\n", reply{}, errMalformedReply},
		{"first digit 6", "650 no\r\n", reply{}, errMalformedReply},
		{"bad separator", "250_ok\r\n", reply{}, errMalformedReply},
		{"short", "25\r\n", reply{}, errMalformedReply},
		{"empty line", "\r\n", reply{}, errMalformedReply},
		{"eof", "", reply{}, io.EOF},
		{"eof in line", "250 OK", reply{}, io.ErrUnexpectedEOF},
		{"eof in multiline", "250-a\r\n", reply{}, io.ErrUnexpectedEOF},
		{"line too long", "250 " + strings.Repeat("x", readBufferSize) + "\r\n", reply{}, errMalformedReply},
		{"too many lines", strings.Repeat("250-x\r\n", maxReplyLines) + "250 x\r\n", reply{}, errMalformedReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readReply(bufio.NewReaderSize(strings.NewReader(tc.in), readBufferSize))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReadReplyLeavesNextReply(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("250 a\r\n550 5.1.1 b\r\n"))
	r, err := readReply(br)
	require.NoError(t, err)
	require.Equal(t, 250, r.code)
	r, err = readReply(br)
	require.NoError(t, err)
	require.Equal(t, reply{550, "5.1.1", "b"}, r)
}

func TestParseEnhancedCode(t *testing.T) {
	for _, tc := range []struct {
		in, code, rest string
		ok             bool
	}{
		{"5.1.1 user unknown", "5.1.1", "user unknown", true},
		{"2.0.0", "2.0.0", "", true},
		{"4.7.10 x", "4.7.10", "x", true},
		{"5.999.999 x", "5.999.999", "x", true},
		{"3.0.0 x", "", "3.0.0 x", false},
		{"5.1 x", "", "5.1 x", false},
		{"5.1.", "", "5.1.", false},
		{"5..1 x", "", "5..1 x", false},
		{"5.1.1x", "", "5.1.1x", false},
		{"5.1000.1 x", "", "5.1000.1 x", false},
		{"", "", "", false},
	} {
		code, rest, ok := parseEnhancedCode(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.code, code, tc.in)
		require.Equal(t, tc.rest, rest, tc.in)
	}
}

func TestReplyString(t *testing.T) {
	require.Equal(t, "550 5.1.1 no such user here", reply{550, "5.1.1", "no such user\nhere"}.String())
	require.Equal(t, "250", reply{code: 250}.String())
}

// format writes r as a server would, every line carrying the enhanced code.
func (r reply) format() []byte {
	var b bytes.Buffer
	lines := strings.Split(r.text, "\n")
	for i, l := range lines {
		b.WriteString(strconv.Itoa(r.code))
		if i < len(lines)-1 {
			b.WriteByte('-')
		} else {
			b.WriteByte(' ')
		}
		if r.enhanced != "" {
			b.WriteString(r.enhanced)
			b.WriteByte(' ')
		}
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

func FuzzReadReply(f *testing.F) {
	for _, s := range []string{
		"250 OK\r\n",
		"550 5.1.1 no such user\r\n",
		"250-mx hello\r\n250-PIPELINING\r\n250 SIZE 10\r\n",
		"451-4.7.1 a\r\n451 4.7.1 b\r\n",
		"250\n",
		"354 \r\n",
		"250-a\r\n251 b\r\n",
		"550 5.1.1x\r\n",
		"250 2.0.0 2.0.0 twice\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := readReply(bufio.NewReaderSize(bytes.NewReader(in), readBufferSize))
		if err != nil {
			if !errors.Is(err, errMalformedReply) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if r.code < 200 || r.code > 599 {
			t.Fatalf("code %d out of range", r.code)
		}
		if r.enhanced != "" {
			code, rest, ok := parseEnhancedCode(r.enhanced)
			if !ok || code != r.enhanced || rest != "" || int(code[0]-'0') != r.code/100 {
				t.Fatalf("bad enhanced code %q for %d", r.enhanced, r.code)
			}
		}
		// What a server would send for r parses back to r, when it fits.
		wire := r.format()
		if bytes.Count(wire, []byte("\n")) > maxReplyLines {
			return
		}
		for _, l := range bytes.SplitAfter(wire, []byte("\n")) {
			if len(l) > readBufferSize-1 {
				return
			}
		}
		again, err := readReply(bufio.NewReaderSize(bytes.NewReader(wire), readBufferSize))
		if err != nil {
			t.Fatalf("reparsing %q: %v", wire, err)
		}
		if again != r {
			t.Fatalf("round trip: %#v became %#v via %q", r, again, wire)
		}
	})
}

func FuzzParseEnhancedCode(f *testing.F) {
	for _, s := range []string{"5.1.1 x", "2.0.0", "4.7.10 y", "5.1000.1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, rest, ok := parseEnhancedCode(s)
		if !ok {
			if code != "" || rest != s {
				t.Fatalf("failure must return (\"\", s): %q %q", code, rest)
			}
			return
		}
		if !strings.HasPrefix(s, code) {
			t.Fatalf("code %q is not a prefix of %q", code, s)
		}
		if s != code && s != code+" "+rest {
			t.Fatalf("%q != %q + %q", s, code, rest)
		}
		parts := strings.Split(code, ".")
		if len(parts) != 3 || !strings.Contains("245", parts[0]) || len(parts[0]) != 1 {
			t.Fatalf("bad code %q", code)
		}
		for _, p := range parts[1:] {
			if n, err := strconv.Atoi(p); err != nil || n < 0 || len(p) > 3 || len(p) == 0 {
				t.Fatalf("bad part %q in %q", p, code)
			}
		}
	})
}
