package smtp

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// read runs the data reader over in and returns what it yields and
// what is left of the stream after it.
func read(t *testing.T, in string) (data, rest string, err error) {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(in))
	b, err := io.ReadAll(&dataReader{r: br})
	left, _ := io.ReadAll(br)
	return string(b), string(left), err
}

func TestDataReaderEnds(t *testing.T) {
	for _, tc := range []struct {
		name, in, data, rest string
	}{
		{"plain", "a\r\nb\r\n.\r\nQUIT\r\n", "a\r\nb\r\n", "QUIT\r\n"},
		{"bare CR ends the last line", "a\r\r\n.\r\nQUIT\r\n", "a\r\r\n", "QUIT\r\n"},
		{"two bare CRs", "a\r\r\r\n.\r\n", "a\r\r\r\n", ""},
		{"stuffed dot after a bare CR", "a\r\r\n..b\r\n.\r\n", "a\r\r\n.b\r\n", ""},
		{"bare CR in a line", "a\rb\r\n.\r\n", "a\rb\r\n", ""},
		{"bare CR then a dot is no end", "a\r.\r\nb\r\n.\r\n", "a\r.\r\nb\r\n", ""},
		{"bare LF then a dot is no end", "a\n.\r\nb\r\n.\r\n", "a\n.\r\nb\r\n", ""},
		{"bare LFs around a dot are no end", "a\n.\nb\r\n.\r\n", "a\n.\nb\r\n", ""},
		{"empty", ".\r\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, rest, err := read(t, tc.in)
			if err != nil {
				t.Fatalf("read %q: %v", tc.in, err)
			}
			if data != tc.data || rest != tc.rest {
				t.Fatalf("read %q = %q, rest %q; want %q, rest %q", tc.in, data, rest, tc.data, tc.rest)
			}
		})
	}
}

// FuzzDataReader checks that whatever the message, a stream of its
// dot-stuffed lines, each ended by CRLF, then ".\r\n" is read back as
// the message, to the end marker and not a byte further.
func FuzzDataReader(f *testing.F) {
	for _, s := range []string{"a\r", "\r", "a\r\rb", ".x", "a\n.", "\r.\r", "x\r\n.\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		lines := strings.Split(body, "\r\n")
		var in, want strings.Builder
		for _, l := range lines {
			want.WriteString(l + "\r\n")
			if strings.HasPrefix(l, ".") {
				l = "." + l
			}
			in.WriteString(l + "\r\n")
		}
		in.WriteString(".\r\nNEXT")
		data, rest, err := read(t, in.String())
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("read %q: %v", in.String(), err)
		}
		if data != want.String() || rest != "NEXT" {
			t.Fatalf("read %q = %q, rest %q; want %q, rest %q", in.String(), data, rest, want.String(), "NEXT")
		}
	})
}
