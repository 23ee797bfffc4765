package mimewalk

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/emersion/go-message"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/sourcetest"
)

// nested is a message of depth multiparts, one inside the other, the
// innermost holding leaves text parts of body.
func nested(depth, leaves int, body string) string {
	var b strings.Builder
	b.WriteString("Subject: x\r\n")
	for d := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n", d, d)
	}
	for i := range leaves {
		if i > 0 {
			fmt.Fprintf(&b, "--b%d\r\n", depth-1)
		}
		fmt.Fprintf(&b, "Content-Type: text/plain\r\n\r\n%s\r\n", body)
	}
	for d := depth - 1; d >= 0; d-- {
		fmt.Fprintf(&b, "--b%d--\r\n", d)
	}
	return b.String()
}

type leaf struct {
	depth int
	body  string
	more  bool
}

func walk(t *testing.T, raw string, lim Limits, n int64) ([]leaf, Result) {
	t.Helper()
	e, err := message.Read(strings.NewReader(raw))
	require.NoError(t, err)
	var got []leaf
	res := Walk(e, lim, func(p Part) {
		b, more, _ := p.Read(n)
		got = append(got, leaf{p.Depth, string(b), more})
	})
	return got, res
}

func TestWalkBounds(t *testing.T) {
	lim := Limits{MaxParts: 10, MaxDepth: 3, MaxBytes: 1 << 20}
	for _, tc := range []struct {
		name      string
		raw       string
		lim       Limits
		n         int64
		leaves    []leaf
		parts     int
		truncated bool
	}{
		{name: "single part", raw: "Subject: x\r\n\r\nhello", lim: lim, leaves: []leaf{{0, "hello", false}}, parts: 1},
		{name: "nested within depth", raw: nested(3, 2, "hi"), lim: lim,
			leaves: []leaf{{3, "hi", false}, {3, "hi", false}}, parts: 5},
		// A multipart at MaxDepth is not opened.
		{name: "too deep", raw: nested(4, 1, "hi"), lim: lim, parts: 4, truncated: true},
		{name: "parts at the cap", raw: nested(1, 9, "hi"), lim: lim, parts: 10,
			leaves: []leaf{{1, "hi", false}, {1, "hi", false}, {1, "hi", false}, {1, "hi", false}, {1, "hi", false},
				{1, "hi", false}, {1, "hi", false}, {1, "hi", false}, {1, "hi", false}}},
		{name: "parts over the cap", raw: nested(1, 10, "hi"), lim: lim, parts: 10, truncated: true,
			leaves: []leaf{{1, "hi", false}, {1, "hi", false}, {1, "hi", false}, {1, "hi", false}, {1, "hi", false},
				{1, "hi", false}, {1, "hi", false}, {1, "hi", false}, {1, "hi", false}}},
		// A read cut by its own n is the caller's to judge.
		{name: "read cut by n", raw: nested(1, 1, "hello"), lim: lim, n: 3, parts: 2,
			leaves: []leaf{{1, "hel", true}}},
		// The walk's budget is shared by every read and marks the walk.
		{name: "bytes over the budget", raw: nested(1, 3, "hello"), lim: Limits{MaxParts: 10, MaxDepth: 3, MaxBytes: 8},
			parts: 4, truncated: true, leaves: []leaf{{1, "hello", false}, {1, "hel", true}, {1, "", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := walk(t, tc.raw, tc.lim, tc.n)
			require.Equal(t, tc.leaves, got)
			require.Equal(t, Result{Parts: tc.parts, Truncated: tc.truncated}, res)
		})
	}
}

// FuzzWalk: whatever the input, a walk visits at most MaxParts entities,
// opens no multipart deeper than MaxDepth and reads at most MaxBytes.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{nested(2, 3, "hi"), nested(8, 1, "deep"), nested(1, 40, "many"),
		"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--x--\r\n",
		"Content-Type: text/plain; charset=iso-8859-1\r\n\r\n\xe9t\xe9", "no header at all"} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxParts: 8, MaxDepth: 3, MaxBytes: 64}
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, _ := message.Read(bytes.NewReader(raw))
		if e == nil {
			return // no header to parse: the parsers refuse it before any walk
		}
		var read int64
		leaves := 0
		res := Walk(e, lim, func(p Part) {
			leaves++
			if p.Depth > lim.MaxDepth {
				t.Fatalf("a part at depth %d", p.Depth)
			}
			b, _, _ := p.Read(0)
			read += int64(len(b))
		})
		if res.Parts > lim.MaxParts || leaves > res.Parts {
			t.Fatalf("%d parts, %d leaves, over %d", res.Parts, leaves, lim.MaxParts)
		}
		if read > lim.MaxBytes {
			t.Fatalf("%d bytes read, over %d", read, lim.MaxBytes)
		}
	})
}

// TestParsersUseTheWalker: received mail and reports open multiparts only
// through Walk, so every MIME walk is bounded the same way.
func TestParsersUseTheWalker(t *testing.T) {
	sourcetest.Forbid(t, []string{"../received", "../reports"}, []string{"MultipartReader("},
		"walk MIME parts with mimewalk.Walk")
}
